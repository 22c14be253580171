// The K-quant kernels (Q4_K / Q5_K / Q6_K weights x Q8_K activations) of every ISA tier:
//   - dot against the scalar reference (1e-5 of sum |w_i a_i|), on quantized floats and on
//     random block bytes (every bit pattern of quants, scales and mins);
//   - the scalar reference against dequantize(w) . dequantize(a) in float64;
//   - extreme quants (max quants and scales, all activations at +-127) on every tier;
//   - gemm tiles (odd rows, 1..17 tokens, padded strides, NaN-poisoned outputs, guard cells)
//     against the same tier's dot: the same bits for one token (the decode path); several
//     tokens within 1e-5 (AVX-512 Q4_K decodes with its own tile, another summation order).
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
#include "core/base/float16.h"
#include "cpu_kernels/cpu_features.h"
#include "cpu_kernels/gemv/gemv.h"
#include "cpu_kernels/quant/blocks.h"
#include "cpu_kernels/quant/quant.h"
#include "tests/cpu_kernels/kquant_test_util.h"

namespace moesplit::gemv {
namespace {

using namespace kquant_testing;  // NOLINT: the shared matrix / activation helpers

using cpu::IsaTier;

constexpr GgmlType kTypes[] = {GgmlType::kQ4_K, GgmlType::kQ5_K, GgmlType::kQ6_K};
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

bool TierAvailable(IsaTier tier) {
  return static_cast<int>(tier) <= static_cast<int>(cpu::BestTier(cpu::DetectCpuFeatures()));
}

const TypeKernels& Kernels(IsaTier tier, GgmlType type) {
  const TypeKernels* k = KernelsFor(tier).For(type);
  EXPECT_NE(k, nullptr) << TypeName(type) << " at " << cpu::IsaTierName(tier);
  return *k;
}

std::string Name(IsaTier tier, GgmlType type) {
  return std::string(cpu::IsaTierName(tier)) + " " + TypeName(type);
}

// ---- dot vs the scalar reference ---------------------------------------------------------------

using DotParam = std::tuple<IsaTier, GgmlType, int64_t>;
class KQuantDotTest : public ::testing::TestWithParam<DotParam> {};

TEST_P(KQuantDotTest, MatchesScalarReference) {
  const auto [tier, type, n] = GetParam();
  if (!TierAvailable(tier)) GTEST_SKIP() << "this CPU lacks ISA tier " << cpu::IsaTierName(tier);
  const DotFn dot = Kernels(tier, type).dot;
  const DotFn ref = Kernels(IsaTier::kScalar, type).dot;
  for (uint32_t seed = 1; seed <= 3; ++seed) {
    const Acts a = RandomActs(1, n, 0, seed * 31);
    for (const Matrix& w :
         {QuantizedWeights(type, 1, n, 0, seed), RandomByteWeights(type, 1, n, 0, seed)}) {
      const Exact e = ExactDot(type, w.Row(0), a.Row(0), n);
      const float want = ref(w.Row(0), a.Row(0), n);
      const float got = dot(w.Row(0), a.Row(0), n);
      ASSERT_TRUE(std::isfinite(got)) << Name(tier, type) << " seed " << seed;
      EXPECT_NEAR(got, want, 1e-5 * e.norm) << Name(tier, type) << " seed " << seed;
    }
  }
}

std::string DotParamName(const ::testing::TestParamInfo<DotParam>& info) {
  const auto [tier, type, n] = info.param;
  return std::string(cpu::IsaTierName(tier)) + "_" + TypeName(type) + "_" + std::to_string(n);
}

// 1 block, 3 blocks (a partial chunk), and the DeepSeek widths (2048: 8 blocks = one chunk;
// 7168: 28 = 3 chunks + 4). 1408 (the V2-Lite expert width) is not a multiple of 256.
INSTANTIATE_TEST_SUITE_P(AllTiers, KQuantDotTest,
                         ::testing::Combine(::testing::Values(IsaTier::kScalar, IsaTier::kAvx2,
                                                              IsaTier::kAvx512,
                                                              IsaTier::kAvx512Vnni),
                                            ::testing::ValuesIn(kTypes),
                                            ::testing::Values<int64_t>(256, 768, 2048, 2304, 7168)),
                         DotParamName);

// ---- the scalar reference vs float64 -----------------------------------------------------------

TEST(KQuantScalarTest, MatchesDequantizedFloat64Dot) {
  for (GgmlType type : kTypes) {
    const DotFn dot = Kernels(IsaTier::kScalar, type).dot;
    for (int64_t n : {256, 2048, 7168}) {
      const Acts a = RandomActs(1, n, 0, static_cast<uint32_t>(n));
      for (const Matrix& w :
           {QuantizedWeights(type, 1, n, 0, 5), RandomByteWeights(type, 1, n, 0, 5)}) {
        const Exact e = ExactDot(type, w.Row(0), a.Row(0), n);
        // Integer sums per block are exact; what remains is f32 rounding of one term per block
        // (and of the dequantized values themselves), ~1e-7 relative each.
        EXPECT_NEAR(dot(w.Row(0), a.Row(0), n), e.dot, 2e-6 * e.norm)
            << TypeName(type) << " n=" << n;
      }
    }
  }
}

// ---- extreme quants ----------------------------------------------------------------------------

// Every quant at its maximum (Q4_K 15, Q5_K 31, Q6_K 63: the largest maddubs pair sums), every
// scale and min at its extreme (6-bit 63; Q6_K int8 -128 / 127), d = dmin = 1.
Matrix ExtremeWeights(GgmlType type, int64_t n, int8_t q6_scale) {
  Matrix m = NewMatrix(type, 1, n, 0);
  const size_t block = RowBytes(type, 256);
  for (int64_t b = 0; b < n / 256; ++b) {
    uint8_t* blk = m.Row(0) + b * block;
    std::memset(blk, 0xFF, block);  // all quant bits, all 6-bit scales / mins = 63
    if (type == GgmlType::kQ6_K) {
      std::memset(reinterpret_cast<quant::BlockQ6_K*>(blk)->scales, static_cast<uint8_t>(q6_scale),
                  16);
    }
    for (uint16_t* f : ScaleFields(type, blk)) *f = Fp32ToFp16(1.0f);
  }
  return m;
}

TEST(KQuantExtremeTest, MaxQuantsAllTiers) {
  const int64_t n = 2048;
  std::vector<std::vector<float>> act_rows = {std::vector<float>(n, 1.0f),
                                              std::vector<float>(n, -1.0f)};
  std::vector<float> alternating(n, 1.0f);
  for (int64_t i = 0; i < n; i += 2) alternating[i] = -1.0f;
  act_rows.push_back(alternating);
  const Acts a = QuantizeActs(act_rows, 0);  // quants all +127, all -127, alternating
  for (GgmlType type : kTypes) {
    for (int8_t q6_scale : {int8_t{-128}, int8_t{127}}) {
      const Matrix w = ExtremeWeights(type, n, q6_scale);
      for (int64_t t = 0; t < a.n_tok; ++t) {
        const Exact e = ExactDot(type, w.Row(0), a.Row(t), n);
        for (int i = 0; i < cpu::kNumIsaTiers; ++i) {
          const auto tier = static_cast<IsaTier>(i);
          if (!TierAvailable(tier)) continue;
          const float got = Kernels(tier, type).dot(w.Row(0), a.Row(t), n);
          EXPECT_NEAR(got, e.dot, 1e-5 * e.norm + 1e-3)
              << Name(tier, type) << " token " << t << " q6 scale " << int{q6_scale};
        }
      }
    }
  }
}

// ---- gemm tiles vs the same tier's dot ---------------------------------------------------------

using TierType = std::tuple<IsaTier, GgmlType>;
class KQuantGemmTest : public ::testing::TestWithParam<TierType> {};

// Rows 1..13 (not multiples of the decode row tile), 16 and 35 (AVX-512 VNNI Q4_K: one and two
// 16-row groups of the row-lane tile, 3 rows left for the token tile), tokens 1..33 (two full
// 16-token tiles and every smaller tile), 1 to 28 blocks (partial chunks, a lone last block),
// padded strides for weights, activations and y; y poisoned with NaN inside the tile and a sentinel
// in the ldy padding (which must stay untouched).
TEST_P(KQuantGemmTest, EqualsDotPerRowAndToken) {
  const auto [tier, type] = GetParam();
  if (!TierAvailable(tier)) GTEST_SKIP() << "this CPU lacks ISA tier " << cpu::IsaTierName(tier);
  const TypeKernels& k = Kernels(tier, type);
  const TypeKernels& ref = Kernels(IsaTier::kScalar, type);
  constexpr float kSentinel = -12345.0f;
  for (int64_t n : {256, 2304, 7168}) {
    const Matrix w = RandomByteWeights(type, 35, n, 18, static_cast<uint32_t>(n));
    const Acts a = RandomActs(33, n, 36, 99);
    for (int64_t rows : {1, 3, 4, 5, 13, 16, 35}) {
      for (int64_t n_tok : {1, 2, 3, 7, 8, 9, 17, 33}) {
        const int64_t ldy = rows + 3;
        std::vector<float> y(n_tok * ldy, kSentinel);  // [n_tok, ldy]
        for (int64_t t = 0; t < n_tok; ++t) {
          for (int64_t r = 0; r < rows; ++r) y[t * ldy + r] = kNaN;
        }
        k.gemm(w.Row(0), w.stride, rows, a.Row(0), a.stride, n_tok, n, y.data(), ldy);
        for (int64_t t = 0; t < n_tok; ++t) {
          for (int64_t r = 0; r < rows; ++r) {
            const float want = k.dot(w.Row(r), a.Row(t), n);
            const float got = y[t * ldy + r];
            const Exact e = ExactDot(type, w.Row(r), a.Row(t), n);
            // One token: the decode path, the dot's bits. Several: the token tile, which sums
            // in another order than the AVX-512 Q4_K decode tile (1e-5 rule there).
            if (n_tok == 1) {
              ASSERT_EQ(got, want)
                  << Name(tier, type) << " n=" << n << " rows=" << rows << " r=" << r;
            } else {
              ASSERT_NEAR(got, want, 1e-5 * e.norm)
                  << Name(tier, type) << " n=" << n << " rows=" << rows << " n_tok=" << n_tok
                  << " r=" << r << " t=" << t;
            }
            ASSERT_NEAR(got, ref.dot(w.Row(r), a.Row(t), n), 1e-5 * e.norm);
          }
          for (int64_t r = rows; r < ldy; ++r) {
            ASSERT_EQ(y[t * ldy + r], kSentinel) << "gemm wrote past n_rows, t=" << t;
          }
        }
      }
    }
  }
}

// One token: rows of up to 80 blocks share the token data prepared once per call; longer rows
// (20736 = 81 blocks) prepare it per block. Both must give the dot's bits.
TEST_P(KQuantGemmTest, GemvMatchesDots) {
  const auto [tier, type] = GetParam();
  if (!TierAvailable(tier)) GTEST_SKIP() << "this CPU lacks ISA tier " << cpu::IsaTierName(tier);
  for (int64_t n : {7168, 20736}) {
    const int64_t rows = 7;
    const Matrix w = QuantizedWeights(type, rows, n, 2, 3);
    const Acts a = RandomActs(1, n, 0, 4);
    std::vector<float> y(rows + 1, kNaN);  // [rows + guard]
    Gemv(KernelsFor(tier), type, w.Row(0), w.stride, rows, n, a.Row(0), y.data());
    for (int64_t r = 0; r < rows; ++r) {
      EXPECT_EQ(y[r], Kernels(tier, type).dot(w.Row(r), a.Row(0), n))
          << Name(tier, type) << " n=" << n << " r=" << r;
    }
    EXPECT_TRUE(std::isnan(y[rows])) << "Gemv wrote past rows";
  }
}

std::string TierTypeName(const ::testing::TestParamInfo<TierType>& info) {
  const auto [tier, type] = info.param;
  return std::string(cpu::IsaTierName(tier)) + "_" + TypeName(type);
}

INSTANTIATE_TEST_SUITE_P(AllTiers, KQuantGemmTest,
                         ::testing::Combine(::testing::Values(IsaTier::kScalar, IsaTier::kAvx2,
                                                              IsaTier::kAvx512,
                                                              IsaTier::kAvx512Vnni),
                                            ::testing::ValuesIn(kTypes)),
                         TierTypeName);

TEST(KQuantKernelsTest, EveryTierHasAllThreeTypes) {
  for (int i = 0; i < cpu::kNumIsaTiers; ++i) {
    const GemvKernels& k = KernelsFor(static_cast<IsaTier>(i));
    for (GgmlType type : kTypes) {
      const TypeKernels* tk = k.For(type);
      ASSERT_NE(tk, nullptr) << Name(k.tier, type);
      EXPECT_EQ(tk->act_type, GgmlType::kQ8_K);
      EXPECT_NE(tk->gemm, nullptr);
    }
  }
}

}  // namespace
}  // namespace moesplit::gemv
