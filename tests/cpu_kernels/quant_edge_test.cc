// Edge cases of the reference (de)quantizers that the oracle vectors do not reach: all-zero and
// constant blocks, power-of-two rescaling, huge and tiny magnitudes, Q8_K (no oracle file),
// the f16 conversion itself, and the CHECKed preconditions.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "core/base/dtype.h"
#include "core/base/float16.h"
#include "cpu_kernels/quant/blocks.h"
#include "cpu_kernels/quant/quant.h"
#include "tests/cpu_kernels/quant_test_util.h"

namespace moesplit::quant {
namespace {

using namespace ::moesplit::quant::testing;

// Every type with a reference quantizer, and the worst rel_rmse a block of that type may give
// on normal data (the oracle table's value for that type, rounded up).
struct TypeCase {
  GgmlType type;
  double rmse_bound;
};
const TypeCase kQuantTypes[] = {
    {GgmlType::kF32, 0.0},   {GgmlType::kF16, 0.0003}, {GgmlType::kBF16, 0.002},
    {GgmlType::kQ4_0, 0.15}, {GgmlType::kQ4_1, 0.11},  {GgmlType::kQ5_0, 0.075},
    {GgmlType::kQ5_1, 0.05}, {GgmlType::kQ8_0, 0.01},  {GgmlType::kQ2_K, 0.37},
    {GgmlType::kQ3_K, 0.2},  {GgmlType::kQ4_K, 0.095}, {GgmlType::kQ5_K, 0.05},
    {GgmlType::kQ6_K, 0.03}, {GgmlType::kQ8_K, 0.025}, {GgmlType::kIQ4_NL, 0.11},
    {GgmlType::kIQ4_XS, 0.115},
};

constexpr int64_t kN = 1024;  // 4 super-blocks, 32 legacy blocks

// Rows of normal(0, sigma) values with a few 8x outliers, like the oracle inputs.
std::vector<float> Gaussian(int64_t n, float sigma, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, sigma);
  std::vector<float> v(n);
  for (int64_t i = 0; i < n; ++i) v[i] = dist(rng) * (i % 97 == 0 ? 8.0f : 1.0f);
  return v;
}

void PrintTo(const TypeCase& c, std::ostream* os) { *os << TypeName(c.type); }

class QuantEdgeTest : public ::testing::TestWithParam<TypeCase> {};

TEST_P(QuantEdgeTest, AllZeroBlocksDecodeToZero) {
  const GgmlType t = GetParam().type;
  const RoundTrip rt = QuantizeDequantize(t, std::vector<float>(kN, 0.0f), kN);
  for (int64_t i = 0; i < kN; ++i) ASSERT_EQ(rt.deq[i], 0.0f) << TypeName(t) << " at " << i;
}

TEST_P(QuantEdgeTest, ConstantBlocksStayClose) {
  const GgmlType t = GetParam().type;
  for (float c : {1.0f, -1.0f, 0.37f, -123.5f}) {
    const RoundTrip rt = QuantizeDequantize(t, std::vector<float>(kN, c), kN);
    ASSERT_TRUE(AllFinite(rt.deq)) << TypeName(t) << " c=" << c;
    // Every type represents a constant up to its f16 scale rounding and one level step.
    const double tol = std::max(0.02, 2.0 * GetParam().rmse_bound) * std::fabs(c);
    for (int64_t i = 0; i < kN; ++i) {
      ASSERT_NEAR(rt.deq[i], c, tol) << TypeName(t) << " c=" << c << " at " << i;
    }
  }
}

TEST_P(QuantEdgeTest, GaussianWithinBound) {
  const GgmlType t = GetParam().type;
  const std::vector<float> in = Gaussian(kN * 4, 0.05f, 11);
  const RoundTrip rt = QuantizeDequantize(t, in, kN);
  ASSERT_TRUE(AllFinite(rt.deq));
  EXPECT_LE(RelRmse(in, rt.deq), GetParam().rmse_bound) << TypeName(t);
}

// Scaling the input by a power of two only moves the f16/f32 scale exponents, as long as they
// stay normal: the decoded values scale exactly. Covers large magnitudes (x * 2^10, up to ~1e3).
TEST_P(QuantEdgeTest, PowerOfTwoScalingIsExact) {
  const GgmlType t = GetParam().type;
  const std::vector<float> in = Gaussian(kN, 0.5f, 5);
  std::vector<float> big(in);
  for (float& v : big) v *= 1024.0f;
  const RoundTrip a = QuantizeDequantize(t, in, kN);
  const RoundTrip b = QuantizeDequantize(t, big, kN);
  for (int64_t i = 0; i < kN; ++i) {
    ASSERT_EQ(b.deq[i], a.deq[i] * 1024.0f) << TypeName(t) << " at " << i;
  }
}

// Tiny magnitudes push the f16 scales into subnormals or to zero: precision may go, but the
// output must stay finite and never exceed the input's range.
TEST_P(QuantEdgeTest, TinyMagnitudesStayFinite) {
  const GgmlType t = GetParam().type;
  for (float scale : {1e-6f, 1e-20f, 1e-38f}) {
    std::vector<float> in = Gaussian(kN, 1.0f, 9);
    float amax = 0.0f;
    for (float& v : in) {
      v *= scale;
      amax = std::max(amax, std::fabs(v));
    }
    const RoundTrip rt = QuantizeDequantize(t, in, kN);
    ASSERT_TRUE(AllFinite(rt.deq)) << TypeName(t) << " scale " << scale;
    for (float v : rt.deq) ASSERT_LE(std::fabs(v), 2.0f * amax) << TypeName(t);
  }
}

INSTANTIATE_TEST_SUITE_P(AllQuantTypes, QuantEdgeTest, ::testing::ValuesIn(kQuantTypes),
                         [](const ::testing::TestParamInfo<TypeCase>& info) {
                           return std::string(TypeName(info.param.type));
                         });

TEST(QuantPreconditions, RejectsPartialBlocks) {
  for (const TypeCase& c : kQuantTypes) {
    const int64_t bs = GetTypeTraits(c.type).block_size;
    if (bs == 1) continue;  // plain types: any n is whole blocks
    std::vector<float> f(2 * bs, 0.0f);
    std::vector<uint8_t> q(RowBytes(c.type, 2 * bs));
    EXPECT_DEATH(QuantizeRow(c.type, f.data(), q.data(), bs + 1), "multiple of the block size");
    EXPECT_DEATH(DequantizeRow(c.type, q.data(), f.data(), bs - 1), "multiple of the block size");
  }
}

TEST(QuantPreconditions, RejectsMisalignedBlocks) {
  std::vector<float> f(256, 0.0f);
  std::vector<uint8_t> q(1024);
  EXPECT_DEATH(DequantizeRow(GgmlType::kQ4_K, q.data() + 1, f.data(), 256), "aligned");
  EXPECT_DEATH(QuantizeRow(GgmlType::kQ8_K, f.data(), q.data() + 2, 256), "aligned");
}

TEST(QuantCoverage, SupportedTypes) {
  for (const TypeCase& c : kQuantTypes) {
    EXPECT_TRUE(CanDequantize(c.type)) << TypeName(c.type);
    EXPECT_TRUE(CanQuantize(c.type)) << TypeName(c.type);
  }
  EXPECT_FALSE(CanDequantize(GgmlType::kTQ1_0));
  EXPECT_FALSE(CanQuantize(GgmlType::kQ8_1));
  std::vector<float> f(256, 0.0f);
  std::vector<uint8_t> q(1024);
  EXPECT_DEATH(DequantizeRow(GgmlType::kTQ1_0, q.data(), f.data(), 256), "no reference dequant");
  // Every lattice type and MXFP4 has a quantizer now; a type with neither direction is CHECKed
  // by name.
  for (GgmlType t : {GgmlType::kIQ2_XXS, GgmlType::kIQ2_XS, GgmlType::kIQ2_S, GgmlType::kIQ3_XXS,
                     GgmlType::kIQ3_S, GgmlType::kIQ1_S, GgmlType::kIQ1_M, GgmlType::kMXFP4}) {
    EXPECT_TRUE(CanDequantize(t) && CanQuantize(t)) << TypeName(t);
  }
  EXPECT_DEATH(QuantizeRow(GgmlType::kTQ1_0, f.data(), q.data(), 256),
               "no reference quantizer for tq1_0");
  for (const TypeCase& c : kQuantTypes) EXPECT_FALSE(IsDecodeOnly(c.type)) << TypeName(c.type);
}

// Q8_K has no oracle file: check its defining properties directly.
TEST(QuantQ8K, ErrorBoundAndBsums) {
  const std::vector<float> in = Gaussian(kN, 3.0f, 21);
  const RoundTrip rt = QuantizeDequantize(GgmlType::kQ8_K, in, kN);
  const auto* blocks = reinterpret_cast<const BlockQ8_K*>(rt.bytes.data());
  for (int64_t b = 0; b < kN / kQkK; ++b) {
    const BlockQ8_K& blk = blocks[b];
    float amax = 0.0f;
    for (int j = 0; j < kQkK; ++j) amax = std::max(amax, std::fabs(in[b * kQkK + j]));
    EXPECT_FLOAT_EQ(std::fabs(blk.d), amax / 127.0f);
    int hit_full_scale = 0;
    for (int j = 0; j < kQkK; ++j) {
      // Rounding to nearest: at most half a step off (plus float slack).
      EXPECT_LE(std::fabs(rt.deq[b * kQkK + j] - in[b * kQkK + j]),
                0.5f * std::fabs(blk.d) * 1.001f);
      hit_full_scale += std::abs(blk.qs[j]) == 127;
    }
    EXPECT_GE(hit_full_scale, 1);
    for (int g = 0; g < kQkK / 16; ++g) {
      int sum = 0;
      for (int l = 0; l < 16; ++l) sum += blk.qs[16 * g + l];
      EXPECT_EQ(blk.bsums[g], sum) << "block " << b << " group " << g;
    }
  }
}

// Q8_K keeps an f32 scale, so it survives magnitudes far beyond f16's range.
TEST(QuantQ8K, HugeMagnitudes) {
  std::vector<float> in = Gaussian(kN, 1.0f, 3);
  for (float& v : in) v *= 1e30f;
  const RoundTrip rt = QuantizeDequantize(GgmlType::kQ8_K, in, kN);
  ASSERT_TRUE(AllFinite(rt.deq));
  EXPECT_LE(RelRmse(in, rt.deq), 0.025);  // 256-value blocks: coarser than Q8_0
}

// f16: every finite half survives half -> float -> half; ties round to even; overflow -> inf.
TEST(Float16, RoundTripAndRounding) {
  for (uint32_t h = 0; h < 0x10000; ++h) {
    if ((h & 0x7c00) == 0x7c00 && (h & 0x3ff) != 0) continue;  // NaN payloads
    ASSERT_EQ(Fp32ToFp16(Fp16ToFp32(static_cast<uint16_t>(h))), h) << std::hex << h;
  }
  EXPECT_EQ(Fp32ToFp16(1.0f + 0x1p-11f), 0x3c00);      // tie -> even (down)
  EXPECT_EQ(Fp32ToFp16(1.0f + 3 * 0x1p-11f), 0x3c02);  // tie -> even (up)
  EXPECT_EQ(Fp32ToFp16(0x1p-25f), 0x0000);             // half the smallest subnormal
  EXPECT_EQ(Fp32ToFp16(0x1.8p-25f), 0x0001);
  EXPECT_EQ(Fp32ToFp16(65520.0f), 0x7c00);  // rounds up to inf
  EXPECT_EQ(Fp32ToFp16(65519.0f), 0x7bff);
  EXPECT_EQ(Fp32ToBf16(1.0f + 0x1p-8f), 0x3f80);  // tie -> even
  EXPECT_EQ(Fp32ToBf16(1.0f + 3 * 0x1p-8f), 0x3f82);
}

}  // namespace
}  // namespace moesplit::quant
