// The Q2_K and Q3_K (x Q8_K) kernels of every ISA tier, and their 16-row layouts:
//   - the scalar dots against dequantize(w) . dequantize(a) in float64;
//   - every tier's dot and file-layout gemm against the scalar dot (1e-5 of sum |w a|), odd
//     shapes, padded strides, NaN-poisoned outputs with guard columns;
//   - the repack (kQ2_K_R16 / kQ3_K_R16) is lossless on random bytes, and every tier's R16
//     gemm (decode and several tokens, odd group counts) matches the scalar dot of the original
//     rows, NaN-poisoned outputs;
//   - extreme blocks (every level at its ends, scales and mins at their ends, activations
//     +-127) match float64 on every tier;
//   - LoadLayout repacks them where the tier has native tiles (AVX2, AVX-512 VNNI and AMX), and no
//     tier leaves them to the reference fallback.
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
#include "cpu_kernels/gemv/gemv_internal.h"
#include "cpu_kernels/quant/blocks.h"
#include "cpu_kernels/quant/quant.h"
#include "cpu_kernels/quant/repack.h"
#include "tests/cpu_kernels/gemv_test_util.h"
#include "tests/isa_tiers.h"

namespace moesplit::gemv {
namespace {

using cpu::IsaTier;
using test_util::Allocate;
using test_util::Exact;
using test_util::ExactDot;
using test_util::kNaN;
using test_util::Matrix;
using test_util::Random;
using test_util::TierAvailable;

GgmlType ActType(GgmlType) { return GgmlType::kQ8_K; }

constexpr GgmlType kTypes[] = {GgmlType::kQ2_K, GgmlType::kQ3_K};
constexpr IsaTier kTiers[] = {IsaTier::kScalar, IsaTier::kAvx2, IsaTier::kAvx512,
                              IsaTier::kAvx512Vnni, IsaTier::kAmx};

// Widths: one block, odd block counts, and the real widths (V3: 7168 and 2048).
std::vector<int64_t> Widths(GgmlType) { return {256, 768, 2048, 2304, 7168}; }

TEST(Q23ScalarTest, MatchesDequantizedFloat64Dot) {
  for (GgmlType wt : kTypes) {
    for (int64_t n : Widths(wt)) {
      const Matrix w = Random(wt, 1, n, 0, static_cast<uint32_t>(n) + 7, 0.02f);
      const Matrix a = Random(ActType(wt), 1, n, 0, static_cast<uint32_t>(n) + 8, 3.0f);
      const Exact e = ExactDot(w, 0, a, 0);
      const float got = KernelsFor(IsaTier::kScalar).For(wt)->dot(w.Row(0), a.Row(0), n);
      EXPECT_NEAR(got, e.dot, 2e-6 * e.norm) << TypeName(wt) << " n=" << n;
    }
  }
}

using TierType = std::tuple<IsaTier, GgmlType>;
class Q23KernelTest : public ::testing::TestWithParam<TierType> {};

std::string TierTypeName(const ::testing::TestParamInfo<TierType>& info) {
  const auto [tier, t] = info.param;
  return std::string(cpu::IsaTierName(tier)) + "_" + TypeName(t);
}

TEST_P(Q23KernelTest, DotMatchesScalar) {
  const auto [tier, wt] = GetParam();
  if (!TierAvailable(tier)) GTEST_SKIP() << "this CPU lacks " << cpu::IsaTierName(tier);
  const TypeKernels* tk = KernelsFor(tier).For(wt);
  ASSERT_NE(tk, nullptr);
  EXPECT_EQ(tk->act_type, ActType(wt));
  const DotFn ref = KernelsFor(IsaTier::kScalar).For(wt)->dot;
  for (int64_t n : Widths(wt)) {
    const Matrix w = Random(wt, 3, n, 0, static_cast<uint32_t>(n), 0.02f);
    const Matrix a = Random(ActType(wt), 3, n, 0, static_cast<uint32_t>(n) + 1, 3.0f);
    for (int64_t r = 0; r < 3; ++r) {
      const float got = tk->dot(w.Row(r), a.Row(r), n);
      ASSERT_TRUE(std::isfinite(got));
      EXPECT_NEAR(got, ref(w.Row(r), a.Row(r), n), 1e-5 * ExactDot(w, r, a, r).norm)
          << "n " << n << " row " << r;
    }
  }
}

// Odd rows and tokens, padded strides, ldy > rows: every y equals the scalar dot, the gap
// between rows and ldy stays NaN.
TEST_P(Q23KernelTest, GemmMatchesScalarOddShapes) {
  const auto [tier, wt] = GetParam();
  if (!TierAvailable(tier)) GTEST_SKIP() << "this CPU lacks " << cpu::IsaTierName(tier);
  const TypeKernels& tk = *KernelsFor(tier).For(wt);
  const DotFn ref = KernelsFor(IsaTier::kScalar).For(wt)->dot;
  for (int64_t n : {Widths(wt)[0], Widths(wt)[1], Widths(wt)[2]}) {
    const Matrix w = Random(wt, 35, n, 6, static_cast<uint32_t>(n) + 2, 0.02f);
    const Matrix a = Random(ActType(wt), 17, n, 12, static_cast<uint32_t>(n) + 3, 3.0f);
    for (int64_t rows : {1, 3, 16, 17, 35}) {
      for (int64_t n_tok : {1, 2, 4, 5, 9, 17}) {
        test_util::ExpectGemmMatches(tk.gemm, ref, w, rows, a, n_tok, 1e-5, TypeName(wt));
      }
    }
  }
}

// Random block bytes (every level, hmask, scale and min pattern) with sane f16 super-scales
// (Q2_K: d and dmin at bytes 80 / 82; Q3_K: d at 108).
Matrix RandomBytes(GgmlType wt, int64_t rows, int64_t n, uint32_t seed) {
  Matrix m = Allocate(wt, rows, n, 0);
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> mag(0.5f / 256, 2.0f / 256);
  const int64_t bb = RowBytes(wt, 256);
  const std::vector<int64_t> d_at =
      wt == GgmlType::kQ2_K ? std::vector<int64_t>{80, 82} : std::vector<int64_t>{108};
  for (int64_t r = 0; r < rows; ++r) {
    uint8_t* row = m.MutableRow(r);
    for (int64_t i = 0; i < RowBytes(wt, n); ++i) row[i] = static_cast<uint8_t>(rng());
    for (int64_t b = 0; b < n / 256; ++b) {
      for (int64_t off : d_at) {
        const uint16_t d = Fp32ToFp16((rng() & 1 ? 1.0f : -1.0f) * mag(rng));
        std::memcpy(row + b * bb + off, &d, 2);
      }
    }
  }
  m.Dequantize();
  return m;
}

// `gemm` on the R16 layout of random rows of wt (decode, several tokens, and 66: two token blocks
// of the AVX2 wide path; 1-4 groups, three widths) against the scalar dot of the original rows;
// NaN-poisoned outputs with guard rows.
void CheckRepackedGemm(GgmlType wt, GemmFn gemm) {
  const GgmlType r16 = quant::RepackedType(wt, 16);
  ASSERT_NE(r16, wt);
  const DotFn ref = KernelsFor(IsaTier::kScalar).For(wt)->dot;
  for (int64_t n : {Widths(wt)[0], Widths(wt)[2], Widths(wt)[4]}) {
    for (int64_t rows : {16, 48, 64}) {
      const Matrix w = RandomBytes(wt, rows, n, static_cast<uint32_t>(n + rows));
      const int64_t row_bytes = RowBytes(r16, n);
      ASSERT_EQ(row_bytes, wt == GgmlType::kQ2_K ? RowBytes(wt, n) : n / 256 * 114);
      std::vector<uint32_t> packed(rows * row_bytes / 4 + 1, 0xFFFFFFFFu);
      quant::RepackRows(wt, w.Row(0), w.stride, rows, n, packed.data());
      const Matrix a = Random(ActType(wt), 66, n, 0, static_cast<uint32_t>(n) + 5, 3.0f);
      for (int64_t n_tok : {1, 2, 3, 4, 5, 7, 9, 66}) {
        test_util::ExpectGemmOnMatches(gemm, packed.data(), static_cast<size_t>(row_bytes), ref, w,
                                       rows, a, n_tok, 1e-5, TypeName(wt));
      }
    }
  }
}

TEST_P(Q23KernelTest, RepackedGemmMatchesScalar) {
  const auto [tier, wt] = GetParam();
  if (!TierAvailable(tier)) GTEST_SKIP() << "this CPU lacks " << cpu::IsaTierName(tier);
  const TypeKernels* tk = KernelsFor(tier).For(quant::RepackedType(wt, 16));
  ASSERT_NE(tk, nullptr);
  EXPECT_EQ(tk->dot, nullptr);
  CheckRepackedGemm(wt, tk->gemm);
}

#if defined(MOESPLIT_GEMV_X86)
// The VNNI tier's two Q3_K R16 variants, each called directly: the dispatch picks one per CPU,
// so on a CPU with GFNI the plain one (shift + AND extractions) would otherwise go untested.
TEST(Q23VariantTest, PlainAndGfniR16KernelsMatchScalar) {
  if (!TierAvailable(IsaTier::kAvx512Vnni)) GTEST_SKIP() << "this CPU lacks avx512vnni";
  CheckRepackedGemm(GgmlType::kQ3_K, internal::GemmQ3KR16_Q8K_Avx512Vnni);
  if (!cpu::DetectCpuFeatures().gfni) GTEST_SKIP() << "this CPU lacks GFNI";
  CheckRepackedGemm(GgmlType::kQ3_K, internal::GemmQ3KR16_Q8K_Avx512Gfni);
}

// Q3_K's GFNI variant where the CPU has GFNI and is not AMD Zen 4 (family 0x19); Q2_K's one
// kernel everywhere (its extractions are shifts and ANDs, no bit picks).
TEST(Q23VariantTest, VnniTierPicksGfniWhereItPays) {
  cpu::CpuFeatures f;
  f.gfni = true;
  EXPECT_TRUE(internal::Q3KUsesGfni(f));  // Intel
  f.amd = true;
  f.family = 0x19;
  EXPECT_FALSE(internal::Q3KUsesGfni(f));  // Zen 4
  f.family = 0x1A;
  EXPECT_TRUE(internal::Q3KUsesGfni(f));  // Zen 5: not measured, the picks
  f.gfni = false;
  EXPECT_FALSE(internal::Q3KUsesGfni(f));
  if (!TierAvailable(IsaTier::kAvx512Vnni)) GTEST_SKIP() << "this CPU lacks avx512vnni";
  const GemmFn want = internal::Q3KUsesGfni(cpu::DetectCpuFeatures())
                          ? internal::GemmQ3KR16_Q8K_Avx512Gfni
                          : internal::GemmQ3KR16_Q8K_Avx512Vnni;
  EXPECT_EQ(KernelsFor(IsaTier::kAvx512Vnni).For(GgmlType::kQ3_K_R16)->gemm, want);
  EXPECT_EQ(KernelsFor(IsaTier::kAvx512Vnni).For(GgmlType::kQ2_K_R16)->gemm,
            internal::GemmQ2KR16_Q8K_Avx512Vnni);
}
#endif  // MOESPLIT_GEMV_X86

INSTANTIATE_TEST_SUITE_P(Q23, Q23KernelTest,
                         ::testing::Combine(::testing::ValuesIn(kTiers),
                                            ::testing::ValuesIn(kTypes)),
                         TierTypeName);

TEST(Q23RepackTest, LosslessRoundTrip) {
  for (GgmlType wt : kTypes) {
    const int64_t n = 2304, rows = 32;
    const Matrix w = RandomBytes(wt, rows, n, 3);
    const GgmlType r16 = quant::RepackedType(wt, rows);
    EXPECT_EQ(quant::UnpackedType(r16), wt);
    EXPECT_EQ(FindTypeTraits(static_cast<uint32_t>(r16)), nullptr) << "never a file type";
    EXPECT_EQ(RowGroup(r16), 16);
    EXPECT_EQ(quant::RepackedType(wt, 24), wt) << "rows not a multiple of 16 stay";
    std::vector<uint8_t> packed(rows * RowBytes(r16, n));
    quant::RepackRows(wt, w.Row(0), w.stride, rows, n, packed.data());
    std::vector<uint8_t> back(rows * w.stride);
    for (int64_t g = 0; g < rows / 16; ++g) {
      quant::UnpackRows16(r16, packed.data() + g * 16 * RowBytes(r16, n), n,
                          back.data() + g * 16 * w.stride, w.stride);
    }
    EXPECT_EQ(std::memcmp(back.data(), w.Row(0), back.size()), 0) << TypeName(wt);
  }
}

// Every level at an end (Q2_K 0 / 3, Q3_K q3 0 / 7: values -4 / 3) or random among them,
// scales and mins at their ends (Q2_K 15 / 15; Q3_K -32 / 31 alternating), activations +-127
// with scale 1: exact small integers, so every tier matches float64 to f32 rounding of the sums.
TEST(Q23ExtremeTest, AllTiersMatchFloat64) {
  for (GgmlType wt : kTypes) {
    const int64_t n = 2048, rows = 16, n_tok = 3;
    for (int pattern = 0; pattern < 3; ++pattern) {
      Matrix w = Allocate(wt, rows, n, 0);
      std::mt19937 rng(41 + pattern);
      // a byte of four 2-bit levels: all 0, all 3, or random ends
      auto low_byte = [&]() -> uint8_t {
        if (pattern < 2) return pattern == 0 ? 0x00 : 0xFF;
        uint8_t v = 0;
        for (int k = 0; k < 4; ++k) v |= static_cast<uint8_t>((rng() & 1 ? 3 : 0) << (2 * k));
        return v;
      };
      for (int64_t r = 0; r < rows; ++r) {
        uint8_t* row = w.MutableRow(r);
        if (wt == GgmlType::kQ2_K) {
          auto* b = reinterpret_cast<quant::BlockQ2_K*>(row);
          for (int64_t i = 0; i < n / 256; ++i) {
            b[i].d = 0x3C00;
            b[i].dmin = 0x3C00;
            for (uint8_t& s : b[i].scales) s = 0xFF;  // s 15, m 15
            for (uint8_t& q : b[i].qs) q = low_byte();
          }
        } else {
          auto* b = reinterpret_cast<quant::BlockQ3_K*>(row);
          for (int64_t i = 0; i < n / 256; ++i) {
            b[i].d = 0x3C00;
            // scales 0 (-32) for even j, 63 (+31) for odd j: low nibbles 0x0 / 0xF, top bits
            for (int j = 0; j < 8; ++j) b[i].scales[j] = (j % 2) ? 0xFF : 0x00;
            for (int j = 8; j < 12; ++j) b[i].scales[j] = 0xFF;  // top bits of s_j all 3 ...
            for (int j = 0; j < 16; j += 2) {                    // ... except even j: clear them
              b[i].scales[8 + j % 4] &= static_cast<uint8_t>(~(3 << (2 * (j / 4))));
            }
            for (uint8_t& q : b[i].qs) q = low_byte();
            for (uint8_t& h : b[i].hmask)
              h = pattern == 0 ? 0x00 : pattern == 1 ? 0xFF : low_byte();
          }
        }
      }
      w.Dequantize();
      Matrix a = Allocate(ActType(wt), n_tok, n, 0);
      std::vector<float> x(n);
      for (int64_t t = 0; t < n_tok; ++t) {
        for (int64_t i = 0; i < n; ++i) x[i] = (t == 0 || (i * 7 + t) % 3 == 0) ? 1.0f : -1.0f;
        KernelsFor(IsaTier::kScalar).Quantizer(ActType(wt))(x.data(), a.MutableRow(t), n);
      }
      a.Dequantize();
      std::vector<uint8_t> packed(rows * RowBytes(quant::RepackedType(wt, rows), n));
      quant::RepackRows(wt, w.Row(0), w.stride, rows, n, packed.data());
      for (IsaTier tier : kTiers) {
        if (!TierAvailable(tier)) continue;
        const GemvKernels& k = KernelsFor(tier);
        std::vector<float> y(n_tok * rows, kNaN), yr(n_tok * rows, kNaN);
        k.For(wt)->gemm(w.Row(0), w.stride, rows, a.Row(0), a.stride, n_tok, n, y.data(), rows);
        k.For(quant::RepackedType(wt, rows))
            ->gemm(packed.data(), RowBytes(quant::RepackedType(wt, rows), n), rows, a.Row(0),
                   a.stride, n_tok, n, yr.data(), rows);
        for (int64_t t = 0; t < n_tok; ++t) {
          for (int64_t r = 0; r < rows; ++r) {
            const Exact e = ExactDot(w, r, a, t);
            const std::string where = std::string(cpu::IsaTierName(tier)) + " " + TypeName(wt) +
                                      " pattern " + std::to_string(pattern);
            EXPECT_NEAR(k.For(wt)->dot(w.Row(r), a.Row(t), n), e.dot, 1e-6 * e.norm) << where;
            EXPECT_NEAR(y[t * rows + r], e.dot, 1e-6 * e.norm) << where << " gemm";
            EXPECT_NEAR(yr[t * rows + r], e.dot, 1e-6 * e.norm) << where << " r16";
          }
        }
      }
    }
  }
}

TEST(Q23TableTest, LoadLayoutRepacksOnlyWithNativeTiles) {
  for (GgmlType wt : kTypes) {
    for (IsaTier tier : kTiers) {
      // The VNNI tiles and the AVX2 kernels (at avx2 and avx512) take both layouts.
      const bool native = tier >= IsaTier::kAvx2;
      const GgmlType want = native ? quant::RepackedType(wt, 32) : wt;
      EXPECT_EQ(LoadLayout(KernelsFor(tier), wt, 32), want)
          << cpu::IsaTierName(tier) << " " << TypeName(wt);
      EXPECT_EQ(LoadLayout(KernelsFor(tier), wt, 24), wt);
    }
    GgmlType act;
    ASSERT_TRUE(ActivationTypeFor(wt, &act));
    EXPECT_EQ(act, ActType(wt));
  }
}

// No tier leaves Q2_K / Q3_K to the reference matmul (qmatmul's fallback, named at start-up):
// each has a dot and a gemm for the file type and a gemm for its 16-row layout.
TEST(Q23TableTest, EveryTierHasKernels) {
  for (GgmlType wt : kTypes) {
    for (IsaTier tier : kTiers) {
      const GemvKernels& k = KernelsFor(tier);
      ASSERT_NE(k.For(wt), nullptr) << cpu::IsaTierName(tier) << " " << TypeName(wt);
      EXPECT_NE(k.For(wt)->dot, nullptr);
      EXPECT_EQ(k.For(wt)->act_type, GgmlType::kQ8_K);
      ASSERT_NE(k.For(quant::RepackedType(wt, 16)), nullptr);
    }
  }
}

}  // namespace
}  // namespace moesplit::gemv
