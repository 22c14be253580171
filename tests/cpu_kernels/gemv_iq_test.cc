// The lattice-type (IQ2_XXS, IQ1_S, IQ1_M, IQ3_XXS, IQ3_S, IQ2_XS, IQ2_S x Q8_K) kernels of
// every ISA tier:
//   - the scalar dots against dequantize(w) . dequantize(a) in float64 (2e-6 of sum |w a|: the
//     scalar dot's integers are exact, its one float step per block and the dequantization's own
//     f32 roundings stay below that);
//   - every tier's dot and gemm (decode and 2-17 tokens, odd row counts, padded strides,
//     NaN-poisoned outputs with guard columns, K = 256 .. 8448) against the scalar dot (1e-5 of
//     sum |w a|: the same integers per block, only the float order of the block terms differs;
//     K = 8448 crosses the VBMI tiles' 32-block activation segments);
//   - activations at +-127 (the negation's edge) on every tier against float64;
//   - on the VNNI tier both variants (AVX2 dots; VBMI tiles / dots where the CPU has VBMI)
//     directly;
//   - every tier has a kernel for them (no reference-matmul fallback at start-up), with Q8_K
//     activations, and no repacked layout but IQ2_XXS's and IQ3_XXS's (gemv_iq_r16_test.cc).
// Weights are random bytes with a finite f16 super-scale: every code pattern of these types
// decodes to grid values.
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
#include "tests/cpu_kernels/gemv_test_util.h"

