// The paged KV pool: slots of a block table, reads in place or gathered, copy-on-write copies.
#include "core/engine/kv_cache.h"

#include <gtest/gtest.h>

#include <cmath>
#include <tuple>
#include <vector>

namespace moesplit::engine {
namespace {

ModelConfig Mla() {
  ModelConfig c;
  c.arch = ModelArch::kDeepseek2;
  c.n_layer = 2;
  c.kv_lora_rank = 6;
  c.qk_rope = 2;
  return c;
}

// The value written for (layer, position, column) of a sequence: distinct everywhere.
float Value(int64_t il, int64_t pos, int64_t i) { return 1000.0f * il + 10.0f * pos + i; }

void Fill(KvCache& kv, std::span<const int32_t> blocks, int64_t n) {
  std::vector<float> row(static_cast<size_t>(kv.width(KvCache::kK)));
  for (int64_t il = 0; il < 2; ++il) {
    for (int64_t p = 0; p < n; ++p) {
      for (size_t i = 0; i < row.size(); ++i) row[i] = Value(il, p, static_cast<int64_t>(i));
      kv.Write(KvCache::kK, il, kv.Slot(blocks, p), row.data());
    }
  }
}

void ExpectSequence(const KvCache& kv, std::span<const int32_t> blocks, int64_t n,
                    bool in_place) {
  const int64_t W = kv.width(KvCache::kK);
  for (int64_t il = 0; il < 2; ++il) {
    std::vector<float> buf(3, NAN);
    const float* rows = kv.Rows(KvCache::kK, il, blocks, n, &buf);
    EXPECT_EQ(rows != buf.data(), in_place) << "layer " << il;
    for (int64_t p = 0; p < n; ++p) {
      for (int64_t i = 0; i < W; ++i) {
        ASSERT_EQ(rows[p * W + i], Value(il, p, i)) << "layer " << il << " pos " << p;
      }
    }
  }
}

TEST(KvCacheTest, PoolIsWholeBlocks) {
  KvCache kv(Mla(), 10, KvCacheType::kF32, 4);
  EXPECT_EQ(kv.n_blocks(), 3);
  EXPECT_EQ(kv.slots(), 12);
  // 2 layers x 12 slots x 8 floats (the latent rows only: no transposed copy).
  EXPECT_EQ(kv.bytes(), 2u * 12u * 8u * 4u);
  const std::vector<int32_t> blocks = {2, 0};
  EXPECT_EQ(kv.Slot(blocks, 0), 8);
  EXPECT_EQ(kv.Slot(blocks, 5), 1);
}

TEST(KvCacheTest, ConsecutiveBlocksReadInPlaceOthersGathered) {
  for (KvCacheType type : {KvCacheType::kF32, KvCacheType::kF16}) {
    KvCache kv(Mla(), 16, type, 4);
    const std::vector<int32_t> run = {1, 2}, scattered = {3, 0};
    Fill(kv, run, 7);
    Fill(kv, scattered, 6);
    ExpectSequence(kv, run, 7, type == KvCacheType::kF32);
    ExpectSequence(kv, scattered, 6, false);
  }
}

// RowRange: any positions [p0, p0 + n), in place where their blocks are consecutive (f32) even
// when the table's other blocks are not, gathered across a break, converted from f16.
TEST(KvCacheTest, RowRangeReadsInPlaceWhereItsBlocksAreConsecutive) {
  for (KvCacheType type : {KvCacheType::kF32, KvCacheType::kF16}) {
    KvCache kv(Mla(), 24, type, 4);
    const std::vector<int32_t> blocks = {5, 0, 1, 3};  // positions 4-11 consecutive, then a break
    Fill(kv, blocks, 15);
    const int64_t W = kv.width(KvCache::kK);
    for (const auto& [p0, n, in_place] : {std::tuple<int64_t, int64_t, bool>{5, 6, true},
                                          {0, 3, true},
                                          {2, 5, false},
                                          {9, 6, false},
                                          {12, 3, true}}) {
      for (int64_t il = 0; il < 2; ++il) {
        std::vector<float> buf(1, NAN);
        const float* rows = kv.RowRange(KvCache::kK, il, blocks, p0, n, &buf);
        EXPECT_EQ(rows != buf.data(), in_place && type == KvCacheType::kF32)
            << "positions " << p0 << "+" << n;
        for (int64_t p = 0; p < n; ++p) {
          for (int64_t i = 0; i < W; ++i) {
            ASSERT_EQ(rows[p * W + i], Value(il, p0 + p, i)) << "layer " << il << " pos " << p0 + p;
          }
        }
      }
    }
  }
}

TEST(KvCacheTest, CopyBlockCopiesEveryLayer) {
  for (KvCacheType type : {KvCacheType::kF32, KvCacheType::kF16}) {
    KvCache kv(Mla(), 16, type, 4);
    const std::vector<int32_t> a = {1, 2};
    Fill(kv, a, 8);
    kv.CopyBlock(2, 3);  // a's second block into block 3
    const std::vector<int32_t> b = {1, 3};
    ExpectSequence(kv, b, 8, false);
  }
}

// The pool is reserved, not written: DeepSeek-V2-Lite's latent rows (27 layers, 512 + 64, f32)
// at 4096 positions are 255 MB, of which one written position per layer touches 27 row pages.
TEST(KvCacheTest, MemoryBecomesResidentAsPositionsAreWritten) {
  ModelConfig c = Mla();
  c.n_layer = 27;
  c.kv_lora_rank = 512;
  c.qk_rope = 64;
  auto kv = KvCache::Create(c, 4096);
  ASSERT_TRUE(kv.ok()) << kv.status().ToString();
  EXPECT_EQ((*kv)->bytes(), 27u * 4096u * 576u * 4u);
  EXPECT_LE((*kv)->resident_bytes(), 8u << 20);
  std::vector<float> row(576, 1.0f);
  const std::vector<int32_t> blocks = {0};
  for (int64_t il = 0; il < 27; ++il)
    (*kv)->Write(KvCache::kK, il, (*kv)->Slot(blocks, 0), row.data());
  const uint64_t one = (*kv)->resident_bytes();
  EXPECT_GE(one, 27u * 576u * 4u);     // every layer's written row is resident
  EXPECT_LE(one, (*kv)->bytes() / 4);  // and the rest of the pool stays unwritten
  std::vector<float> out;
  EXPECT_EQ((*kv)->Rows(KvCache::kK, 26, blocks, 1, &out)[575], 1.0f);
}

TEST(KvCacheTest, APoolLargerThanRamIsAClearError) {
  ModelConfig c = Mla();
  c.n_layer = 61;
  c.kv_lora_rank = 512;
  c.qk_rope = 64;
  // 61 layers x 2304 B x 2^30 positions = 151 TB.
  auto kv = KvCache::Create(c, int64_t{1} << 30);
  ASSERT_FALSE(kv.ok());
  const std::string m = kv.status().ToString();
  EXPECT_NE(m.find("RESOURCE_EXHAUSTED"), std::string::npos) << m;
  EXPECT_NE(m.find("KV cache of 1073741824 positions (61 layers x 2304 B per position)"),
            std::string::npos)
      << m;
  EXPECT_NE(m.find("lower -c / --ctx-size"), std::string::npos) << m;
}

}  // namespace
}  // namespace moesplit::engine
