// IQ2_XXS's, IQ2_XS's, IQ2_S's, IQ3_XXS's, IQ3_S's, IQ1_S's and IQ1_M's 16-row layouts
// kIQ2_XXS_R16 / kIQ2_XS_R16 / kIQ2_S_R16 / kIQ3_XXS_R16 / kIQ3_S_R16 / kIQ1_S_R16 / kIQ1_M_R16
// (cpu_kernels/quant/repack.h):
//   - the repack is lossless on random bytes (every sign index, grid index, scale and IQ1
//     delta sign, IQ1_M's d nibbles), 70 / 78 / 82 / 102 / 110 / 58 / 66 bytes per row and block,
//     never a file type;
//   - every tier's R16 gemm (the VNNI tier's own kernel where the CPU has VBMI and GFNI;
//     IQ2_XXS's AVX2 one-token kernel at the other tiers from avx2; the unpack to the file
//     layout's gemm elsewhere) matches the scalar dot of the original rows:
//     decode (two groups per pass and the odd one) and 2-9 tokens, 1-4 groups, widths of 1, 8,
//     28 and 72 blocks (the last past the decode call's 16 KB stack buffer of permuted
//     activations), NaN-poisoned outputs with guard rows;
//   - activations at +-127 (the kernel negates them) match float64;
//   - LoadLayout repacks them only where the tier has the native kernel.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "core/base/dtype.h"
#include "cpu_kernels/cpu_features.h"
#include "cpu_kernels/gemv/gemv.h"
#include "cpu_kernels/gemv/gemv_internal.h"
#include "cpu_kernels/quant/blocks.h"
#include "cpu_kernels/quant/repack.h"
#include "tests/cpu_kernels/gemv_test_util.h"

