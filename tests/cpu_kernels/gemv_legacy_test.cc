// The legacy-block kernels (Q8_0 / Q4_0 / Q4_1 / Q5_0 / Q5_1 weights x Q8_0 activations) of every
// ISA tier: dots and gemm tiles against the scalar dot, the scalar dot against dequantize(w) .
// dequantize(a) in float64, and hand-built extreme blocks (max nibbles, all 5th bits, -128
// weights, +-127 activations) against float64 on every tier.
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
#include "cpu_kernels/gemv/gemv.h"
#include "cpu_kernels/quant/blocks.h"
#include "cpu_kernels/quant/quant.h"

namespace moesplit::gemv {
namespace {

using cpu::IsaTier;

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr uint16_t kHalfOne = 0x3C00;  // f16 1.0

bool TierAvailable(IsaTier tier) {
  return static_cast<int>(tier) <= static_cast<int>(cpu::BestTier(cpu::DetectCpuFeatures()));
}

std::string TierName(IsaTier tier) { return std::string(cpu::IsaTierName(tier)); }

// A [rows, n] matrix of blocks with rows `stride` bytes apart, plus its dequantized values.
struct Matrix {
  GgmlType type = GgmlType::kQ8_0;
  int64_t rows = 0;
  int64_t n = 0;
  size_t stride = 0;            // bytes between rows (>= RowBytes(type, n), even)
  std::vector<uint32_t> bytes;  // [rows * stride / 4 + 1] blocks (u32 storage: 4-byte aligned)
  std::vector<float> values;    // [rows, n] dequantized

