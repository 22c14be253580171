// Float-weight kernels (F32 / F16 / BF16 weights x F32 activations) of every ISA tier: dot and
// gemm against the scalar dot, and every tier against a float64 dot of the dequantized weights
// (quant::DequantizeRow) and the activations.
#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "core/base/dtype.h"
#include "cpu_kernels/cpu_features.h"
#include "cpu_kernels/gemv/gemv.h"
#include "cpu_kernels/quant/quant.h"
#include "tests/isa_tiers.h"

namespace moesplit::gemv {
namespace {

using cpu::IsaTier;

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

bool TierAvailable(IsaTier tier) {
  return static_cast<int>(tier) <= static_cast<int>(cpu::BestTier(cpu::DetectCpuFeatures()));
}

// rows weight rows and toks activation rows of n values, in padded (odd) strides, plus their
// float values for the float64 reference.
struct FloatMats {
  GgmlType wtype = GgmlType::kF32;
  int64_t n = 0, rows = 0, toks = 0;
  size_t w_stride = 0;     // bytes: RowBytes + 12 (F32) or + 6 (F16/BF16: only 2-byte aligned)
  size_t a_stride = 0;     // bytes: 4 n + 20
  std::vector<uint8_t> w;  // [rows, w_stride] bytes (the last row unpadded)
  std::vector<uint8_t> a;  // [toks, a_stride] bytes of f32 rows (the last row unpadded)
  std::vector<float> wd;   // [rows, n] DequantizeRow of each weight row
  std::vector<float> ad;   // [toks, n] activations

