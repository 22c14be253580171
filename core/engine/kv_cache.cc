#include "core/engine/kv_cache.h"

#include <algorithm>
#include <cstring>
#include <string>

#include "core/base/float16.h"
#include "core/base/int_math.h"
#include "core/base/status.h"

namespace moesplit::engine {

KvCache::KvCache(const ModelConfig& c, int64_t positions, KvCacheType type, int64_t block_size,
                 Unallocated)
    : block_(block_size),
      n_blocks_(CeilDiv(std::max<int64_t>(positions, 1), block_size)),
      slots_(n_blocks_ * block_size),
      n_layer_(c.n_layer),
      type_(type) {
  MOESPLIT_CHECK(block_size > 0, "KvCache: block size ", block_size);
  if (c.arch == ModelArch::kDeepseek2) {
    width_[kK] = c.kv_lora_rank + c.qk_rope;
    width_[kV] = 0;
  } else {
    width_[kK] = c.n_head_kv * c.head_dim_k;
    width_[kV] = c.n_head_kv * c.head_dim_v;
  }
}

KvCache::KvCache(const ModelConfig& c, int64_t positions, KvCacheType type, int64_t block_size)
    : KvCache(c, positions, type, block_size, Unallocated{}) {
  const Status s = Allocate();
  MOESPLIT_CHECK(s.ok(), s.ToString());
}

StatusOr<std::unique_ptr<KvCache>> KvCache::Create(const ModelConfig& c, int64_t positions,
                                                   KvCacheType type, int64_t block_size) {
  std::unique_ptr<KvCache> kv(new KvCache(c, positions, type, block_size, Unallocated{}));
  MOESPLIT_RETURN_IF_ERROR(kv->Allocate());
  return kv;
}

Status KvCache::Allocate() {
  const uint64_t row_bytes = static_cast<uint64_t>(width_[kK] + width_[kV]) * element_bytes();
  const std::string what = "KV cache of " + std::to_string(slots_) + " positions (" +
                           std::to_string(n_layer_) + " layers x " + std::to_string(row_bytes) +
                           " B per position)";
  const char* hint = "lower -c / --ctx-size";
  // The pages fill as positions are written: a pool larger than RAM could never be filled.
  const uint64_t total = row_bytes * static_cast<uint64_t>(n_layer_ * slots_);
  const uint64_t ram = PhysicalMemoryBytes();
  if (ram > 0 && total > ram) return CannotReserveError(total, what, hint);
  for (int p = 0; p < 2; ++p) {
    const size_t n = static_cast<size_t>(n_layer_ * slots_ * width_[p]);
    if (type_ == KvCacheType::kF32) {
      MOESPLIT_ASSIGN_OR_RETURN(f32_[p], ZeroedArray<float>::Map(n, what, hint));
    } else {
      MOESPLIT_ASSIGN_OR_RETURN(f16_[p], ZeroedArray<uint16_t>::Map(n, what, hint));
    }
  }
  return Status::Ok();
}

uint64_t KvCache::bytes() const {
  return (f32_[0].size() + f32_[1].size()) * sizeof(float) +
         (f16_[0].size() + f16_[1].size()) * sizeof(uint16_t);
}

uint64_t KvCache::resident_bytes() const {
  return f32_[0].ResidentBytes() + f32_[1].ResidentBytes() + f16_[0].ResidentBytes() +
         f16_[1].ResidentBytes();
}

uint64_t KvCache::bytes_per_block() const { return bytes() / static_cast<uint64_t>(n_blocks_); }

void KvCache::Write(Part part, int64_t il, int64_t slot, const float* row) {
  const size_t at = Index(part, il, slot);
  if (type_ == KvCacheType::kF32) {
    std::copy(row, row + width_[part], f32_[part].data() + at);
    return;
  }
  for (int64_t i = 0; i < width_[part]; ++i) f16_[part][at + i] = Fp32ToFp16(row[i]);
}

bool KvCache::Contiguous(std::span<const int32_t> blocks, int64_t p0, int64_t n) const {
  if (n <= 0) return true;
  const int64_t b0 = p0 / block_, b1 = (p0 + n - 1) / block_;  // the blocks the positions use
  MOESPLIT_CHECK(static_cast<int64_t>(blocks.size()) > b1, "KvCache: block table of ",
                 blocks.size(), " blocks for positions ", p0, "..", p0 + n - 1);
  for (int64_t b = b0 + 1; b <= b1; ++b) {
    if (blocks[b] != blocks[b0] + (b - b0)) return false;
  }
  return true;
}

const float* KvCache::Rows(Part part, int64_t il, std::span<const int32_t> blocks, int64_t n,
                           std::vector<float>* buffer) const {
  return RowRange(part, il, blocks, 0, n, buffer);
}

const float* KvCache::RowRange(Part part, int64_t il, std::span<const int32_t> blocks, int64_t p0,
                               int64_t n, std::vector<float>* buffer) const {
  const int64_t w = width_[part];
  if (type_ == KvCacheType::kF32 && Contiguous(blocks, p0, n)) {
    return f32_[part].data() + Index(part, il, n > 0 ? Slot(blocks, p0) : 0);
  }
  buffer->resize(static_cast<size_t>(n * w));
  for (int64_t p = p0; p < p0 + n;) {  // the positions' part of one block at a time
    const int64_t run = std::min(block_ - p % block_, p0 + n - p);
    const size_t at = Index(part, il, Slot(blocks, p));
    const size_t count = static_cast<size_t>(run * w);
    float* dst = buffer->data() + (p - p0) * w;
    if (type_ == KvCacheType::kF32) {
      std::memcpy(dst, f32_[part].data() + at, count * sizeof(float));
    } else {
      for (size_t i = 0; i < count; ++i) dst[i] = Fp16ToFp32(f16_[part][at + i]);
    }
    p += run;
  }
  return buffer->data();
}

void KvCache::CopyBlock(int32_t src, int32_t dst) {
  MOESPLIT_CHECK(src >= 0 && src < n_blocks_ && dst >= 0 && dst < n_blocks_,
                 "KvCache::CopyBlock: blocks ", src, " -> ", dst, " of ", n_blocks_);
  // Per layer, the block's block_ x width consecutive values.
  auto copy = [&](auto& v, int64_t width) {
    for (int64_t il = 0; il < n_layer_; ++il) {
      const int64_t base = il * slots_ * width;
      std::copy_n(v.data() + base + src * block_ * width, block_ * width,
                  v.data() + base + dst * block_ * width);
    }
  };
  for (int p = 0; p < 2; ++p) {
    if (width_[p] == 0) continue;
    if (type_ == KvCacheType::kF32) {
      copy(f32_[p], width_[p]);
    } else {
      copy(f16_[p], width_[p]);
    }
  }
}

}  // namespace moesplit::engine
