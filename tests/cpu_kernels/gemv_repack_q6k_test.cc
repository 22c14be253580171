// Q6_K in 16-row groups (kQ6_K_R16, cpu_kernels/quant/repack.h) and its kernels on every tier:
//   - the repack is lossless (random block bytes round-trip exactly) and never a file type;
//   - every tier's gemm against the scalar Q6_K dot of the original rows (1e-5 of sum |w a|),
//     for 16 / 48 rows, 1..17 tokens (one token: the VNNI group kernel; several: unpack + the
//     Q6_K tile), 1 / 9 / 28 blocks, quantized and random-byte weights (all scale signs),
//     NaN-poisoned outputs, sentinels past n_rows;
//   - extreme blocks (every 6-bit value 63 or 0, scales +127 / -128, activations +-127): the
//     integer sums must not overflow;
//   - LoadLayout repacks Q6_K only where the tier has the native group kernel.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "core/base/dtype.h"
#include "core/base/float16.h"
#include "cpu_kernels/cpu_features.h"
#include "cpu_kernels/gemv/gemv.h"
#include "cpu_kernels/quant/repack.h"
#include "tests/cpu_kernels/kquant_test_util.h"

namespace moesplit::gemv {
namespace {

using cpu::IsaTier;
using namespace kquant_testing;  // NOLINT: the shared matrix / activation helpers

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr float kSentinel = -12345.0f;
constexpr GgmlType kR16 = GgmlType::kQ6_K_R16;

bool TierAvailable(IsaTier tier) {
  return static_cast<int>(tier) <= static_cast<int>(cpu::BestTier(cpu::DetectCpuFeatures()));
}

// The rows of a Q6_K matrix in 16-row groups ([rows x RowBytes(kR16, n)] bytes + a guard).
std::vector<uint8_t> Repacked(const Matrix& w) {
  std::vector<uint8_t> out(w.rows * RowBytes(kR16, w.n) + 64, 0xEE);
  quant::RepackRows(GgmlType::kQ6_K, w.Row(0), w.stride, w.rows, w.n, out.data());
  return out;
}

TEST(RepackQ6K, RoundTripIsLossless) {
  for (int64_t n : {256, 2048, 7168}) {
    const Matrix w = RandomByteWeights(GgmlType::kQ6_K, 32, n, 0, static_cast<uint32_t>(n));
    const std::vector<uint8_t> r = Repacked(w);
    Matrix back = NewMatrix(GgmlType::kQ6_K, 32, n, 0);
    const size_t group = 16 * RowBytes(kR16, n);
    for (int g = 0; g < 2; ++g) {
      quant::UnpackRows16(kR16, r.data() + g * group, n, back.Row(16 * g), back.stride);
    }
    for (int64_t row = 0; row < 32; ++row) {
      ASSERT_EQ(std::memcmp(w.Row(row), back.Row(row), RowBytes(GgmlType::kQ6_K, n)), 0)
          << "n=" << n << " row " << row;
    }
    EXPECT_EQ(r[32 * RowBytes(kR16, n)], 0xEE) << "repack wrote past the end";
  }
}

TEST(RepackQ6K, InternalTypeIsNeverAFileType) {
  EXPECT_EQ(FindTypeTraits(static_cast<uint32_t>(kR16)), nullptr);
  EXPECT_FALSE(TypeFromName("q6_K_r16").ok());
  EXPECT_EQ(RowBytes(kR16, 2048), RowBytes(GgmlType::kQ6_K, 2048));  // same bytes as the file
  EXPECT_EQ(RowGroup(kR16), 16);
  EXPECT_EQ(quant::RepackedType(GgmlType::kQ6_K, 32), kR16);
  EXPECT_EQ(quant::RepackedType(GgmlType::kQ6_K, 40), GgmlType::kQ6_K);  // not whole groups
  EXPECT_EQ(quant::UnpackedType(kR16), GgmlType::kQ6_K);
}

TEST(RepackQ6K, LoadLayoutOnlyWhereTheTierHasNativeTiles) {
  for (int i = 0; i < cpu::kNumIsaTiers; ++i) {
    const auto tier = static_cast<IsaTier>(i);
    const GemvKernels& k = KernelsFor(tier);
    ASSERT_NE(k.For(kR16), nullptr) << cpu::IsaTierName(tier);
    EXPECT_EQ(k.For(kR16)->dot, nullptr);
    EXPECT_EQ(k.For(kR16)->act_type, GgmlType::kQ8_K);
    const bool native = tier >= IsaTier::kAvx512Vnni;
    EXPECT_EQ(LoadLayout(k, GgmlType::kQ6_K, 7168), native ? kR16 : GgmlType::kQ6_K)
        << cpu::IsaTierName(tier);
    EXPECT_EQ(LoadLayout(k, GgmlType::kQ6_K, 7160), GgmlType::kQ6_K);
  }
}

// Runs tier's kR16 gemm on w repacked; y poisoned (NaN in the tile, a sentinel in the ldy
// padding). Returns y [n_tok x ldy].
std::vector<float> RunR16(IsaTier tier, const std::vector<uint8_t>& packed, int64_t rows, int64_t n,
                          const Acts& a, int64_t n_tok, int64_t ldy) {
  std::vector<float> y(n_tok * ldy, kSentinel);
  for (int64_t t = 0; t < n_tok; ++t) {
    for (int64_t r = 0; r < rows; ++r) y[t * ldy + r] = kNaN;
  }
  KernelsFor(tier).For(kR16)->gemm(packed.data(), static_cast<size_t>(RowBytes(kR16, n)), rows,
                                   a.Row(0), a.stride, n_tok, n, y.data(), ldy);
  return y;
}

class Q6KR16GemmTest : public ::testing::TestWithParam<IsaTier> {};

TEST_P(Q6KR16GemmTest, MatchesScalarQ6KDot) {
  const IsaTier tier = GetParam();
  if (!TierAvailable(tier)) GTEST_SKIP() << "this CPU lacks ISA tier " << cpu::IsaTierName(tier);
  const DotFn ref = KernelsFor(IsaTier::kScalar).For(GgmlType::kQ6_K)->dot;
  for (int64_t n : {256, 2304, 7168}) {
    for (bool random_bytes : {false, true}) {
      const Matrix w = random_bytes ? RandomByteWeights(GgmlType::kQ6_K, 48, n, 0, 5)
                                    : QuantizedWeights(GgmlType::kQ6_K, 48, n, 0, 6);
      const std::vector<uint8_t> packed = Repacked(w);
      const Acts a = RandomActs(17, n, 36, 99);
      for (int64_t rows : {16, 48}) {
        for (int64_t n_tok : {1, 2, 3, 17}) {
          const int64_t ldy = rows + 3;
          const std::vector<float> y = RunR16(tier, packed, rows, n, a, n_tok, ldy);
          for (int64_t t = 0; t < n_tok; ++t) {
            for (int64_t r = 0; r < rows; ++r) {
              const Exact e = ExactDot(GgmlType::kQ6_K, w.Row(r), a.Row(t), n);
              ASSERT_NEAR(y[t * ldy + r], ref(w.Row(r), a.Row(t), n), 1e-5 * e.norm)
                  << cpu::IsaTierName(tier) << " n=" << n << " rows=" << rows << " n_tok=" << n_tok
                  << " r=" << r << " t=" << t << (random_bytes ? " random bytes" : " quantized");
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

// Every value 63 (ql, qh all ones) or 0, scales +127 or -128 by row, activations all +127 or
// all -127: the largest sums the group kernel forms (|I| up to 16 * 128 * 16 * 32 * 127 ~ 1.3e8).
TEST_P(Q6KR16GemmTest, ExtremeBlocksDoNotOverflow) {
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
  const std::vector<uint8_t> packed = Repacked(w);
  for (float v : {1.0f, -1.0f}) {
    const Acts a = QuantizeActs(std::vector<std::vector<float>>(2, std::vector<float>(n, v)), 0);
    for (int64_t n_tok : {1, 2}) {
      const std::vector<float> y = RunR16(tier, packed, rows, n, a, n_tok, rows);
      for (int64_t t = 0; t < n_tok; ++t) {
        for (int64_t r = 0; r < rows; ++r) {
          const Exact e = ExactDot(GgmlType::kQ6_K, w.Row(r), a.Row(t), n);
          EXPECT_NEAR(y[t * rows + r], e.dot, 1e-5 * e.norm)
              << cpu::IsaTierName(tier) << " v=" << v << " r=" << r << " t=" << t;
        }
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(AllTiers, Q6KR16GemmTest,
                         ::testing::Values(IsaTier::kScalar, IsaTier::kAvx2, IsaTier::kAvx512,
                                           IsaTier::kAvx512Vnni, IsaTier::kAmx),
                         [](const ::testing::TestParamInfo<IsaTier>& info) {
                           return std::string(cpu::IsaTierName(info.param));
                         });

}  // namespace
}  // namespace moesplit::gemv