  const uint8_t* WRow(int64_t r) const { return w.data() + r * w_stride; }
  const uint8_t* ARow(int64_t t) const { return a.data() + t * a_stride; }
  // sum_i w_i a_i in float64, and sum_i |w_i a_i| (the scale errors are measured against).
  double Exact(int64_t r, int64_t t, double* norm) const {
    double s = 0;
    *norm = 0;
    for (int64_t i = 0; i < n; ++i) {
      const double p = static_cast<double>(wd[r * n + i]) * ad[t * n + i];
      s += p;
      *norm += std::fabs(p);
    }
    return s;
  }
};

// wf: [rows, n] weights (rounded to wtype), af: [toks, n] activations.
FloatMats MakeMats(GgmlType wtype, int64_t n, int64_t rows, int64_t toks,
                   const std::vector<float>& wf, const std::vector<float>& af) {
  FloatMats m;
  m.wtype = wtype;
  m.n = n;
  m.rows = rows;
  m.toks = toks;
  const int64_t row_bytes = RowBytes(wtype, n);
  m.w_stride = row_bytes + (wtype == GgmlType::kF32 ? 12 : 6);
  m.a_stride = 4 * n + 20;
  // Padding bytes are NaN patterns; the last rows end exactly at the buffers' ends, so that a
  // kernel reading past a row shows up under AddressSanitizer.
  m.w.assign(m.w_stride * (rows - 1) + row_bytes, 0xFF);
  m.a.assign(m.a_stride * (toks - 1) + 4 * n, 0xFF);
  m.wd.resize(n * rows);
  m.ad = af;
  std::vector<uint32_t> packed(row_bytes / 4 + 1);  // one row, 4-byte aligned for DequantizeRow
  for (int64_t r = 0; r < rows; ++r) {
    quant::QuantizeRow(wtype, wf.data() + r * n, packed.data(), n);
    quant::DequantizeRow(wtype, packed.data(), m.wd.data() + r * n, n);
    std::memcpy(m.w.data() + r * m.w_stride, packed.data(), row_bytes);
  }
  for (int64_t t = 0; t < toks; ++t) std::memcpy(m.a.data() + t * m.a_stride, &af[t * n], 4 * n);
  return m;
}

// Normal weights (sigma 0.02, every 13th value tiny: an F16 subnormal) and activations (sigma 1).
FloatMats RandomMats(GgmlType wtype, int64_t n, int64_t rows, int64_t toks, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> wf(rows * n), af(toks * n);  // [rows, n], [toks, n]
  for (size_t i = 0; i < wf.size(); ++i) wf[i] = dist(rng) * (i % 13 == 5 ? 3e-6f : 0.02f);
  for (float& v : af) v = dist(rng);
  return MakeMats(wtype, n, rows, toks, wf, af);
}

std::string Tag(IsaTier tier, GgmlType wtype) {
  return std::string(cpu::IsaTierName(tier)) + "_" + TypeName(wtype);
}

// ---- dot: every tier vs the scalar dot and vs float64 --------------------------------------

using DotParam = std::tuple<IsaTier, GgmlType, int64_t>;
class FloatDotTest : public ::testing::TestWithParam<DotParam> {};

TEST_P(FloatDotTest, MatchesScalarAndFloat64) {
  const auto [tier, wtype, n] = GetParam();
  if (!TierAvailable(tier)) GTEST_SKIP() << "this CPU lacks ISA tier " << cpu::IsaTierName(tier);
  const GemvKernels& k = KernelsFor(tier);
  const TypeKernels* tk = k.For(wtype);
  ASSERT_NE(tk, nullptr);
  const DotFn scalar = KernelsFor(IsaTier::kScalar).For(wtype)->dot;
  for (uint32_t seed = 1; seed <= 3; ++seed) {
    const FloatMats m = RandomMats(wtype, n, 1, 1, seed * 7919 + static_cast<uint32_t>(n));
    double norm;
    const double exact = m.Exact(0, 0, &norm);
    float got = kNaN;
    got = tk->dot(m.WRow(0), m.ARow(0), n);
    ASSERT_TRUE(std::isfinite(got)) << "seed " << seed;
    EXPECT_NEAR(got, scalar(m.WRow(0), m.ARow(0), n), 1e-5 * norm) << "seed " << seed;
    // f32 products and sums: ~6e-8 relative each, a few of them per term.
    EXPECT_NEAR(got, exact, 2e-6 * norm) << "seed " << seed;
  }
}

std::string DotName(const ::testing::TestParamInfo<DotParam>& info) {
  const auto [tier, wtype, n] = info.param;
  return Tag(tier, wtype) + "_" + std::to_string(n);
}

INSTANTIATE_TEST_SUITE_P(
    AllTiers, FloatDotTest,
    ::testing::Combine(::testing::Values(IsaTier::kScalar, IsaTier::kAvx2, IsaTier::kAvx512,
                                         IsaTier::kAvx512Vnni),
                       ::testing::Values(GgmlType::kF32, GgmlType::kF16, GgmlType::kBF16),
                       ::testing::Values<int64_t>(1, 7, 33, 1408, 2048, 7168)),
    DotName);

// ---- gemm tiles: odd shapes, padded strides, poisoned output -------------------------------

struct Shape {
  int64_t rows, toks, n;
};
// Covers both GEMM forms of the SIMD tiers: dot form (n_tok <= 12 for F32, <= 16 for F16/BF16;
// above 4 tokens in 1024-value blocks) and packed form (6 / 12-token tiles, 2048-value blocks);
// rows not a multiple of 2..32, n below / across a value block and not a multiple of 8 / 16.
constexpr Shape kShapes[] = {
    {1, 1, 1},      {5, 1, 7},     {17, 1, 2048}, {9, 2, 33},     {7, 3, 1408},
    {13, 4, 65},    {5, 5, 7},     {40, 7, 300},  {33, 13, 2048}, {17, 17, 1},
    {64, 25, 520},  {3, 6, 7168},  {31, 12, 256}, {16, 24, 257},  {9, 7, 2100},
    {35, 20, 4100}, {6, 16, 1500}, {20, 70, 100},  // the AMX tier: five token tiles (two batches of
                                                   // C tiles), a partial group
};

// gemm's result for shape s on random matrices of wtype (NaN-poisoned y, 3 guard values after
// each token's rows), checked against the scalar dot (scalar_tol) and float64 (exact_tol) of
// sum |w a|.
void CheckGemmShape(GemmFn gemm, GgmlType wtype, const Shape& s, double scalar_tol,
                    double exact_tol) {
  const DotFn scalar = KernelsFor(IsaTier::kScalar).For(wtype)->dot;
  const FloatMats m = RandomMats(wtype, s.n, s.rows, s.toks, static_cast<uint32_t>(s.rows * s.n));
  const int64_t ldy = s.rows + 3;            // 3 poisoned guard values after each token's rows
  std::vector<float> y(s.toks * ldy, kNaN);  // [toks, ldy]
  gemm(m.w.data(), m.w_stride, s.rows, m.a.data(), m.a_stride, s.toks, s.n, y.data(), ldy);
  const std::string where = "rows " + std::to_string(s.rows) + " toks " + std::to_string(s.toks) +
                            " n " + std::to_string(s.n);
  for (int64_t t = 0; t < s.toks; ++t) {
    for (int64_t r = 0; r < s.rows; ++r) {
      double norm;
      const double exact = m.Exact(r, t, &norm);
      const float got = y[t * ldy + r];
      ASSERT_TRUE(std::isfinite(got)) << where << " r " << r << " t " << t;
      ASSERT_NEAR(got, scalar(m.WRow(r), m.ARow(t), s.n), scalar_tol * norm)
          << where << " r " << r << " t " << t;
      ASSERT_NEAR(got, exact, exact_tol * norm) << where << " r " << r << " t " << t;
    }
    for (int64_t r = s.rows; r < ldy; ++r) {
      ASSERT_TRUE(std::isnan(y[t * ldy + r])) << where << ": wrote past rows at t " << t;
    }
  }
}

using GemmParam = std::tuple<IsaTier, GgmlType>;
class FloatGemmTest : public ::testing::TestWithParam<GemmParam> {};

TEST_P(FloatGemmTest, TilesMatchScalarDots) {
  const auto [tier, wtype] = GetParam();
  if (!TierAvailable(tier)) GTEST_SKIP() << "this CPU lacks ISA tier " << cpu::IsaTierName(tier);
  const GemmFn gemm = KernelsFor(tier).For(wtype)->gemm;
  for (const Shape& s : kShapes) {
    CheckGemmShape(gemm, wtype, s, 1e-5, 2e-6);
    if (::testing::Test::HasFatalFailure()) return;
  }
}

// Gemv (n_tok = 1 with a_stride = ldy = 0, as the engine calls it) against the dot.
TEST_P(FloatGemmTest, GemvMatchesDots) {
  const auto [tier, wtype] = GetParam();
  if (!TierAvailable(tier)) GTEST_SKIP() << "this CPU lacks ISA tier " << cpu::IsaTierName(tier);
  const GemvKernels& k = KernelsFor(tier);
  const int64_t n = 2048, rows = 21;
  const FloatMats m = RandomMats(wtype, n, rows, 1, 99);
  std::vector<float> y(rows + 1, kNaN);  // [rows + guard]
  Gemv(k, wtype, m.w.data(), m.w_stride, rows, n, m.a.data(), y.data());
  for (int64_t r = 0; r < rows; ++r) {
    // Decode runs the dot row after row on every tier: equal bit for bit.
    EXPECT_EQ(y[r], k.For(wtype)->dot(m.WRow(r), m.ARow(0), n)) << "row " << r;
  }
  EXPECT_TRUE(std::isnan(y[rows])) << "Gemv wrote past rows";
}

std::string GemmName(const ::testing::TestParamInfo<GemmParam>& info) {
  const auto [tier, wtype] = info.param;
  return Tag(tier, wtype);
}

INSTANTIATE_TEST_SUITE_P(AllTiers, FloatGemmTest,
                         ::testing::Combine(testing::AllIsaTiers(),
                                            ::testing::Values(GgmlType::kF32, GgmlType::kF16,
                                                              GgmlType::kBF16)),
                         GemmName);

// The AMX tier's F32 GEMM on AMX-BF16 tiles (GemvKernels::f32_gemm_bf16x3) over the same shapes:
// two bf16 per value, within 1.1e-5 of |w a| per product (1.5e-5 of sum |w a| in all).
TEST(FloatAmxTest, Bf16x3MatchesScalarDots) {
  if (!TierAvailable(IsaTier::kAmx)) GTEST_SKIP() << "this CPU lacks the AMX tier";
  const GemmFn gemm = KernelsFor(IsaTier::kAmx).f32_gemm_bf16x3;
  ASSERT_NE(gemm, nullptr);
  for (int i = 0; i < cpu::kNumIsaTiers; ++i) {
    const auto tier = static_cast<IsaTier>(i);
    EXPECT_EQ(KernelsFor(tier).f32_gemm_bf16x3 != nullptr, tier == IsaTier::kAmx);
  }
  for (const Shape& s : kShapes) {
    CheckGemmShape(gemm, GgmlType::kF32, s, 2.5e-5, 1.5e-5);
    if (::testing::Test::HasFatalFailure()) return;
  }
}

// ---- extreme values: the largest finite weights, F16 subnormals, +/-127 activations ---------

// Weights alternate +max, -max, (F16) the smallest subnormal 2^-24; activations alternate
// +/-127 (F16) or +/-1e-30 (F32 / BF16, whose max ~3.4e38 would overflow the sum otherwise).
FloatMats ExtremeMats(GgmlType wtype, int64_t n, int64_t rows, int64_t toks) {
  const bool f16 = wtype == GgmlType::kF16;
  const float wmax = f16 ? 65504.0f : wtype == GgmlType::kBF16 ? 3.3895314e38f : 3.4028235e38f;
  const float amax = f16 ? 127.0f : 1e-30f;
  std::vector<float> wf(rows * n), af(toks * n);  // [rows, n], [toks, n]
  for (size_t i = 0; i < wf.size(); ++i) {
    wf[i] = i % 3 == 0 ? wmax : i % 3 == 1 ? -wmax : (f16 ? 5.9604645e-8f : wmax);
  }
  for (size_t i = 0; i < af.size(); ++i) af[i] = i % 2 == 0 ? amax : -amax;
  return MakeMats(wtype, n, rows, toks, wf, af);
}

TEST(FloatExtremeTest, AllTiersMatchFloat64) {
  for (GgmlType wtype : {GgmlType::kF32, GgmlType::kF16, GgmlType::kBF16}) {
    // 6 rows x 5 tokens: the SIMD tiers' dot and packed forms; 32 x 20: the AMX tier's tiles.
    for (const auto& [rows, toks, n] :
         {std::array<int64_t, 3>{6, 5, 33}, {6, 5, 2048}, {32, 20, 96}, {32, 20, 2048}}) {
      const FloatMats m = ExtremeMats(wtype, n, rows, toks);
      ASSERT_TRUE(std::isfinite(m.wd[0])) << "max weight rounded to inf";
      for (int t = 0; t < cpu::kNumIsaTiers; ++t) {
        const auto tier = static_cast<IsaTier>(t);
        if (!TierAvailable(tier)) continue;
        const TypeKernels* tk = KernelsFor(tier).For(wtype);
        std::vector<float> y(toks * rows, kNaN);  // [toks, rows]
        tk->gemm(m.w.data(), m.w_stride, rows, m.a.data(), m.a_stride, toks, n, y.data(), rows);
        for (int64_t tok = 0; tok < toks; ++tok) {
          for (int64_t r = 0; r < rows; ++r) {
            double norm;
            const double exact = m.Exact(r, tok, &norm);
            EXPECT_NEAR(y[tok * rows + r], exact, 1e-5 * norm) << Tag(tier, wtype) << " n " << n;
            EXPECT_NEAR(tk->dot(m.WRow(r), m.ARow(tok), n), exact, 1e-5 * norm)
                << Tag(tier, wtype) << " n " << n;
          }
        }
      }
    }
  }
}

// The AMX tier's F32 GEMM runs its tiles (its bits differ from the AVX-512 kernel's somewhere),
// and a weight beyond bf16's range (f32's largest values round to inf in bf16) sends the call
// to the AVX-512 kernel: the same bits, finite.
TEST(FloatAmxTest, TilesRunAndOutOfRangeWeightsFallBack) {
  if (!TierAvailable(IsaTier::kAmx)) GTEST_SKIP() << "this CPU lacks the AMX tier";
  const GemmFn amx = KernelsFor(IsaTier::kAmx).f32_gemm_bf16x3;
  const GemmFn avx = KernelsFor(IsaTier::kAvx512).For(GgmlType::kF32)->gemm;
  const int64_t rows = 32, toks = 16, n = 96;
  const FloatMats m = RandomMats(GgmlType::kF32, n, rows, toks, 5);
  std::vector<float> a(toks * rows, kNaN), b(toks * rows, kNaN);  // [toks, rows]
  amx(m.w.data(), m.w_stride, rows, m.a.data(), m.a_stride, toks, n, a.data(), rows);
  avx(m.w.data(), m.w_stride, rows, m.a.data(), m.a_stride, toks, n, b.data(), rows);
  EXPECT_NE(a, b) << "the AMX tier ran the AVX-512 kernel";
  const FloatMats x = ExtremeMats(GgmlType::kF32, n, rows, toks);
  amx(x.w.data(), x.w_stride, rows, x.a.data(), x.a_stride, toks, n, a.data(), rows);
  avx(x.w.data(), x.w_stride, rows, x.a.data(), x.a_stride, toks, n, b.data(), rows);
  EXPECT_EQ(a, b);
  for (float v : a) ASSERT_TRUE(std::isfinite(v));
}

// The AMX tier's F16 / BF16 GEMMs run their tiles (bits differ from the AVX-512 kernel's
// somewhere), and a non-finite weight or activation sends the call to the AVX-512 kernel: the
// same bits, +/-inf where f32 arithmetic gives it (the tiles would give NaN through the zero
// parts of the other operand).
TEST(FloatAmxTest, HalfWeightTilesRunAndNonFiniteValuesFallBack) {
  if (!TierAvailable(IsaTier::kAmx)) GTEST_SKIP() << "this CPU lacks the AMX tier";
  const int64_t rows = 32, toks = 17, n = 96;
  for (GgmlType wtype : {GgmlType::kF16, GgmlType::kBF16}) {
    const GemmFn amx = KernelsFor(IsaTier::kAmx).For(wtype)->gemm;
    const GemmFn avx = KernelsFor(IsaTier::kAvx512).For(wtype)->gemm;
    FloatMats m = RandomMats(wtype, n, rows, toks, 6);
    std::vector<float> a(toks * rows, kNaN), b(toks * rows, kNaN);  // [toks, rows]
    amx(m.w.data(), m.w_stride, rows, m.a.data(), m.a_stride, toks, n, a.data(), rows);
    avx(m.w.data(), m.w_stride, rows, m.a.data(), m.a_stride, toks, n, b.data(), rows);
    EXPECT_NE(a, b) << TypeName(wtype) << ": the AMX tier ran the AVX-512 kernel";
    // +inf in row 20, value 40 (F16 0x7C00, BF16 0x7F80): that row is +/-inf or NaN, the rest
    // finite, bit for bit the AVX-512 kernel's.
    const uint16_t inf = wtype == GgmlType::kF16 ? 0x7C00 : 0x7F80;
    std::memcpy(m.w.data() + 20 * m.w_stride + 40 * 2, &inf, 2);
    amx(m.w.data(), m.w_stride, rows, m.a.data(), m.a_stride, toks, n, a.data(), rows);
    avx(m.w.data(), m.w_stride, rows, m.a.data(), m.a_stride, toks, n, b.data(), rows);
    EXPECT_EQ(0, std::memcmp(a.data(), b.data(), a.size() * sizeof(float))) << TypeName(wtype);
    EXPECT_TRUE(std::isinf(a[20]) || std::isnan(a[20])) << TypeName(wtype);
    EXPECT_TRUE(std::isfinite(a[21])) << TypeName(wtype);
    // A NaN activation (token 16, value 90) instead, with finite weights.
    m = RandomMats(wtype, n, rows, toks, 6);
    reinterpret_cast<float*>(m.a.data() + 16 * m.a_stride)[90] = kNaN;
    amx(m.w.data(), m.w_stride, rows, m.a.data(), m.a_stride, toks, n, a.data(), rows);
    avx(m.w.data(), m.w_stride, rows, m.a.data(), m.a_stride, toks, n, b.data(), rows);
    EXPECT_EQ(0, std::memcmp(a.data(), b.data(), a.size() * sizeof(float))) << TypeName(wtype);
    EXPECT_TRUE(std::isnan(a[16 * rows])) << TypeName(wtype);
    EXPECT_TRUE(std::isfinite(a[15 * rows])) << TypeName(wtype);
  }
}

// The parts the AMX F16 / BF16 tiles sum, on values where every product and partial sum is
// exact in f32: a = c (1 + 2^-9 + 2^-18) splits into the bf16 parts c, c 2^-9, c 2^-18 (c a power
// of two per token), and the F16 weight 1 + 2^-9 into 1 + 2^-9 (BF16: the weight 1). Over 32
// values: BF16 32 a; F16 32 c (1 + 2^-8 + 2^-17) (the w1 p2 = c 2^-27 terms are left out by
// design). A kernel that left out the third activation part or the second weight part's
// product with the second activation part is off by 32 c 2^-18, a few ulps: caught.
TEST(FloatAmxTest, HalfWeightTilesSumEveryPartProduct) {
  if (!TierAvailable(IsaTier::kAmx)) GTEST_SKIP() << "this CPU lacks the AMX tier";
  const int64_t rows = 16, toks = 20, n = 32;
  const float a1 = 1.0f + std::ldexp(1.0f, -9) + std::ldexp(1.0f, -18);
  for (GgmlType wtype : {GgmlType::kF16, GgmlType::kBF16}) {
    const bool f16 = wtype == GgmlType::kF16;
    const std::vector<float> wf(rows * n, f16 ? 1.0f + std::ldexp(1.0f, -9) : 1.0f);
    std::vector<float> af(toks * n);  // [toks, n]
    for (int64_t t = 0; t < toks; ++t) {
      for (int64_t i = 0; i < n; ++i) af[t * n + i] = std::ldexp(a1, static_cast<int>(t % 5) - 2);
    }
    const FloatMats m = MakeMats(wtype, n, rows, toks, wf, af);
    ASSERT_EQ(m.wd[0], wf[0]) << "the weight is not exact in " << TypeName(wtype);
    std::vector<float> y(toks * rows, kNaN);  // [toks, rows]
    KernelsFor(IsaTier::kAmx)
        .For(wtype)
        ->gemm(m.w.data(), m.w_stride, rows, m.a.data(), m.a_stride, toks, n, y.data(), rows);
    const float one = f16 ? 1.0f + std::ldexp(1.0f, -8) + std::ldexp(1.0f, -17) : a1;
    for (int64_t t = 0; t < toks; ++t) {
      const float want = 32.0f * std::ldexp(one, static_cast<int>(t % 5) - 2);
      for (int64_t r = 0; r < rows; ++r) {
        ASSERT_EQ(y[t * rows + r], want) << TypeName(wtype) << " row " << r << " token " << t;
      }
    }
  }
}

// ---- weighted sums of rows (MLA's absorbed decode output) ------------------------------------

// Every tier's row_mix against the scalar reference: outputs in pairs and alone, widths that
// leave partial vectors (d 1 ... 530) and rows a wider stride apart (the 576-wide latent cache
// rows of which the first 512 are summed), outputs poisoned with NaN before each run and the
// gaps between output rows (ldy > d) left untouched. Bound: a few f32 roundings of sum |p r|.
TEST(RowMixTest, EveryTierMatchesTheReference) {
  const RowMixFn ref = KernelsFor(IsaTier::kScalar).row_mix;
  ASSERT_NE(ref, nullptr);
  std::mt19937 rng(13);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  for (int t = 0; t < cpu::kNumIsaTiers; ++t) {
    const auto tier = static_cast<IsaTier>(t);
    if (!TierAvailable(tier)) continue;
    const RowMixFn fn = KernelsFor(tier).row_mix;
    ASSERT_NE(fn, nullptr) << cpu::IsaTierName(tier);
    for (const auto& [n_out, n, d, ld_rows] :
         {std::tuple<int64_t, int64_t, int64_t, int64_t>{1, 1, 1, 1},
          {2, 3, 7, 9},
          {3, 17, 16, 16},
          {2, 64, 512, 576},
          {5, 33, 129, 130},
          {16, 257, 512, 576},
          {11, 40, 100, 101},
          {1, 100, 530, 530}}) {
      const int64_t ldp = n + 3, ldy = d + 2;
      std::vector<float> p(static_cast<size_t>(n_out * ldp)),
          rows(static_cast<size_t>(n * ld_rows));
      for (float& v : p) v = std::abs(dist(rng)) / static_cast<float>(n);  // softmax-like weights
      for (float& v : rows) v = dist(rng);
      std::vector<float> want(static_cast<size_t>(n_out * ldy), kNaN);
      std::vector<float> got = want;
      ref(p.data(), ldp, n_out, rows.data(), ld_rows, n, d, want.data(), ldy);
      fn(p.data(), ldp, n_out, rows.data(), ld_rows, n, d, got.data(), ldy);
      for (int64_t o = 0; o < n_out; ++o) {
        for (int64_t j = 0; j < d; ++j) {
          double mag = 0;
          for (int64_t s = 0; s < n; ++s)
            mag += std::abs(double{p[o * ldp + s]} * rows[s * ld_rows + j]);
          ASSERT_NEAR(got[o * ldy + j], want[o * ldy + j], 4e-7 * mag * std::log2(n + 2.0) + 1e-30)
              << cpu::IsaTierName(tier) << " out " << o << " of " << n_out << ", value " << j
              << " of " << d << ", " << n << " rows";
        }
        for (int64_t j = d; j < ldy; ++j) {
          ASSERT_TRUE(std::isnan(got[o * ldy + j]))
              << "wrote past d at out " << o << " value " << j;
        }
      }
    }
  }
}

// Every tier's row_scores against the scalar reference: query counts around the 8 / 16 heads of
// a panel, position counts around the 8 of a tile, DeepSeek's 576-value rows and odd widths
// and strides; NaN-poisoned scores, guards past n untouched.
TEST(RowScoresTest, EveryTierMatchesTheReference) {
  const RowScoresFn ref = KernelsFor(IsaTier::kScalar).row_scores;
  ASSERT_NE(ref, nullptr);
  std::mt19937 rng(14);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  for (int t = 0; t < cpu::kNumIsaTiers; ++t) {
    const auto tier = static_cast<IsaTier>(t);
    if (!TierAvailable(tier)) continue;
    const RowScoresFn fn = KernelsFor(tier).row_scores;
    ASSERT_NE(fn, nullptr) << cpu::IsaTierName(tier);
    for (const auto& [n_q, n, d, ld_rows] :
         {std::tuple<int64_t, int64_t, int64_t, int64_t>{1, 1, 1, 1},
          {3, 7, 9, 11},
          {16, 512, 576, 576},
          {17, 33, 576, 580},
          {32, 20, 64, 64},
          {9, 8, 17, 17},
          {5, 9, 130, 131}}) {
      const int64_t ldq = d + 1, lds = n + 3;
      std::vector<float> q(static_cast<size_t>(n_q * ldq)), rows(static_cast<size_t>(n * ld_rows));
      for (float& v : q) v = dist(rng);
      for (float& v : rows) v = dist(rng);
      std::vector<float> want(static_cast<size_t>(n_q * lds), kNaN);
      std::vector<float> got = want;
      ref(q.data(), ldq, n_q, rows.data(), ld_rows, n, d, want.data(), lds);
      fn(q.data(), ldq, n_q, rows.data(), ld_rows, n, d, got.data(), lds);
      for (int64_t j = 0; j < n_q; ++j) {
        for (int64_t p = 0; p < n; ++p) {
          double mag = 0;
          for (int64_t k = 0; k < d; ++k)
            mag += std::abs(double{q[j * ldq + k]} * rows[p * ld_rows + k]);
          ASSERT_NEAR(got[j * lds + p], want[j * lds + p], 4e-7 * mag * std::log2(d + 2.0) + 1e-30)
              << cpu::IsaTierName(tier) << " query " << j << " of " << n_q << ", position " << p
              << " of " << n << ", " << d << " values";
        }
        for (int64_t p = n; p < lds; ++p) {
          ASSERT_TRUE(std::isnan(got[j * lds + p])) << "wrote past n at query " << j << ", " << p;
        }
      }
    }
  }
}

// ---- softmax of attention score rows ------------------------------------------------------

// Every tier's scaled_softmax against the scalar reference (ops::Softmax of the scaled row):
// odd lengths, a causal tail zeroed, values over a wide range (e^x underflowing to 0), -inf
// entries (masked scores), NaN guards past n untouched; the returned log-sum-exp against one
// computed in long double (an empty row: -inf and zeros).
TEST(SoftmaxTest, EveryTierMatchesTheReference) {
  const ScaledSoftmaxFn ref = KernelsFor(IsaTier::kScalar).scaled_softmax;
  ASSERT_NE(ref, nullptr);
  std::mt19937 rng(11);
  std::normal_distribution<float> dist(0.0f, 30.0f);
  for (int t = 0; t < cpu::kNumIsaTiers; ++t) {
    const auto tier = static_cast<IsaTier>(t);
    if (!TierAvailable(tier)) continue;
    const ScaledSoftmaxFn fn = KernelsFor(tier).scaled_softmax;
    ASSERT_NE(fn, nullptr) << cpu::IsaTierName(tier);
    for (const auto& [valid, n] : {std::pair<int64_t, int64_t>{0, 5},
                                   {1, 1},
                                   {1, 17},
                                   {7, 7},
                                   {16, 16},
                                   {17, 40},
                                   {100, 100},
                                   {1000, 1029},
                                   {4097, 4100}}) {
      std::vector<float> a(static_cast<size_t>(n + 5), kNaN);  // [n + 5 guards]
      for (int64_t i = 0; i < n; ++i) a[i] = i % 97 == 5 ? -INFINITY : dist(rng);
      std::vector<float> b = a;
      long double lse = 0;  // log sum e^(x/8) as max + log sum e^(x/8 - max)
      {
        long double max = -INFINITY, s = 0;
        for (int64_t i = 0; i < valid; ++i) max = std::max<long double>(max, a[i] * 0.125L);
        for (int64_t i = 0; i < valid; ++i) s += std::exp(a[i] * 0.125L - max);
        lse = valid == 0 ? -INFINITY : max + std::log(s);
      }
      const float lse_ref = ref(a.data(), valid, n, 0.125f);
      const float lse_fn = fn(b.data(), valid, n, 0.125f);
      if (valid == 0) {
        EXPECT_EQ(lse_ref, -INFINITY);
        EXPECT_EQ(lse_fn, -INFINITY) << cpu::IsaTierName(tier);
        for (int64_t i = 0; i < n; ++i) ASSERT_EQ(b[i], 0.0f) << "empty row at " << i;
        continue;
      }
      // f32 sums of <= 4097 terms in (0, 1] of which one is 1: a relative 1e-6 of the sum.
      EXPECT_NEAR(lse_ref, static_cast<double>(lse), 1e-6 * std::fabs(lse) + 1e-6);
      EXPECT_NEAR(lse_fn, static_cast<double>(lse), 1e-6 * std::fabs(lse) + 2e-6)
          << cpu::IsaTierName(tier) << " valid " << valid;
      double sum = 0;
      for (int64_t i = 0; i < valid; ++i) {
        ASSERT_NEAR(b[i], a[i], 2e-6 * a[i] + 1e-30)
            << cpu::IsaTierName(tier) << " valid " << valid << " i " << i;
        sum += b[i];
      }
      EXPECT_NEAR(sum, 1.0, 1e-5) << cpu::IsaTierName(tier) << " valid " << valid;
      for (int64_t i = valid; i < n; ++i) ASSERT_EQ(b[i], 0.0f) << "causal tail at " << i;
      for (int64_t i = n; i < n + 5; ++i) ASSERT_TRUE(std::isnan(b[i])) << "wrote past n";
    }
  }
}

// ---- SwiGLU of the FFNs -----------------------------------------------------------------------

// Every tier's swiglu against the scalar reference (ops::SwiGluInPlace: expf): odd lengths,
// gates from -120 to 120 (e^-g overflowing to inf and underflowing to 0), NaN guards past n.
TEST(SwiGluTest, EveryTierMatchesTheReference) {
  const SwiGluFn ref = KernelsFor(IsaTier::kScalar).swiglu;
  ASSERT_NE(ref, nullptr);
  std::mt19937 rng(12);
  std::normal_distribution<float> dist(0.0f, 4.0f);
  for (int t = 0; t < cpu::kNumIsaTiers; ++t) {
    const auto tier = static_cast<IsaTier>(t);
    if (!TierAvailable(tier)) continue;
    const SwiGluFn fn = KernelsFor(tier).swiglu;
    ASSERT_NE(fn, nullptr) << cpu::IsaTierName(tier);
    for (const int64_t n : {1, 7, 16, 17, 100, 1408, 1409}) {
      std::vector<float> g(static_cast<size_t>(n + 5), kNaN), u(static_cast<size_t>(n));
      for (int64_t i = 0; i < n; ++i) {
        g[i] = i % 13 == 3 ? static_cast<float>(i % 241) - 120.0f : dist(rng);
        u[i] = dist(rng);
      }
      std::vector<float> h = g;
      ref(g.data(), u.data(), n);
      fn(h.data(), u.data(), n);
      for (int64_t i = 0; i < n; ++i) {
        ASSERT_NEAR(h[i], g[i], 1e-6f * std::fabs(g[i]) + 1e-30f)
            << cpu::IsaTierName(tier) << " n " << n << " i " << i;
      }
      for (int64_t i = n; i < n + 5; ++i) ASSERT_TRUE(std::isnan(h[i])) << "wrote past n";
    }
  }
}

// ---- the table ------------------------------------------------------------------------------

TEST(FloatTableTest, EveryTierHasFloatKernelsWithF32Activations) {
  for (int t = 0; t < cpu::kNumIsaTiers; ++t) {
    const GemvKernels& k = KernelsFor(static_cast<IsaTier>(t));
    for (GgmlType wtype : {GgmlType::kF32, GgmlType::kF16, GgmlType::kBF16}) {
      const TypeKernels* tk = k.For(wtype);
      ASSERT_NE(tk, nullptr) << Tag(static_cast<IsaTier>(t), wtype);
      EXPECT_EQ(tk->act_type, GgmlType::kF32);
      EXPECT_NE(tk->gemm, nullptr);
      GgmlType act;
      ASSERT_TRUE(ActivationTypeFor(wtype, &act));
      EXPECT_EQ(act, GgmlType::kF32);
    }
    EXPECT_EQ(k.Quantizer(GgmlType::kF32), nullptr);
  }
}

}  // namespace
}  // namespace moesplit::gemv