namespace moesplit::gemv {
namespace {

using cpu::IsaTier;
using test_util::Allocate;
using test_util::ExactDot;
using test_util::Matrix;
using test_util::Random;
using test_util::TierAvailable;

constexpr GgmlType kTypes[] = {GgmlType::kIQ2_XXS, GgmlType::kIQ2_XS, GgmlType::kIQ2_S,
                               GgmlType::kIQ3_XXS, GgmlType::kIQ3_S,  GgmlType::kIQ1_S,
                               GgmlType::kIQ1_M};
constexpr IsaTier kTiers[] = {IsaTier::kScalar, IsaTier::kAvx2, IsaTier::kAvx512,
                              IsaTier::kAvx512Vnni, IsaTier::kAmx};

Matrix RandomRows(GgmlType wt, int64_t rows, int64_t n, uint32_t seed) {
  Matrix m = Allocate(wt, rows, n, 0);
  std::mt19937 rng(seed);
  for (int64_t r = 0; r < rows; ++r)
    test_util::FillLatticeRow(wt, m.MutableRow(r), n, 1.0f / 64, rng);
  m.Dequantize();
  return m;
}

std::vector<uint8_t> Repack(const Matrix& w, int64_t rows) {
  std::vector<uint8_t> packed(rows * RowBytes(quant::RepackedType(w.type, 16), w.n), 0xA5);
  quant::RepackRows(w.type, w.Row(0), w.stride, rows, w.n, packed.data());
  return packed;
}

// The tiers with a native kernel for type wt's 16-row layout: the VNNI tier with VBMI and GFNI
// for every type, and IQ2_XXS's, IQ1_S's and IQ1_M's AVX2 kernels at every tier from avx2 up.
bool NativeR16(IsaTier tier, GgmlType wt) {
  if ((wt == GgmlType::kIQ2_XXS || wt == GgmlType::kIQ1_S || wt == GgmlType::kIQ1_M) &&
      tier >= IsaTier::kAvx2) {
    return true;
  }
  return tier >= IsaTier::kAvx512Vnni && cpu::DetectCpuFeatures().avx512vbmi &&
         cpu::DetectCpuFeatures().gfni;
}

TEST(IqR16Test, LosslessRoundTrip) {
  for (GgmlType wt : kTypes) {
    const GgmlType r16 = wt == GgmlType::kIQ2_XXS   ? GgmlType::kIQ2_XXS_R16
                         : wt == GgmlType::kIQ2_XS  ? GgmlType::kIQ2_XS_R16
                         : wt == GgmlType::kIQ2_S   ? GgmlType::kIQ2_S_R16
                         : wt == GgmlType::kIQ3_XXS ? GgmlType::kIQ3_XXS_R16
                         : wt == GgmlType::kIQ3_S   ? GgmlType::kIQ3_S_R16
                         : wt == GgmlType::kIQ1_S   ? GgmlType::kIQ1_S_R16
                                                    : GgmlType::kIQ1_M_R16;
    EXPECT_EQ(quant::RepackedType(wt, 32), r16);
    EXPECT_EQ(quant::RepackedType(wt, 24), wt) << "rows not a multiple of 16 stay";
    EXPECT_EQ(quant::UnpackedType(r16), wt);
    EXPECT_EQ(FindTypeTraits(static_cast<uint32_t>(r16)), nullptr) << "never a file type";
    EXPECT_EQ(RowGroup(r16), 16);
    EXPECT_EQ(RowBytes(r16, 7168), 7168 / 256 *
                                       (wt == GgmlType::kIQ2_XXS   ? 70
                                        : wt == GgmlType::kIQ2_XS  ? 78
                                        : wt == GgmlType::kIQ2_S   ? 82
                                        : wt == GgmlType::kIQ3_XXS ? 102
                                        : wt == GgmlType::kIQ3_S   ? 110
                                        : wt == GgmlType::kIQ1_S   ? 58
                                                                   : 66));
    const int64_t n = 2304, rows = 48;
    const Matrix w = RandomRows(wt, rows, n, 3);
    const std::vector<uint8_t> packed = Repack(w, rows);
    std::vector<uint8_t> back(rows * w.stride);
    for (int64_t g = 0; g < rows / 16; ++g) {
      quant::UnpackRows16(r16, packed.data() + g * 16 * RowBytes(r16, n), n,
                          back.data() + g * 16 * w.stride, w.stride);
    }
    EXPECT_EQ(std::memcmp(back.data(), w.Row(0), back.size()), 0) << TypeName(wt);
  }
}

// IQ1's stored digit numbers (repack.h): every A < 243 as its byte and every F < 27 as its
// 5-bit field (the byte 8 q) give their digits, most significant first, as the carries of
// x <- 3 x mod 256 (what the AVX2 kernel computes), and come back from their codes.
TEST(IqR16Test, Iq1DigitCodesCarryOutTheirDigits) {
  auto carries = [](int x, int count) {
    std::vector<int> digits;
    for (int i = 0; i < count; ++i, x = 3 * x % 256) digits.push_back(3 * x / 256);
    return digits;
  };
  auto digits = [](int v, int count) {
    std::vector<int> d(count);
    for (int i = count - 1; i >= 0; --i, v /= 3) d[i] = v % 3;
    return d;
  };
  for (int a = 0; a < 243; ++a) {
    const int q = quant::Iq1DigitByte(a);
    ASSERT_LT(q, 256);
    EXPECT_EQ(carries(q, 5), digits(a, 5)) << "A " << a;
    EXPECT_EQ(quant::Iq1DigitByteNumber(q), a);
  }
  for (int f = 0; f < 27; ++f) {
    const int q = quant::Iq1DigitField(f);
    ASSERT_LT(q, 32);
    EXPECT_EQ(carries(8 * q, 3), digits(f, 3)) << "F " << f;
    EXPECT_EQ(quant::Iq1DigitFieldNumber(q), f);
  }
}

using TierType = std::tuple<IsaTier, GgmlType>;
class IqR16TierTest : public ::testing::TestWithParam<TierType> {};

TEST_P(IqR16TierTest, GemmMatchesScalar) {
  const auto [tier, wt] = GetParam();
  const GgmlType r16 = quant::RepackedType(wt, 16);
  if (!TierAvailable(tier)) GTEST_SKIP() << "this CPU lacks " << cpu::IsaTierName(tier);
  const TypeKernels* tk = KernelsFor(tier).For(r16);
  ASSERT_NE(tk, nullptr);
  EXPECT_EQ(tk->dot, nullptr);
  EXPECT_EQ(KernelsFor(tier).native_layout[static_cast<size_t>(r16)], NativeR16(tier, wt));
  const DotFn ref = KernelsFor(IsaTier::kScalar).For(wt)->dot;
  for (int64_t n : {256, 2048, 7168, 18432}) {
    // Decode passes of 3, 2 and 1 groups (IQ1_S: 48 = 3, 64 = 3 + 1, 80 = 3 + 2; the others
    // 2 + 1, 2 + 2, 2 + 2 + 1).
    for (int64_t rows : {16, 48, 64, 80}) {
      if (n == 18432 && rows > 16) continue;  // the width is for the heap buffer, not the rows
      if (n == 7168 && rows > 64) continue;   // 80 rows run at the narrower widths (test time)
      const Matrix w = RandomRows(wt, rows, n, static_cast<uint32_t>(n + rows));
      const std::vector<uint8_t> packed = Repack(w, rows);
      const Matrix a = Random(GgmlType::kQ8_K, 9, n, 0, static_cast<uint32_t>(n) + 5, 3.0f);
      for (int64_t n_tok : {1, 2, 3, 4, 5, 7, 9}) {
        test_util::ExpectGemmOnMatches(
            tk->gemm, packed.data(), static_cast<size_t>(RowBytes(r16, n)), ref, w, rows, a, n_tok,
            1e-5, std::string(cpu::IsaTierName(tier)) + " " + TypeName(wt));
      }
    }
  }
}

// Activations +-127 with scale 1 and weights with d = 1 / 64: the kernel's negated bytes at
// their edge; float64 of the dequantized values is the oracle.
TEST_P(IqR16TierTest, FullScaleActivationsMatchFloat64) {
  const auto [tier, wt] = GetParam();
  const GgmlType r16 = quant::RepackedType(wt, 16);
  if (!TierAvailable(tier)) GTEST_SKIP() << "this CPU lacks " << cpu::IsaTierName(tier);
  const int64_t n = 2048, rows = 32;
  const Matrix w = RandomRows(wt, rows, n, 11);
  const std::vector<uint8_t> packed = Repack(w, rows);
  Matrix a = Allocate(GgmlType::kQ8_K, 2, n, 0);
  std::mt19937 rng(12);
  for (int64_t t = 0; t < 2; ++t) {
    auto* blk = reinterpret_cast<quant::BlockQ8_K*>(a.MutableRow(t));
    for (int64_t b = 0; b < n / 256; ++b) {
      blk[b].d = 1.0f;
      int sum[16] = {};
      for (int i = 0; i < 256; ++i) {
        blk[b].qs[i] = static_cast<int8_t>(rng() & 1 ? 127 : -127);
        sum[i / 16] += blk[b].qs[i];
      }
      for (int s = 0; s < 16; ++s) blk[b].bsums[s] = static_cast<int16_t>(sum[s]);
    }
  }
  a.Dequantize();
  std::vector<float> y(2 * rows, test_util::kNaN);
  KernelsFor(tier).For(r16)->gemm(packed.data(), RowBytes(r16, n), rows, a.Row(0), a.stride, 2, n,
                                  y.data(), rows);
  for (int64_t t = 0; t < 2; ++t) {
    for (int64_t r = 0; r < rows; ++r) {
      const test_util::Exact e = ExactDot(w, r, a, t);
      EXPECT_NEAR(y[t * rows + r], e.dot, 1e-5 * e.norm) << "r " << r << " t " << t;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(IqR16, IqR16TierTest,
                         ::testing::Combine(::testing::ValuesIn(kTiers),
                                            ::testing::ValuesIn(kTypes)),
                         [](const ::testing::TestParamInfo<TierType>& info) {
                           return std::string(cpu::IsaTierName(std::get<0>(info.param))) + "_" +
                                  TypeName(std::get<1>(info.param));
                         });

TEST(IqR16Test, LoadLayoutRepacksOnlyWithTheNativeKernel) {
  for (GgmlType wt : kTypes) {
    for (IsaTier tier : kTiers) {
      const GgmlType want = NativeR16(tier, wt) ? quant::RepackedType(wt, 32) : wt;
      EXPECT_EQ(LoadLayout(KernelsFor(tier), wt, 32), want) << cpu::IsaTierName(tier);
      EXPECT_EQ(LoadLayout(KernelsFor(tier), wt, 24), wt);
    }
  }
}

}  // namespace
}  // namespace moesplit::gemv
