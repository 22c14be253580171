// Load-time repacking (cpu_kernels/quant/repack.h) of the K-quants and the kQ4_K_R16 /
// kQ5_K_R16 / kQ6_K_R16 kernels of every ISA tier:
//   - the repack is lossless (random block bytes round-trip exactly) and never a file type;
//   - every tier's R16 gemm against the scalar Q4_K / Q5_K / Q6_K dot of the original rows
//     (1e-5 of sum |w a|), for 16..48 rows (48: one Q4_K token runs groups two at a time, then
//     one), 1..48 tokens (on AVX-512 VNNI: Q5_K one or two tokens on the group kernel, more on the
//     row-lane tile; Q6_K the group tile 4, 2, 1 tokens at a time), 1..28 blocks, NaN-poisoned
//     outputs, guard cells;
//   - AVX-512 VNNI: several Q4_K tokens give the Q4_K row-lane GEMM's bits (same buffer values);
//   - extreme blocks (max quants, scales and mins, activations at +-127) stay exact-ish:
//     the integer sums must not overflow;
//   - LoadLayout repacks only where the tier has native R16 tiles.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <set>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "core/base/dtype.h"
#include "core/base/float16.h"
#include "cpu_kernels/cpu_features.h"
#include "cpu_kernels/gemv/gemv.h"
#include "cpu_kernels/quant/repack.h"
#include "tests/cpu_kernels/kquant_test_util.h"
#include "tests/isa_tiers.h"