  const uint8_t* Row(int64_t r) const {
    return reinterpret_cast<const uint8_t*>(bytes.data()) + r * stride;
  }
  uint8_t* MutableRow(int64_t r) { return reinterpret_cast<uint8_t*>(bytes.data()) + r * stride; }
  void Dequantize() {
    values.resize(rows * n);
    for (int64_t r = 0; r < rows; ++r) {
      quant::DequantizeRow(type, Row(r), values.data() + r * n, n);
    }
  }
};

Matrix Allocate(GgmlType type, int64_t rows, int64_t n, size_t pad) {
  Matrix m;
  m.type = type;
  m.rows = rows;
  m.n = n;
  m.stride = RowBytes(type, n) + pad;
  // 0xFF poison: NaN scales in the padding, so reading past a row shows up.
  m.bytes.assign(rows * m.stride / 4 + 1, 0xFFFFFFFFu);
  return m;
}

// Rows of normal(0, scale) values quantized to `type`; activations (kQ8_0) go through the
// table's quantizer, as the engine does.
Matrix RandomMatrix(GgmlType type, int64_t rows, int64_t n, size_t pad, uint32_t seed,
                    float scale) {
  Matrix m = Allocate(type, rows, n, pad);
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, scale);
  std::vector<float> x(n);  // [n]
  for (int64_t r = 0; r < rows; ++r) {
    for (float& v : x) v = dist(rng);
    if (type == GgmlType::kQ8_0) {
      KernelsFor(IsaTier::kScalar).Quantizer(GgmlType::kQ8_0)(x.data(), m.MutableRow(r), n);
    } else {
      quant::QuantizeRow(type, x.data(), m.MutableRow(r), n);
    }
  }
  m.Dequantize();
  return m;
}

// Blocks at the edges of each format, all scales 1.0: Q4_0 nibbles 0 / 15 (values -8 / 7),
// Q5_0 also with every 5th bit set or clear (values -16 / 15; Q5_1 the same with m = -16; Q4_1
// nibbles 0 / 15 with m = -8), Q8_0 quants -128 / 127 / -127;
// activations (is_act) +-127. `pattern` 0: every byte at its maximum, 1: at its minimum,
// 2: random among the extremes.
Matrix ExtremeMatrix(GgmlType type, int64_t rows, int64_t n, int pattern, bool is_act,
                     uint32_t seed) {
  Matrix m = Allocate(type, rows, n, 0);
  std::mt19937 rng(seed);
  auto pick = [&](uint8_t hi, uint8_t lo) -> uint8_t {
    if (pattern == 0) return hi;
    if (pattern == 1) return lo;
    return (rng() & 1) ? hi : lo;
  };
  const int64_t nb = n / quant::kQk;
  for (int64_t r = 0; r < rows; ++r) {
    uint8_t* row = m.MutableRow(r);
    for (int64_t b = 0; b < nb; ++b) {
      if (type == GgmlType::kQ8_0) {
        auto* blk = reinterpret_cast<quant::BlockQ8_0*>(row) + b;
        blk->d = kHalfOne;
        for (int8_t& q : blk->qs) {
          q = is_act ? static_cast<int8_t>(pick(127, 0x81))                        // +-127
                     : static_cast<int8_t>(pick(127, (rng() & 1) ? 0x80 : 0x81));  // -128/-127
        }
      } else if (type == GgmlType::kQ4_0) {
        auto* blk = reinterpret_cast<quant::BlockQ4_0*>(row) + b;
        blk->d = kHalfOne;
        for (uint8_t& q : blk->qs) q = static_cast<uint8_t>(pick(0xF, 0x0) | pick(0xF, 0x0) << 4);
      } else if (type == GgmlType::kQ4_1) {
        // u at 0 / 15 with the offset m = -8 (0xC800): the values d u + m span -8 .. 7.
        auto* blk = reinterpret_cast<quant::BlockQ4_1*>(row) + b;
        blk->d = kHalfOne;
        blk->m = 0xC800;
        for (uint8_t& q : blk->qs) q = static_cast<uint8_t>(pick(0xF, 0x0) | pick(0xF, 0x0) << 4);
      } else if (type == GgmlType::kQ5_1) {
        // u at 0 / 31 with the offset m = -16 (0xCC00): the values d u + m span -16 .. 15.
        auto* blk = reinterpret_cast<quant::BlockQ5_1*>(row) + b;
        blk->d = kHalfOne;
        blk->m = 0xCC00;
        for (uint8_t& q : blk->qs) q = static_cast<uint8_t>(pick(0xF, 0x0) | pick(0xF, 0x0) << 4);
        for (uint8_t& h : blk->qh) h = pattern == 2 ? static_cast<uint8_t>(rng()) : pick(0xFF, 0);
      } else {
        auto* blk = reinterpret_cast<quant::BlockQ5_0*>(row) + b;
        blk->d = kHalfOne;
        for (uint8_t& q : blk->qs) q = static_cast<uint8_t>(pick(0xF, 0x0) | pick(0xF, 0x0) << 4);
        for (uint8_t& h : blk->qh) h = pattern == 2 ? static_cast<uint8_t>(rng()) : pick(0xFF, 0);
      }
    }
  }
  m.Dequantize();
  return m;
}

// sum_i w_i a_i in float64 and sum_i |w_i a_i|, the scale tolerances are measured against.
struct Exact {
  double dot = 0;
  double norm = 0;
};

Exact ExactDot(const Matrix& w, int64_t r, const Matrix& a, int64_t t) {
  Exact e;
  for (int64_t i = 0; i < w.n; ++i) {
    const double p = static_cast<double>(w.values[r * w.n + i]) * a.values[t * a.n + i];
    e.dot += p;
    e.norm += std::fabs(p);
  }
  return e;
}

// y: [n_tok, ldy] from the tier's gemm on (w, a), poisoned with NaN first.
std::vector<float> RunGemm(const TypeKernels& tk, const Matrix& w, const Matrix& a, int64_t ldy) {
  std::vector<float> y(a.rows * ldy, kNaN);
  tk.gemm(w.bytes.data(), w.stride, w.rows, a.bytes.data(), a.stride, a.rows, w.n, y.data(), ldy);
  return y;
}

constexpr GgmlType kTypes[] = {GgmlType::kQ8_0, GgmlType::kQ4_0, GgmlType::kQ5_0, GgmlType::kQ5_1,
                               GgmlType::kQ4_1};
constexpr IsaTier kTiers[] = {IsaTier::kScalar, IsaTier::kAvx2, IsaTier::kAvx512,
                              IsaTier::kAvx512Vnni};

// ---- dots -----------------------------------------------------------------------------------

using DotParam = std::tuple<IsaTier, GgmlType, int64_t>;

class LegacyDotTest : public ::testing::TestWithParam<DotParam> {};

TEST_P(LegacyDotTest, MatchesScalarDot) {
  const auto [tier, wtype, n] = GetParam();
  if (!TierAvailable(tier)) GTEST_SKIP() << "this CPU lacks ISA tier " << TierName(tier);
  const TypeKernels* tk = KernelsFor(tier).For(wtype);
  ASSERT_NE(tk, nullptr);
  const DotFn ref = KernelsFor(IsaTier::kScalar).For(wtype)->dot;
  const Matrix w = RandomMatrix(wtype, 4, n, 0, static_cast<uint32_t>(n), 0.02f);
  const Matrix a = RandomMatrix(GgmlType::kQ8_0, 4, n, 0, static_cast<uint32_t>(n) + 1, 3.0f);
  for (int64_t r = 0; r < 4; ++r) {
    const float want = ref(w.Row(r), a.Row(r), n);
    const float got = tk->dot(w.Row(r), a.Row(r), n);
    ASSERT_TRUE(std::isfinite(got)) << "row " << r;
    // 1e-5 relative to sum |w_i a_i| (>= |want|; the result itself may cancel to ~0).
    EXPECT_NEAR(got, want, 1e-5 * ExactDot(w, r, a, r).norm) << "row " << r;
  }
}

std::string DotParamName(const ::testing::TestParamInfo<DotParam>& info) {
  const auto [tier, wtype, n] = info.param;
  return TierName(tier) + "_" + TypeName(wtype) + "_" + std::to_string(n);
}

// 1 block, odd block counts (3, 9, 44: the AVX-512 dot's odd last block) and the real widths
// 1408 (DeepSeek-V2-Lite expert), 2048 (V3 expert), 7168 (V3 hidden).
INSTANTIATE_TEST_SUITE_P(
    Legacy, LegacyDotTest,
    ::testing::Combine(::testing::ValuesIn(kTiers), ::testing::ValuesIn(kTypes),
                       ::testing::Values<int64_t>(32, 96, 288, 1408, 2048, 7168)),
    DotParamName);

TEST(LegacyScalarTest, MatchesDequantizedFloat64Dot) {
  for (GgmlType wtype : kTypes) {
    for (int64_t n : {32, 1408, 2048, 7168}) {
      const Matrix w = RandomMatrix(wtype, 1, n, 0, static_cast<uint32_t>(n) + 7, 0.02f);
      const Matrix a = RandomMatrix(GgmlType::kQ8_0, 1, n, 0, static_cast<uint32_t>(n) + 8, 3.0f);
      const Exact e = ExactDot(w, 0, a, 0);
      const float got = KernelsFor(IsaTier::kScalar).For(wtype)->dot(w.Row(0), a.Row(0), n);
      // Integer sums per block are exact; what remains is f32 rounding of the d_w * d_a * isum
      // terms and of their sum, ~1e-7 each over n / 32 terms.
      EXPECT_NEAR(got, e.dot, 2e-6 * e.norm) << TypeName(wtype) << " n=" << n;
    }
  }
}

// ---- gemm tiles -----------------------------------------------------------------------------

using GemmParam = std::tuple<IsaTier, GgmlType>;

class LegacyGemmTest : public ::testing::TestWithParam<GemmParam> {};

std::string GemmParamName(const ::testing::TestParamInfo<GemmParam>& info) {
  const auto [tier, wtype] = info.param;
  return TierName(tier) + "_" + TypeName(wtype);
}

// Odd shapes: rows not a multiple of the tiles (4 / 8 / 16-row groups of the AVX-512 VNNI row-lane
// tile: 17 and 35 leave rows to the other tiles), n_tok not a multiple of the token chunk (65
// tokens of 4160 values: two token passes and three weight chunks of the row-lane tile), padded
// row strides, ldy > rows. Every y entry equals the scalar dot; the gap between rows
// and ldy stays NaN.
TEST_P(LegacyGemmTest, MatchesScalarDotOddShapes) {
  const auto [tier, wtype] = GetParam();
  if (!TierAvailable(tier)) GTEST_SKIP() << "this CPU lacks ISA tier " << TierName(tier);
  const TypeKernels& tk = *KernelsFor(tier).For(wtype);
  const DotFn ref = KernelsFor(IsaTier::kScalar).For(wtype)->dot;
  for (int64_t n : {32, 96, 1408, 4160}) {
    const Matrix w = RandomMatrix(wtype, 35, n, 6, static_cast<uint32_t>(n), 0.02f);
    const Matrix a_all =
        RandomMatrix(GgmlType::kQ8_0, 65, n, 10, static_cast<uint32_t>(n) + 3, 3.0f);
    for (int64_t rows : {1, 3, 4, 5, 8, 9, 13, 17, 35}) {
      for (int64_t n_tok : {1, 2, 3, 7, 8, 9, 17, 65}) {
        Matrix w_part = w;
        w_part.rows = rows;
        Matrix a = a_all;
        a.rows = n_tok;
        const int64_t ldy = rows + 3;
        const std::vector<float> y = RunGemm(tk, w_part, a, ldy);
        for (int64_t t = 0; t < n_tok; ++t) {
          for (int64_t r = 0; r < ldy; ++r) {
            const float got = y[t * ldy + r];
            if (r >= rows) {
              ASSERT_TRUE(std::isnan(got)) << "wrote past rows: r " << r << " t " << t;
              continue;
            }
            const float want = ref(w.Row(r), a.Row(t), n);
            ASSERT_NEAR(got, want, 1e-5 * ExactDot(w, r, a, t).norm)
                << "n " << n << " rows " << rows << " n_tok " << n_tok << " r " << r << " t " << t;
          }
        }
      }
    }
  }
}

// Rows wider than the AVX-512 VNNI row-lane tile's per-pass token data (8192 blocks) go to the
// other tiles: 16 rows (one row-lane group) x 4 tokens of 8200 blocks, every value checked.
TEST_P(LegacyGemmTest, VeryLongRows) {
  const auto [tier, wtype] = GetParam();
  if (!TierAvailable(tier)) GTEST_SKIP() << "this CPU lacks ISA tier " << TierName(tier);
  const TypeKernels& tk = *KernelsFor(tier).For(wtype);
  const DotFn ref = KernelsFor(IsaTier::kScalar).For(wtype)->dot;
  const int64_t n = 32 * 8200;
  const Matrix w = RandomMatrix(wtype, 16, n, 0, 71, 0.02f);
  const Matrix a = RandomMatrix(GgmlType::kQ8_0, 4, n, 0, 72, 3.0f);
  const std::vector<float> y = RunGemm(tk, w, a, 16);
  for (int64_t t = 0; t < 4; ++t) {
    for (int64_t r = 0; r < 16; ++r) {
      ASSERT_NEAR(y[t * 16 + r], ref(w.Row(r), a.Row(t), n), 1e-5 * ExactDot(w, r, a, t).norm)
          << "r " << r << " t " << t;
    }
  }
}

// The decode path at the real widths through the public Gemv entry (n_tok = 1, row blocks of
// 16 .. 256 rows as the engine passes them, unpadded).
TEST_P(LegacyGemmTest, GemvRealWidths) {
  const auto [tier, wtype] = GetParam();
  if (!TierAvailable(tier)) GTEST_SKIP() << "this CPU lacks ISA tier " << TierName(tier);
  const GemvKernels& k = KernelsFor(tier);
  const DotFn ref = KernelsFor(IsaTier::kScalar).For(wtype)->dot;
  for (int64_t n : {1408, 2048, 7168}) {
    const int64_t rows = n == 7168 ? 19 : 70;
    const Matrix w = RandomMatrix(wtype, rows, n, 0, static_cast<uint32_t>(n) + 11, 0.02f);
    const Matrix a = RandomMatrix(GgmlType::kQ8_0, 1, n, 0, static_cast<uint32_t>(n) + 12, 3.0f);
    std::vector<float> y(rows + 1, kNaN);  // [rows + guard]
    Gemv(k, wtype, w.bytes.data(), w.stride, rows, n, a.bytes.data(), y.data());
    for (int64_t r = 0; r < rows; ++r) {
      ASSERT_NEAR(y[r], ref(w.Row(r), a.Row(0), n), 1e-5 * ExactDot(w, r, a, 0).norm)
          << "n " << n << " row " << r;
    }
    EXPECT_TRUE(std::isnan(y[rows])) << "Gemv wrote past rows";
  }
}

INSTANTIATE_TEST_SUITE_P(Legacy, LegacyGemmTest,
                         ::testing::Combine(::testing::ValuesIn(kTiers),
                                            ::testing::ValuesIn(kTypes)),
                         GemmParamName);

// ---- extreme quants, every tier ---------------------------------------------------------------

// Max nibbles / 5th bits / -128 weights against +-127 activations: the worst case for i16 pair
// sums and for the offset / sign tricks. With scales 1.0 every product is an exact small
// integer, so dot and gemm must match float64 to rounding of the f32 sums.
TEST(LegacyExtremeTest, AllTiersDotAndGemmMatchFloat64) {
  const int64_t n = 2048, rows = 5, n_tok = 3;
  for (GgmlType wtype : kTypes) {
    for (int pattern = 0; pattern < 3; ++pattern) {
      for (int act_pattern = 0; act_pattern < 3; ++act_pattern) {
        const Matrix w = ExtremeMatrix(wtype, rows, n, pattern, false, 17 + pattern);
        const Matrix a = ExtremeMatrix(GgmlType::kQ8_0, n_tok, n, act_pattern, true, 29);
        for (IsaTier tier : kTiers) {
          if (!TierAvailable(tier)) continue;
          const TypeKernels& tk = *KernelsFor(tier).For(wtype);
          const std::vector<float> y = RunGemm(tk, w, a, rows);
          for (int64_t t = 0; t < n_tok; ++t) {
            for (int64_t r = 0; r < rows; ++r) {
              const Exact e = ExactDot(w, r, a, t);
              const std::string where = TierName(tier) + " " + TypeName(wtype) + " pattern " +
                                        std::to_string(pattern) + "/" + std::to_string(act_pattern);
              EXPECT_NEAR(tk.dot(w.Row(r), a.Row(t), n), e.dot, 1e-6 * e.norm) << where;
              EXPECT_NEAR(y[t * rows + r], e.dot, 1e-6 * e.norm) << where << " gemm";
            }
          }
        }
      }
    }
  }
}

// ---- the table ----------------------------------------------------------------------------------

TEST(LegacyTableTest, ActivationTypeIsQ8_0) {
  for (GgmlType wtype : kTypes) {
    GgmlType act;
    ASSERT_TRUE(ActivationTypeFor(wtype, &act)) << TypeName(wtype);
    EXPECT_EQ(act, GgmlType::kQ8_0) << TypeName(wtype);
  }
}

TEST(LegacyTableTest, EveryTierHasDotAndGemm) {
  for (IsaTier tier : kTiers) {
    for (GgmlType wtype : kTypes) {
      const TypeKernels* tk = KernelsFor(tier).For(wtype);
      ASSERT_NE(tk, nullptr) << TierName(tier) << " " << TypeName(wtype);
      EXPECT_EQ(tk->act_type, GgmlType::kQ8_0);
      EXPECT_NE(tk->dot, nullptr);
      EXPECT_NE(tk->gemm, nullptr);
    }
  }
}

}  // namespace
}  // namespace moesplit::gemv
