// Every ISA tier's dot products against the scalar reference, and the scalar reference against
// dequantize(w) . dequantize(a) in float64.
#include "cpu_kernels/gemv/gemv.h"

#include <gtest/gtest.h>

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
#include "cpu_kernels/quant/quant.h"

namespace moesplit::gemv {
namespace {

using cpu::IsaTier;

// One weight row and one activation row, quantized, plus their float64 reference.
struct DotCase {
  GgmlType wtype = GgmlType::kQ4_K;
  int64_t n = 0;
  std::vector<uint32_t> w;  // [RowBytes(wtype, n) / 4 + 1] weight blocks (u32 for alignment)
  std::vector<uint32_t> a;  // [RowBytes(atype, n) / 4 + 1] activation blocks
  double exact = 0;         // sum_i deq(w)_i * deq(a)_i in float64
  double norm = 0;          // sum_i |deq(w)_i * deq(a)_i|: the scale errors are measured against
};

std::vector<float> RandomRow(int64_t n, uint32_t seed, float scale) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, scale);
  std::vector<float> x(n);  // [n]
  for (float& v : x) v = dist(rng);
  return x;
}

DotCase MakeCase(GgmlType wtype, const std::vector<float>& wf, const std::vector<float>& af) {
  DotCase c;
  c.wtype = wtype;
  c.n = static_cast<int64_t>(wf.size());
  GgmlType atype;
  EXPECT_TRUE(ActivationTypeFor(wtype, &atype));
  // Poison with 0xFF bytes (NaN scales) so a quantizer that skips a block shows up.
  c.w.assign(RowBytes(wtype, c.n) / 4 + 1, 0xFFFFFFFFu);
  c.a.assign(RowBytes(atype, c.n) / 4 + 1, 0xFFFFFFFFu);
  quant::QuantizeRow(wtype, wf.data(), c.w.data(), c.n);
  const GemvKernels& k = KernelsFor(IsaTier::kScalar);
  k.Quantizer(atype)(af.data(), c.a.data(), c.n);
  std::vector<float> wd(c.n), ad(c.n);  // [n] each
  quant::DequantizeRow(wtype, c.w.data(), wd.data(), c.n);
  quant::DequantizeRow(atype, c.a.data(), ad.data(), c.n);
  for (int64_t i = 0; i < c.n; ++i) {
    const double p = static_cast<double>(wd[i]) * ad[i];
    c.exact += p;
    c.norm += std::fabs(p);
  }
  return c;
}

DotCase RandomCase(GgmlType wtype, int64_t n, uint32_t seed) {
  return MakeCase(wtype, RandomRow(n, seed, 0.02f), RandomRow(n, seed + 1000, 3.0f));
}

float RunDot(const GemvKernels& k, const DotCase& c) {
  float y = std::numeric_limits<float>::quiet_NaN();
  y = k.For(c.wtype)->dot(c.w.data(), c.a.data(), c.n);
  return y;
}

bool TierAvailable(IsaTier tier) {
  return static_cast<int>(tier) <= static_cast<int>(cpu::BestTier(cpu::DetectCpuFeatures()));
}

using TierParam = std::tuple<IsaTier, GgmlType, int64_t>;

class GemvTierTest : public ::testing::TestWithParam<TierParam> {};

TEST_P(GemvTierTest, MatchesScalarReference) {
  const auto [tier, wtype, n] = GetParam();
  if (!TierAvailable(tier)) {
    GTEST_SKIP() << "this CPU lacks ISA tier " << cpu::IsaTierName(tier);
  }
  const GemvKernels& k = KernelsFor(tier);
  ASSERT_EQ(k.tier, tier);
  for (uint32_t seed = 1; seed <= 3; ++seed) {
    const DotCase c = RandomCase(wtype, n, seed * 7919);
    const float ref = RunDot(KernelsFor(IsaTier::kScalar), c);
    const float got = RunDot(k, c);
    ASSERT_TRUE(std::isfinite(got)) << "seed " << seed;
    // 1e-5 relative to sum |w_i a_i| (>= |ref|; the result itself may cancel to ~0).
    EXPECT_NEAR(got, ref, 1e-5 * c.norm) << "seed " << seed << " exact " << c.exact;
  }
}

std::string TierParamName(const ::testing::TestParamInfo<TierParam>& info) {
  const auto [tier, wtype, n] = info.param;
  return std::string(cpu::IsaTierName(tier)) + "_" + TypeName(wtype) + "_" + std::to_string(n);
}

// Q8_0 block counts 3, 9 and 224 exercise the AVX-512 leftover path (blocks % 4 != 0) too.
INSTANTIATE_TEST_SUITE_P(Q4K, GemvTierTest,
                         ::testing::Combine(::testing::Values(IsaTier::kAvx2, IsaTier::kAvx512,
                                                              IsaTier::kAvx512Vnni),
                                            ::testing::Values(GgmlType::kQ4_K),
                                            ::testing::Values<int64_t>(256, 768, 2048, 7168)),
                         TierParamName);
INSTANTIATE_TEST_SUITE_P(Q8_0, GemvTierTest,
                         ::testing::Combine(::testing::Values(IsaTier::kAvx2, IsaTier::kAvx512,
                                                              IsaTier::kAvx512Vnni),
                                            ::testing::Values(GgmlType::kQ8_0),
                                            ::testing::Values<int64_t>(96, 256, 288, 2048, 7168)),
                         TierParamName);