namespace moesplit::gemv {
namespace {

using cpu::IsaTier;
using namespace kquant_testing;  // NOLINT: the shared matrix / activation helpers

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr float kSentinel = -12345.0f;

bool TierAvailable(IsaTier tier) {
  return static_cast<int>(tier) <= static_cast<int>(cpu::BestTier(cpu::DetectCpuFeatures()));
}

constexpr GgmlType kFileTypes[] = {GgmlType::kQ4_K, GgmlType::kQ5_K, GgmlType::kQ6_K};

// The rows of a K-quant matrix repacked into 16-row groups ([rows x RowBytes(R16, n)] bytes,
// then 64 guard bytes of 0xEE).
std::vector<uint8_t> Repacked(const Matrix& w) {
  const GgmlType r16 = quant::RepackedType(w.type, w.rows);
  std::vector<uint8_t> out(w.rows * RowBytes(r16, w.n) + 64, 0xEE);
  quant::RepackRows(w.type, w.Row(0), w.stride, w.rows, w.n, out.data());
  return out;
}

TEST(RepackKQuant, RoundTripIsLossless) {
  for (GgmlType type : kFileTypes) {
    const GgmlType r16 = quant::RepackedType(type, 32);
    for (int64_t n : {256, 2048, 7168}) {
      const Matrix w = RandomByteWeights(type, 32, n, 0, static_cast<uint32_t>(n));
      const std::vector<uint8_t> r = Repacked(w);
      Matrix back = NewMatrix(type, 32, n, 0);
      const size_t group = 16 * RowBytes(r16, n);
      for (int g = 0; g < 2; ++g) {
        quant::UnpackRows16(r16, r.data() + g * group, n, back.Row(16 * g), back.stride);
      }
      for (int64_t row = 0; row < 32; ++row) {
        ASSERT_EQ(std::memcmp(w.Row(row), back.Row(row), RowBytes(type, n)), 0)
            << TypeName(type) << " n=" << n << " row " << row;
      }
      EXPECT_EQ(r[32 * RowBytes(r16, n)], 0xEE) << "repack wrote past the end";
    }
  }
}

TEST(RepackKQuant, InternalTypeIsNeverAFileType) {
  EXPECT_EQ(FindTypeTraits(static_cast<uint32_t>(GgmlType::kQ4_K_R16)), nullptr);
  EXPECT_FALSE(TypeFromName("q4_K_r16").ok());
  EXPECT_EQ(RowBytes(GgmlType::kQ4_K_R16, 2048), 8 * 148);
  EXPECT_EQ(RowGroup(GgmlType::kQ4_K_R16), 16);
  EXPECT_EQ(RowGroup(GgmlType::kQ4_K), 1);
  EXPECT_EQ(quant::RepackedType(GgmlType::kQ4_K, 32), GgmlType::kQ4_K_R16);
  EXPECT_EQ(quant::RepackedType(GgmlType::kQ4_K, 24), GgmlType::kQ4_K);  // not whole groups
  EXPECT_EQ(quant::RepackedType(GgmlType::kTQ2_0, 32), GgmlType::kTQ2_0);  // no R16 layout
  // Q6_K: the same bytes as the file type, rearranged.
  EXPECT_EQ(FindTypeTraits(static_cast<uint32_t>(GgmlType::kQ6_K_R16)), nullptr);
  EXPECT_FALSE(TypeFromName("q6_K_r16").ok());
  EXPECT_EQ(RowBytes(GgmlType::kQ6_K_R16, 2048), RowBytes(GgmlType::kQ6_K, 2048));
  EXPECT_EQ(RowGroup(GgmlType::kQ6_K_R16), 16);
  EXPECT_EQ(quant::RepackedType(GgmlType::kQ6_K, 32), GgmlType::kQ6_K_R16);
  EXPECT_EQ(quant::RepackedType(GgmlType::kQ6_K, 40), GgmlType::kQ6_K);
  EXPECT_EQ(quant::UnpackedType(GgmlType::kQ6_K_R16), GgmlType::kQ6_K);
  // Q5_K: +4 bytes per row and block (the unpacked scales), as Q4_K.
  EXPECT_EQ(FindTypeTraits(static_cast<uint32_t>(GgmlType::kQ5_K_R16)), nullptr);
  EXPECT_FALSE(TypeFromName("q5_K_r16").ok());
  EXPECT_EQ(RowBytes(GgmlType::kQ5_K_R16, 2048), 8 * 180);
  EXPECT_EQ(RowGroup(GgmlType::kQ5_K_R16), 16);
  EXPECT_EQ(quant::RepackedType(GgmlType::kQ5_K, 32), GgmlType::kQ5_K_R16);
  EXPECT_EQ(quant::RepackedType(GgmlType::kQ5_K, 8), GgmlType::kQ5_K);
  EXPECT_EQ(quant::UnpackedType(GgmlType::kQ5_K_R16), GgmlType::kQ5_K);
}

TEST(RepackKQuant, LoadLayoutOnlyWhereTheTierHasNativeTiles) {
  for (int i = 0; i < cpu::kNumIsaTiers; ++i) {
    const auto tier = static_cast<IsaTier>(i);
    const GemvKernels& k = KernelsFor(tier);
    const bool native = tier >= IsaTier::kAvx512Vnni;
    for (GgmlType type : kFileTypes) {
      const GgmlType r16 = quant::RepackedType(type, 16);
      ASSERT_NE(k.For(r16), nullptr) << cpu::IsaTierName(tier);
      EXPECT_EQ(k.For(r16)->dot, nullptr);
      EXPECT_EQ(k.For(r16)->act_type, GgmlType::kQ8_K);
      EXPECT_EQ(LoadLayout(k, type, 1408), native ? r16 : type) << cpu::IsaTierName(tier);
      EXPECT_EQ(LoadLayout(k, type, 1400), type);
    }
    EXPECT_EQ(LoadLayout(k, GgmlType::kTQ2_0, 2048), GgmlType::kTQ2_0);  // no R16 layout
  }
}

// Runs tier's gemm of the layout r16 (its decode reading as `read` says) on packed; y poisoned
// (NaN in the tile, a sentinel in the ldy padding). Returns y [n_tok x ldy].
std::vector<float> RunR16(IsaTier tier, GgmlType r16, const std::vector<uint8_t>& packed,
                          int64_t rows, int64_t n, const Acts& a, int64_t n_tok, int64_t ldy,
                          DecodeRead read = DecodeRead::kPrefetched) {
  std::vector<float> y(n_tok * ldy, kSentinel);
  for (int64_t t = 0; t < n_tok; ++t) {
    for (int64_t r = 0; r < rows; ++r) y[t * ldy + r] = kNaN;
  }
  KernelsFor(tier, read)
      .For(r16)
      ->gemm(packed.data(), static_cast<size_t>(RowBytes(r16, n)), rows, a.Row(0), a.stride, n_tok,
             n, y.data(), ldy);
  return y;
}

class R16GemmTest : public ::testing::TestWithParam<IsaTier> {};

void CheckAgainstScalarDot(IsaTier tier, GgmlType type) {
  const GgmlType r16 = quant::RepackedType(type, 16);
  const DotFn ref = KernelsFor(IsaTier::kScalar).For(type)->dot;
  for (int64_t n : {256, 2304, 7168}) {
    for (bool random_bytes : {false, true}) {
      const Matrix w =
          random_bytes ? RandomByteWeights(type, 48, n, 0, 5) : QuantizedWeights(type, 48, n, 0, 6);
      const std::vector<uint8_t> packed = Repacked(w);
      const Acts a = RandomActs(48, n, 36, 99);
      // n_tok 1 (decode) in both read modes: one and two groups at a time, with and without
      // software prefetch (rows 16: one group; 48: 2 + 1 or 1 + 1 + 1).
      for (int64_t rows : {16, 48}) {
        for (auto [n_tok, read] :
             kquant_testing::DecodeBothModesThen({2, 3, 4, 7, 8, 9, 16, 17, 33, 48})) {
          const int64_t ldy = rows + 3;
          const std::vector<float> y = RunR16(tier, r16, packed, rows, n, a, n_tok, ldy, read);
          for (int64_t t = 0; t < n_tok; ++t) {
            for (int64_t r = 0; r < rows; ++r) {
              const Exact e = ExactDot(type, w.Row(r), a.Row(t), n);
              ASSERT_NEAR(y[t * ldy + r], ref(w.Row(r), a.Row(t), n), 1e-5 * e.norm)
                  << cpu::IsaTierName(tier) << " " << DecodeReadName(read) << " n=" << n
                  << " rows=" << rows << " n_tok=" << n_tok << " r=" << r << " t=" << t
                  << (random_bytes ? " random bytes" : " quantized");
            }
            for (int64_t r = rows; r < ldy; ++r) {
              ASSERT_EQ(y[t * ldy + r], kSentinel) << "gemm wrote past n_rows, t=" << t;
            }
          }
        }
      }
    }
  }
}

TEST_P(R16GemmTest, MatchesScalarDot) {
  const IsaTier tier = GetParam();
  if (!TierAvailable(tier)) GTEST_SKIP() << "this CPU lacks ISA tier " << cpu::IsaTierName(tier);
  for (GgmlType type : kFileTypes) {
    SCOPED_TRACE(TypeName(type));
    CheckAgainstScalarDot(tier, type);
  }
}

// w (a K-quant matrix of extreme blocks) repacked, times activations whose quants are all +127,
// then all -127: one token and `many` tokens through tier's gemm, each result within 1e-5 of
// sum |w a| of the float64 dot (an integer overflow is off by far more).
void ExpectExactOnExtremeActs(IsaTier tier, const Matrix& w, int64_t many) {
  const GgmlType r16 = quant::RepackedType(w.type, w.rows);
  const std::vector<uint8_t> packed = Repacked(w);
  for (float v : {1.0f, -1.0f}) {
    const Acts a =
        QuantizeActs(std::vector<std::vector<float>>(many, std::vector<float>(w.n, v)), 0);
    for (auto [n_tok, read] : std::vector<std::pair<int64_t, DecodeRead>>{
             {1, DecodeRead::kPrefetched}, {1, DecodeRead::kHardware}, {many, {}}}) {
      const std::vector<float> y = RunR16(tier, r16, packed, w.rows, w.n, a, n_tok, w.rows, read);
      for (int64_t t = 0; t < n_tok; ++t) {
        for (int64_t r = 0; r < w.rows; ++r) {
          const Exact e = ExactDot(w.type, w.Row(r), a.Row(t), w.n);
          EXPECT_NEAR(y[t * w.rows + r], e.dot, 1e-5 * e.norm)
              << cpu::IsaTierName(tier) << " " << DecodeReadName(read) << " " << TypeName(w.type)
              << " v=" << v << " r=" << r << " t=" << t;
        }
      }
    }
  }
}

// Max quants (Q4_K 15, Q5_K 31), scales and mins, activations all +127 or all -127: the largest
// integer sums the decode path forms (Q4_K |I| ~ 4.9e8, Q5_K ~ 5.2e7 without the x16 of the
// high nibbles; the AMX tiles' per-sub-block sums stay below 32 * 15 * 127); an overflow would
// be off by 2^32 / 16 of d d_a.
template <typename Block>
void FillExtremeKBlocks(Matrix* w) {
  for (int64_t r = 0; r < w->rows; ++r) {
    auto* blk = reinterpret_cast<Block*>(w->Row(r));
    for (int64_t b = 0; b < w->n / 256; ++b) {
      std::memset(blk[b].qs, 0xFF, sizeof(blk[b].qs));
      if constexpr (std::is_same_v<Block, quant::BlockQ5_K>) {
        std::memset(blk[b].qh, r % 4 < 2 ? 0xFF : 0x55, sizeof(blk[b].qh));  // 31, or 31 / 15
      }
      std::memset(blk[b].scales, 0xFF, sizeof(blk[b].scales));  // s_j = m_j = 63
      blk[b].d = Fp32ToFp16(1.0f / 1024);
      blk[b].dmin = Fp32ToFp16(r % 2 == 0 ? 1.0f / 2048 : 0.0f);
    }
  }
}

TEST_P(R16GemmTest, ExtremeBlocksDoNotOverflow) {
  const IsaTier tier = GetParam();
  if (!TierAvailable(tier)) GTEST_SKIP() << "this CPU lacks ISA tier " << cpu::IsaTierName(tier);
  const int64_t n = 2048, rows = 16;
  Matrix q4 = NewMatrix(GgmlType::kQ4_K, rows, n, 0);
  FillExtremeKBlocks<quant::BlockQ4_K>(&q4);
  // 17 tokens: decode (1), and a 16-token tile + 1 (the AMX tier).
  ExpectExactOnExtremeActs(tier, q4, 17);
  Matrix q5 = NewMatrix(GgmlType::kQ5_K, rows, n, 0);
  FillExtremeKBlocks<quant::BlockQ5_K>(&q5);
  ExpectExactOnExtremeActs(tier, q5, 17);
}

// Q6_K: every value 63 (ql, qh all ones) or 0, scales +127 or -128 by row, activations all +127
// or all -127: the largest sums the group kernel forms (|I| up to 16 * 128 * 16 * 32 * 127) and
// the AMX tiles' per-sub-block sums (|C_s| up to 16 * 32 * 127).
TEST_P(R16GemmTest, ExtremeQ6KBlocksDoNotOverflow) {
  const IsaTier tier = GetParam();
  if (!TierAvailable(tier)) GTEST_SKIP() << "this CPU lacks ISA tier " << cpu::IsaTierName(tier);
  const int64_t n = 2048, rows = 16;
  Matrix w = NewMatrix(GgmlType::kQ6_K, rows, n, 0);
  for (int64_t r = 0; r < rows; ++r) {
    auto* blk = reinterpret_cast<quant::BlockQ6_K*>(w.Row(r));
    for (int64_t b = 0; b < n / 256; ++b) {
      const uint8_t q = r % 4 < 2 ? 0xFF : 0x00;  // values 63 or 0
      std::memset(blk[b].ql, q, sizeof(blk[b].ql));
      std::memset(blk[b].qh, q, sizeof(blk[b].qh));
      std::memset(blk[b].scales, r % 2 == 0 ? 127 : 0x80, sizeof(blk[b].scales));
      blk[b].d = Fp32ToFp16(1.0f / 1024);
    }
  }
  // 7 tokens: decode (1) and the group tile's 4 + 2 + 1; 17: a 16-token AMX tile + 1.
  ExpectExactOnExtremeActs(tier, w, 7);
  ExpectExactOnExtremeActs(tier, w, 17);
}

// Several tokens on AVX-512 VNNI: the R16 buffer fill computes the values FillRowLaneBlocks
// computes from the Q4_K rows, so the row-lane tile gives the Q4_K GEMM's bits.
TEST(R16GemmVnniTest, SeveralTokensGiveTheQ4KRowLaneBits) {
  if (!TierAvailable(IsaTier::kAvx512Vnni)) GTEST_SKIP() << "this CPU lacks AVX-512 VNNI";
  const int64_t n = 2048, rows = 32, n_tok = 12;
  const Matrix w = QuantizedWeights(GgmlType::kQ4_K, rows, n, 0, 11);
  const std::vector<uint8_t> packed = Repacked(w);
  const Acts a = RandomActs(n_tok, n, 0, 12);
  const std::vector<float> got =
      RunR16(IsaTier::kAvx512Vnni, GgmlType::kQ4_K_R16, packed, rows, n, a, n_tok, rows);
  std::vector<float> want(n_tok * rows, kNaN);
  KernelsFor(IsaTier::kAvx512Vnni)
      .For(GgmlType::kQ4_K)
      ->gemm(w.Row(0), w.stride, rows, a.Row(0), a.stride, n_tok, n, want.data(), rows);
  for (int64_t i = 0; i < n_tok * rows; ++i) ASSERT_EQ(got[i], want[i]) << "i=" << i;
}

// The read modes' tables differ in the VNNI tier's Q4_K_R16 / Q6_K_R16 and legacy 16-row
// gemms alone, and the tables say which mode they are.
TEST(DecodeReadTest, OnlyTheVnniTiersQ4KQ6KAndLegacyLayoutsDiffer) {
  const std::set<GgmlType> differ = {
      GgmlType::kQ4_K_R16, GgmlType::kQ6_K_R16,   GgmlType::kQ8_0_R16,
      GgmlType::kQ5_0_R16, GgmlType::kQ4_0_R16,   GgmlType::kQ5_1_R16,
      GgmlType::kQ4_1_R16, GgmlType::kIQ4_NL_R16, GgmlType::kMXFP4_R16};
  for (int t = 0; t < cpu::kNumIsaTiers; ++t) {
    const auto tier = static_cast<IsaTier>(t);
    const GemvKernels& pre = KernelsFor(tier, DecodeRead::kPrefetched);
    const GemvKernels& hw = KernelsFor(tier, DecodeRead::kHardware);
    EXPECT_EQ(pre.decode_read, DecodeRead::kPrefetched);
    EXPECT_EQ(hw.decode_read, DecodeRead::kHardware);
    EXPECT_EQ(&KernelsFor(tier), &pre) << "the default is kPrefetched";
    for (uint32_t id = 0; id < kTypeIdLimit; ++id) {
      const auto type = static_cast<GgmlType>(id);
      const bool differs = tier == IsaTier::kAvx512Vnni && differ.contains(type);
      EXPECT_EQ(pre.by_type[id].gemm != hw.by_type[id].gemm, differs)
          << cpu::IsaTierName(tier) << " type id " << id;
      EXPECT_EQ(pre.by_type[id].dot, hw.by_type[id].dot);
      EXPECT_EQ(pre.native_layout[id], hw.native_layout[id]);
    }
  }
}

TEST(DecodeReadTest, PreferredOnZen4AndOverriddenByTheVariable) {
  const cpu::CpuFeatures zen4{.amd = true, .family = 0x19}, zen5{.amd = true, .family = 0x1A},
      intel{.family = 6};
  EXPECT_EQ(PreferredDecodeRead(zen4), DecodeRead::kHardware);
  EXPECT_EQ(PreferredDecodeRead(zen5), DecodeRead::kPrefetched);
  EXPECT_EQ(PreferredDecodeRead(intel), DecodeRead::kPrefetched);
  EXPECT_EQ(*EffectiveDecodeRead(zen4, nullptr), DecodeRead::kHardware);
  EXPECT_EQ(*EffectiveDecodeRead(zen4, ""), DecodeRead::kHardware);
  EXPECT_EQ(*EffectiveDecodeRead(zen4, "prefetched"), DecodeRead::kPrefetched);
  EXPECT_EQ(*EffectiveDecodeRead(intel, "hardware"), DecodeRead::kHardware);
  const StatusOr<DecodeRead> bad = EffectiveDecodeRead(intel, "Hardware");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("MOESPLIT_DECODE_READ=\"Hardware\""), std::string::npos)
      << bad.status().message();
  EXPECT_NE(bad.status().message().find("prefetched or hardware"), std::string::npos);
  EXPECT_EQ(DecodeReadName(DecodeRead::kHardware), "hardware");
}

INSTANTIATE_TEST_SUITE_P(AllTiers, R16GemmTest, testing::AllIsaTiers(),
                         testing::IsaTierParamName());

}  // namespace
}  // namespace moesplit::gemv