namespace moesplit::gemv {
namespace {

using cpu::IsaTier;
using test_util::Allocate;
using test_util::Exact;
using test_util::ExactDot;
using test_util::ExpectGemmMatches;
using test_util::kNaN;
using test_util::Matrix;
using test_util::Random;
using test_util::TierAvailable;

constexpr GgmlType kTypes[] = {GgmlType::kIQ2_XXS, GgmlType::kIQ1_S, GgmlType::kIQ1_M,
                               GgmlType::kIQ3_XXS, GgmlType::kIQ3_S, GgmlType::kIQ2_XS,
                               GgmlType::kIQ2_S};
constexpr IsaTier kTiers[] = {IsaTier::kScalar, IsaTier::kAvx2, IsaTier::kAvx512,
                              IsaTier::kAvx512Vnni, IsaTier::kAmx};
// One block, odd block counts, the V3 widths (2048, 7168), and 33 blocks: past the VBMI
// tiles' 32-block activation segment (a second segment adds into y).
constexpr int64_t kWidths[] = {256, 768, 2048, 2304, 7168, 8448};

// rows x n random bytes with a finite f16 super-scale per block, +-[0.5, 2] / 64.
Matrix RandomBytes(GgmlType wt, int64_t rows, int64_t n, size_t pad, uint32_t seed) {
  Matrix m = Allocate(wt, rows, n, pad);
  std::mt19937 rng(seed);
  for (int64_t r = 0; r < rows; ++r)
    test_util::FillLatticeRow(wt, m.MutableRow(r), n, 1.0f / 64, rng);
  m.Dequantize();
  return m;
}

TEST(IqScalarTest, MatchesDequantizedFloat64Dot) {
  for (GgmlType wt : kTypes) {
    for (int64_t n : kWidths) {
      const Matrix w = RandomBytes(wt, 2, n, 0, static_cast<uint32_t>(n) + 7);
      const Matrix a = Random(GgmlType::kQ8_K, 2, n, 0, static_cast<uint32_t>(n) + 8, 3.0f);
      for (int64_t r = 0; r < 2; ++r) {
        const Exact e = ExactDot(w, r, a, r);
        const float got = KernelsFor(IsaTier::kScalar).For(wt)->dot(w.Row(r), a.Row(r), n);
        EXPECT_NEAR(got, e.dot, 2e-6 * e.norm) << TypeName(wt) << " n=" << n << " r=" << r;
      }
    }
  }
}

using TierType = std::tuple<IsaTier, GgmlType>;
class IqKernelTest : public ::testing::TestWithParam<TierType> {};

std::string TierTypeName(const ::testing::TestParamInfo<TierType>& info) {
  const auto [tier, t] = info.param;
  return std::string(cpu::IsaTierName(tier)) + "_" + TypeName(t);
}

TEST_P(IqKernelTest, DotMatchesScalar) {
  const auto [tier, wt] = GetParam();
  if (!TierAvailable(tier)) GTEST_SKIP() << "this CPU lacks " << cpu::IsaTierName(tier);
  const TypeKernels* tk = KernelsFor(tier).For(wt);
  ASSERT_NE(tk, nullptr);
  EXPECT_EQ(tk->act_type, GgmlType::kQ8_K);
  const DotFn ref = KernelsFor(IsaTier::kScalar).For(wt)->dot;
  for (int64_t n : kWidths) {
    const Matrix w = RandomBytes(wt, 3, n, 0, static_cast<uint32_t>(n));
    const Matrix a = Random(GgmlType::kQ8_K, 3, n, 0, static_cast<uint32_t>(n) + 1, 3.0f);
    for (int64_t r = 0; r < 3; ++r) {
      const float got = tk->dot(w.Row(r), a.Row(r), n);
      ASSERT_TRUE(std::isfinite(got));
      EXPECT_NEAR(got, ref(w.Row(r), a.Row(r), n), 1e-5 * ExactDot(w, r, a, r).norm)
          << "n " << n << " row " << r;
    }
  }
}

// Odd rows and tokens, padded strides (0xFF bytes: NaN scales), ldy > rows.
TEST_P(IqKernelTest, GemmMatchesScalarOddShapes) {
  const auto [tier, wt] = GetParam();
  if (!TierAvailable(tier)) GTEST_SKIP() << "this CPU lacks " << cpu::IsaTierName(tier);
  const TypeKernels& tk = *KernelsFor(tier).For(wt);
  const DotFn ref = KernelsFor(IsaTier::kScalar).For(wt)->dot;
  for (int64_t n : {256, 768, 2304, 8448}) {
    const Matrix w = RandomBytes(wt, 35, n, 6, static_cast<uint32_t>(n) + 2);
    const Matrix a = Random(GgmlType::kQ8_K, 17, n, 12, static_cast<uint32_t>(n) + 3, 3.0f);
    for (int64_t rows : {1, 3, 16, 17, 35}) {
      for (int64_t n_tok : {1, 2, 3, 4, 5, 9, 17}) {
        ExpectGemmMatches(tk.gemm, ref, w, rows, a, n_tok, 1e-5, TypeName(wt));
      }
    }
  }
}

// Decode at the real width (one token, 2048 x 7168 is the V3 expert; 64 rows keep it short).
TEST_P(IqKernelTest, DecodeAtV3Width) {
  const auto [tier, wt] = GetParam();
  if (!TierAvailable(tier)) GTEST_SKIP() << "this CPU lacks " << cpu::IsaTierName(tier);
  const Matrix w = RandomBytes(wt, 64, 7168, 0, 99);
  const Matrix a = Random(GgmlType::kQ8_K, 4, 7168, 0, 98, 1.0f);
  const DotFn ref = KernelsFor(IsaTier::kScalar).For(wt)->dot;
  ExpectGemmMatches(KernelsFor(tier).For(wt)->gemm, ref, w, 63, a, 1, 1e-5, TypeName(wt));
  ExpectGemmMatches(KernelsFor(tier).For(wt)->gemm, ref, w, 64, a, 4, 1e-5, TypeName(wt));
}

// Activations at +-127 (inputs +-1: scale 1/127), signs mixed per token: the SIMD tiers negate
// activations (IQ2_XXS) and add 8 grid + 16 +- 1 levels (IQ1); all must match float64.
TEST_P(IqKernelTest, FullScaleActivationsMatchFloat64) {
  const auto [tier, wt] = GetParam();
  if (!TierAvailable(tier)) GTEST_SKIP() << "this CPU lacks " << cpu::IsaTierName(tier);
  const int64_t n = 2048, rows = 5, n_tok = 3;
  const Matrix w = RandomBytes(wt, rows, n, 0, 41);
  Matrix a = Allocate(GgmlType::kQ8_K, n_tok, n, 0);
  std::vector<float> x(n);
  for (int64_t t = 0; t < n_tok; ++t) {
    for (int64_t i = 0; i < n; ++i) x[i] = (t == 0 || (i * 7 + t) % 3 == 0) ? 1.0f : -1.0f;
    KernelsFor(IsaTier::kScalar).Quantizer(GgmlType::kQ8_K)(x.data(), a.MutableRow(t), n);
  }
  a.Dequantize();
  const TypeKernels& tk = *KernelsFor(tier).For(wt);
  std::vector<float> y(n_tok * rows, kNaN);
  tk.gemm(w.Row(0), w.stride, rows, a.Row(0), a.stride, n_tok, n, y.data(), rows);
  for (int64_t t = 0; t < n_tok; ++t) {
    for (int64_t r = 0; r < rows; ++r) {
      const Exact e = ExactDot(w, r, a, t);
      EXPECT_NEAR(tk.dot(w.Row(r), a.Row(t), n), e.dot, 2e-6 * e.norm) << "r " << r << " t " << t;
      EXPECT_NEAR(y[t * rows + r], e.dot, 2e-6 * e.norm) << "gemm r " << r << " t " << t;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Iq, IqKernelTest,
                         ::testing::Combine(::testing::ValuesIn(kTiers),
                                            ::testing::ValuesIn(kTypes)),
                         TierTypeName);

#if defined(MOESPLIT_GEMV_X86)
// The VNNI tier picks one variant by CPUID; both are checked here where the CPU runs them.
TEST(IqVariantTest, Avx2AndVbmiMatchScalar) {
  struct Variant {
    GgmlType type;
    DotFn avx2, vbmi;
    GemmFn vbmi_gemm;
    bool gfni = false;  // the VBMI file also needs GFNI (gemv_iq_avx512vbmi.cc's three types)
  };
  const Variant variants[] = {
      {GgmlType::kIQ2_XXS, internal::DotIQ2XXS_Q8K_Avx2, internal::DotIQ2XXS_Q8K_Avx512Vbmi,
       internal::GemmIQ2XXS_Q8K_Avx512Vbmi, true},
      {GgmlType::kIQ1_S, internal::DotIQ1S_Q8K_Avx2, internal::DotIQ1S_Q8K_Avx512Vbmi,
       internal::GemmIQ1S_Q8K_Avx512Vbmi, true},
      {GgmlType::kIQ1_M, internal::DotIQ1M_Q8K_Avx2, internal::DotIQ1M_Q8K_Avx512Vbmi,
       internal::GemmIQ1M_Q8K_Avx512Vbmi, true},
      {GgmlType::kIQ3_XXS, internal::DotIQ3XXS_Q8K_Avx2, internal::DotIQ3XXS_Q8K_Avx512Vbmi,
       internal::GemmIQ3XXS_Q8K_Avx512Vbmi},
      {GgmlType::kIQ3_S, internal::DotIQ3S_Q8K_Avx2, internal::DotIQ3S_Q8K_Avx512Vbmi,
       internal::GemmIQ3S_Q8K_Avx512Vbmi},
      {GgmlType::kIQ2_XS, internal::DotIQ2XS_Q8K_Avx2, internal::DotIQ2XS_Q8K_Avx512Vbmi,
       internal::GemmIQ2XS_Q8K_Avx512Vbmi},
      {GgmlType::kIQ2_S, internal::DotIQ2S_Q8K_Avx2, internal::DotIQ2S_Q8K_Avx512Vbmi,
       internal::GemmIQ2S_Q8K_Avx512Vbmi},
  };
  const cpu::CpuFeatures f = cpu::DetectCpuFeatures();
  if (!TierAvailable(IsaTier::kAvx2)) GTEST_SKIP() << "no AVX2";
  const bool vbmi_cpu = TierAvailable(IsaTier::kAvx512Vnni) && f.avx512vbmi;
  for (const Variant& v : variants) {
    const bool vbmi = vbmi_cpu && (!v.gfni || f.gfni);
    const DotFn ref = KernelsFor(IsaTier::kScalar).For(v.type)->dot;
    const int64_t n = 2304;
    const Matrix w = RandomBytes(v.type, 19, n, 2, 5);
    const Matrix a = Random(GgmlType::kQ8_K, 6, n, 4, 6, 2.0f);
    for (int64_t r = 0; r < 19; ++r) {
      const double tol = 1e-5 * ExactDot(w, r, a, r % 6).norm;
      const float want = ref(w.Row(r), a.Row(r % 6), n);
      EXPECT_NEAR(v.avx2(w.Row(r), a.Row(r % 6), n), want, tol) << TypeName(v.type);
      if (vbmi) {
        EXPECT_NEAR(v.vbmi(w.Row(r), a.Row(r % 6), n), want, tol) << TypeName(v.type);
      }
    }
    if (vbmi) ExpectGemmMatches(v.vbmi_gemm, ref, w, 19, a, 6, 1e-5, TypeName(v.type));
  }
}
#endif

// No tier leaves them to the reference matmul (named at start-up as a fallback).
TEST(IqTableTest, EveryTierHasKernels) {
  for (GgmlType wt : kTypes) {
    for (IsaTier tier : kTiers) {
      const GemvKernels& k = KernelsFor(tier);
      ASSERT_NE(k.For(wt), nullptr) << cpu::IsaTierName(tier) << " " << TypeName(wt);
      EXPECT_NE(k.For(wt)->dot, nullptr);
      EXPECT_EQ(k.For(wt)->act_type, GgmlType::kQ8_K);
      // Every lattice type here has a 16-row layout: gemv_iq_r16_test.cc checks LoadLayout.
    }
    GgmlType act;
    ASSERT_TRUE(ActivationTypeFor(wt, &act));
    EXPECT_EQ(act, GgmlType::kQ8_K);
  }
}

}  // namespace
}  // namespace moesplit::gemv