TEST(GemvScalarTest, MatchesDequantizedFloat64Dot) {
  for (GgmlType wtype : {GgmlType::kQ4_K, GgmlType::kQ8_0}) {
    for (int64_t n : {256, 2048, 7168}) {
      const DotCase c = RandomCase(wtype, n, static_cast<uint32_t>(n));
      const float got = RunDot(KernelsFor(IsaTier::kScalar), c);
      // Integer sums per block are exact; what remains is f32 rounding of d * isum terms and
      // of the dequantized values, ~1e-7 each, over n / 32 .. n / 256 terms.
      EXPECT_NEAR(got, c.exact, 2e-6 * c.norm) << TypeName(wtype) << " n=" << n;
    }
  }
}

// Extreme quants: every weight at +max and every activation at -max (|q| = 15 / 127), the
// worst case for maddubs' 16-bit pair sums; all tiers must agree exactly with float64.
TEST(GemvScalarTest, ExtremeQuantsAllTiers) {
  for (GgmlType wtype : {GgmlType::kQ4_K, GgmlType::kQ8_0}) {
    const int64_t n = 2048;
    std::vector<float> wf(n, 1.0f), af(n, -1.0f);      // [n] each
    for (int64_t i = 0; i < n; i += 2) wf[i] = -1.0f;  // Q4_K: min -1, so q in {0, 15}
    for (int64_t i = 0; i < n; i += 2) af[i] = 1.0f;   // products all -1
    const DotCase c = MakeCase(wtype, wf, af);
    for (int t = 0; t < cpu::kNumIsaTiers; ++t) {
      if (!TierAvailable(static_cast<IsaTier>(t))) continue;
      const float got = RunDot(KernelsFor(static_cast<IsaTier>(t)), c);
      EXPECT_NEAR(got, c.exact, 1e-5 * c.norm)
          << TypeName(wtype) << " tier " << cpu::IsaTierName(static_cast<IsaTier>(t));
    }
  }
}

TEST(GemvTest, MultiRowMatchesPerRowDots) {
  const IsaTier tier = cpu::BestTier(cpu::DetectCpuFeatures());
  const GemvKernels& k = KernelsFor(tier);
  for (GgmlType wtype : {GgmlType::kQ4_K, GgmlType::kQ8_0}) {
    const int64_t n = 512, rows = 5;
    const size_t stride = RowBytes(wtype, n) + 16;  // padded rows; keeps 2-byte alignment
    std::vector<uint8_t> w(stride * rows);          // [rows, stride] bytes
    for (int64_t r = 0; r < rows; ++r) {
      const std::vector<float> wf = RandomRow(n, 100 + r, 0.05f);
      quant::QuantizeRow(wtype, wf.data(), w.data() + r * stride, n);
    }
    GgmlType atype;
    ASSERT_TRUE(ActivationTypeFor(wtype, &atype));
    std::vector<uint32_t> a(RowBytes(atype, n) / 4 + 1);  // activation blocks
    const std::vector<float> af = RandomRow(n, 7, 1.0f);
    k.Quantizer(atype)(af.data(), a.data(), n);
    std::vector<float> y(rows + 1, std::numeric_limits<float>::quiet_NaN());  // [rows + guard]
    Gemv(k, wtype, w.data(), stride, rows, n, a.data(), y.data());
    const DotFn dot = k.For(wtype)->dot;
    // Gemv runs the type's gemm tile, equal to the dot up to float summation order (gemv.h):
    // within 1e-5 of sum |w_i a_i|.
    std::vector<float> wd(n), ad(n);  // [n] each, dequantized
    quant::DequantizeRow(atype, a.data(), ad.data(), n);
    for (int64_t r = 0; r < rows; ++r) {
      quant::DequantizeRow(wtype, w.data() + r * stride, wd.data(), n);
      double norm = 0;
      for (int64_t i = 0; i < n; ++i) norm += std::fabs(static_cast<double>(wd[i]) * ad[i]);
      EXPECT_NEAR(y[r], dot(w.data() + r * stride, a.data(), n), 1e-5 * norm) << "row " << r;
    }
    EXPECT_TRUE(std::isnan(y[rows])) << "Gemv wrote past rows";
  }
}

TEST(GemvTest, ActivationTypes) {
  GgmlType t;
  ASSERT_TRUE(ActivationTypeFor(GgmlType::kQ4_K, &t));
  EXPECT_EQ(t, GgmlType::kQ8_K);
  ASSERT_TRUE(ActivationTypeFor(GgmlType::kQ8_0, &t));
  EXPECT_EQ(t, GgmlType::kQ8_0);
  ASSERT_TRUE(ActivationTypeFor(GgmlType::kMXFP4, &t));  // decode-only on the GPU, CPU kernels
  EXPECT_EQ(t, GgmlType::kQ8_0);
  EXPECT_FALSE(ActivationTypeFor(GgmlType::kTQ2_0, &t));  // no kernel (nor a decoder)
}

TEST(GemvTest, KernelsForReturnsTheRequestedTier) {
  for (int t = 0; t < cpu::kNumIsaTiers; ++t) {
    const GemvKernels& k = KernelsFor(static_cast<IsaTier>(t));
    EXPECT_EQ(static_cast<int>(k.tier), t);
    EXPECT_NE(k.For(GgmlType::kQ4_K), nullptr);
    EXPECT_NE(k.For(GgmlType::kQ8_0), nullptr);
    EXPECT_NE(k.quantize_q8k, nullptr);
    EXPECT_NE(k.quantize_q8_0, nullptr);
  }
}

TEST(GemvDeathTest, UnsupportedWeightTypeIsABrokenInvariant) {
  std::vector<uint32_t> w(64), a(64);
  float y = 0;
  EXPECT_DEATH(
      Gemv(KernelsFor(IsaTier::kScalar), GgmlType::kTQ2_0, w.data(), 136, 1, 256, a.data(), &y),
      "no kernel");
}

}  // namespace
}  // namespace moesplit::gemv
