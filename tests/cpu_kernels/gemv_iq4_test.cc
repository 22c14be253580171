// The IQ4_NL (x Q8_0) and IQ4_XS (x Q8_K) kernels of every ISA tier, and their 16-row layouts:
//   - the scalar dots against dequantize(w) . dequantize(a) in float64;
//   - every tier's dot and file-layout gemm against the scalar dot (1e-5 of sum |w a|), odd
//     shapes, padded strides, NaN-poisoned outputs with guard columns;
//   - the repack (kIQ4_NL_R16 / kIQ4_XS_R16) is lossless on random bytes, and every tier's R16
//     gemm (decode and several tokens) matches the scalar dot of the original rows;
//   - extreme blocks (every index at -127 or 113, scales at -32 / 31, activations +-127) match
//     float64 on every tier;
//   - the AVX2 16-row kernels (token pairs, then one) on extreme and random blocks, 1-3 tokens,
//     an ldy gap that stays NaN;
//   - LoadLayout repacks them where the tier has native kernels (AVX2, AVX-512 VNNI and AMX);
//   - both IQ4_XS lookup variants of the VNNI tier (vpshufb; vpermb where the CPU has VBMI),
//     whichever the table picked, against the scalar dot.
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

GgmlType ActType(GgmlType w) { return w == GgmlType::kIQ4_NL ? GgmlType::kQ8_0 : GgmlType::kQ8_K; }

constexpr GgmlType kTypes[] = {GgmlType::kIQ4_NL, GgmlType::kIQ4_XS};
constexpr IsaTier kTiers[] = {IsaTier::kScalar, IsaTier::kAvx2, IsaTier::kAvx512,
                              IsaTier::kAvx512Vnni, IsaTier::kAmx};

// Widths: one block, odd block counts, and the real widths (V2-Lite expert 1408 is IQ4_NL only:
// not a multiple of 256).
std::vector<int64_t> Widths(GgmlType t) {
  if (t == GgmlType::kIQ4_NL) return {32, 96, 128, 288, 1408, 2048, 7168};
  return {256, 768, 2048, 2304, 7168};
}

TEST(Iq4ScalarTest, MatchesDequantizedFloat64Dot) {
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
class Iq4KernelTest : public ::testing::TestWithParam<TierType> {};

std::string TierTypeName(const ::testing::TestParamInfo<TierType>& info) {
  const auto [tier, t] = info.param;
  return std::string(cpu::IsaTierName(tier)) + "_" + TypeName(t);
}

TEST_P(Iq4KernelTest, DotMatchesScalar) {
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
TEST_P(Iq4KernelTest, GemmMatchesScalarOddShapes) {
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

// Random block bytes (every index and scale pattern) with sane f16 scales.
Matrix RandomBytes(GgmlType wt, int64_t rows, int64_t n, uint32_t seed) {
  Matrix m = Allocate(wt, rows, n, 0);
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> mag(0.5f / 256, 2.0f / 256);
  for (int64_t r = 0; r < rows; ++r) {
    uint8_t* row = m.MutableRow(r);
    for (int64_t i = 0; i < RowBytes(wt, n); ++i) row[i] = static_cast<uint8_t>(rng());
    const int64_t bb = RowBytes(wt, GetTypeTraits(wt).block_size);
    for (int64_t b = 0; b < n / GetTypeTraits(wt).block_size; ++b) {
      const uint16_t d = Fp32ToFp16((rng() & 1 ? 1.0f : -1.0f) * mag(rng));
      std::memcpy(row + b * bb, &d, 2);
    }
  }
  m.Dequantize();
  return m;
}

TEST_P(Iq4KernelTest, RepackedGemmMatchesScalar) {
  const auto [tier, wt] = GetParam();
  if (!TierAvailable(tier)) GTEST_SKIP() << "this CPU lacks " << cpu::IsaTierName(tier);
  const GgmlType r16 = quant::RepackedType(wt, 16);
  ASSERT_NE(r16, wt);
  const TypeKernels* tk = KernelsFor(tier).For(r16);
  ASSERT_NE(tk, nullptr);
  EXPECT_EQ(tk->dot, nullptr);
  const DotFn ref = KernelsFor(IsaTier::kScalar).For(wt)->dot;
  for (int64_t n : {Widths(wt)[0], Widths(wt)[2], Widths(wt)[4]}) {
    for (int64_t rows : {16, 48}) {
      const Matrix w = RandomBytes(wt, rows, n, static_cast<uint32_t>(n + rows));
      const int64_t row_bytes = RowBytes(r16, n);
      ASSERT_EQ(row_bytes, wt == GgmlType::kIQ4_NL ? RowBytes(wt, n) : n / 256 * 138);
      std::vector<uint32_t> packed(rows * row_bytes / 4 + 1, 0xFFFFFFFFu);
      quant::RepackRows(wt, w.Row(0), w.stride, rows, n, packed.data());
      const Matrix a = Random(ActType(wt), 9, n, 0, static_cast<uint32_t>(n) + 5, 3.0f);
      for (int64_t n_tok : {1, 2, 4, 5, 9}) {
        test_util::ExpectGemmOnMatches(tk->gemm, packed.data(), static_cast<size_t>(row_bytes), ref,
                                       w, rows, a, n_tok, 1e-5, TypeName(wt));
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Iq4, Iq4KernelTest,
                         ::testing::Combine(::testing::ValuesIn(kTiers),
                                            ::testing::ValuesIn(kTypes)),
                         TierTypeName);

TEST(Iq4RepackTest, LosslessRoundTrip) {
  for (GgmlType wt : kTypes) {
    const int64_t n = wt == GgmlType::kIQ4_NL ? 1408 : 2048, rows = 32;
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

// Every weight at a table end (-127 / 113) or random among them, IQ4_XS scales at -32 / 31,
// activations +-127 with scale 1: exact small integers, so every tier matches float64 to f32
// rounding of the sums.
TEST(Iq4ExtremeTest, AllTiersMatchFloat64) {
  for (GgmlType wt : kTypes) {
    const int64_t n = 2048, rows = 16, n_tok = 3;
    for (int pattern = 0; pattern < 3; ++pattern) {
      Matrix w = Allocate(wt, rows, n, 0);
      std::mt19937 rng(41 + pattern);
      auto idx = [&]() -> uint8_t {
        const uint8_t hi = 15, lo = 0;
        return pattern == 0 ? lo : pattern == 1 ? hi : ((rng() & 1) ? hi : lo);
      };
      for (int64_t r = 0; r < rows; ++r) {
        uint8_t* row = w.MutableRow(r);
        if (wt == GgmlType::kIQ4_NL) {
          auto* b = reinterpret_cast<quant::BlockIQ4_NL*>(row);
          for (int64_t i = 0; i < n / 32; ++i) {
            b[i].d = 0x3C00;
            for (uint8_t& q : b[i].qs) q = static_cast<uint8_t>(idx() | idx() << 4);
          }
        } else {
          auto* b = reinterpret_cast<quant::BlockIQ4_XS*>(row);
          for (int64_t i = 0; i < n / 256; ++i) {
            b[i].d = 0x3C00;
            // sub-block scales alternate 0 (-32) and 63 (+31)
            b[i].scales_h = 0xCCCC;
            for (uint8_t& s : b[i].scales_l) s = 0xF0;
            for (uint8_t& q : b[i].qs) q = static_cast<uint8_t>(idx() | idx() << 4);
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

#if defined(MOESPLIT_GEMV_X86)
// The AVX2 16-row kernels: 1, 2 and 3 tokens (a pair, then one), random bytes and the extreme
// patterns of Iq4ExtremeTest (every level at -127 or 113, IQ4_XS scales at -32 / 31), two
// groups, against the scalar dot.
TEST(Iq4Avx2R16, AnyTokenCountMatchesScalar) {
  if (!TierAvailable(IsaTier::kAvx2)) GTEST_SKIP() << "no AVX2";
  for (GgmlType wt : kTypes) {
    const GemmFn gemm = wt == GgmlType::kIQ4_NL ? internal::GemmIQ4NLR16_Q8_0_Avx2
                                                : internal::GemmIQ4XSR16_Q8K_Avx2;
    const DotFn ref = KernelsFor(IsaTier::kScalar).For(wt)->dot;
    const int64_t n = wt == GgmlType::kIQ4_NL ? 1408 : 2304, rows = 32;
    for (int pattern = 0; pattern < 3; ++pattern) {
      Matrix w = RandomBytes(wt, rows, n, 90 + pattern);
      if (pattern > 0) {  // every index 0 (-127) or 15 (113), IQ4_XS scales at -32 / 31
        const int64_t bs = GetTypeTraits(wt).block_size, bb = RowBytes(wt, bs);
        for (int64_t r = 0; r < rows; ++r) {
          for (int64_t b = 0; b < n / bs; ++b) {
            uint8_t* blk = w.MutableRow(r) + b * bb;
            const uint8_t q = pattern == 1 ? 0x00 : 0xFF;
            if (wt == GgmlType::kIQ4_NL) {
              std::memset(blk + 2, q, 16);
            } else {
              auto* x = reinterpret_cast<quant::BlockIQ4_XS*>(blk);
              x->scales_h = 0xCCCC;
              std::memset(x->scales_l, 0xF0, sizeof(x->scales_l));
              std::memset(x->qs, q, sizeof(x->qs));
            }
          }
        }
        w.Dequantize();
      }
      const Matrix a = Random(ActType(wt), 3, n, 0, 95 + pattern, pattern > 0 ? 100.0f : 3.0f);
      const GgmlType r16 = quant::RepackedType(wt, rows);
      std::vector<uint8_t> packed(rows * RowBytes(r16, n));
      quant::RepackRows(wt, w.Row(0), w.stride, rows, n, packed.data());
      for (int64_t n_tok : {1, 2, 3}) {
        std::vector<float> y(n_tok * (rows + 1), kNaN);  // ldy = rows + 1: the gap stays NaN
        gemm(packed.data(), RowBytes(r16, n), rows, a.Row(0), a.stride, n_tok, n, y.data(),
             rows + 1);
        for (int64_t t = 0; t < n_tok; ++t) {
          for (int64_t r = 0; r < rows; ++r) {
            ASSERT_NEAR(y[t * (rows + 1) + r], ref(w.Row(r), a.Row(t), n),
                        1e-5 * ExactDot(w, r, a, t).norm)
                << TypeName(wt) << " pattern " << pattern << " tokens " << n_tok;
          }
          if (t + 1 < n_tok) EXPECT_TRUE(std::isnan(y[t * (rows + 1) + rows]));
        }
      }
    }
  }
}

// The VNNI tier's table holds one of the two IQ4_XS variants (by the CPU's VBMI): run both.
TEST(Iq4XsLookupVariants, VnniAndVbmiMatchScalar) {
  const cpu::CpuFeatures f = cpu::DetectCpuFeatures();
  if (!f.avx512vnni) GTEST_SKIP() << "no AVX-512 VNNI";
  struct Variant {
    const char* name;
    DotFn dot;
    GemmFn gemm;
    bool runs;
  };
  const Variant variants[] = {
      {"vnni", internal::DotIQ4XS_Q8K_Avx512Vnni, internal::GemmIQ4XSR16_Q8K_Avx512Vnni, true},
      {"vbmi", internal::DotIQ4XS_Q8K_Avx512Vbmi, internal::GemmIQ4XSR16_Q8K_Avx512Vbmi,
       f.avx512vbmi}};
  const DotFn ref = KernelsFor(IsaTier::kScalar).For(GgmlType::kIQ4_XS)->dot;
  const int64_t n = 2304, rows = 32;
  const Matrix w = RandomBytes(GgmlType::kIQ4_XS, rows, n, 77);
  const Matrix a = Random(GgmlType::kQ8_K, 5, n, 0, 78, 3.0f);
  std::vector<uint8_t> packed(rows * RowBytes(GgmlType::kIQ4_XS_R16, n));
  quant::RepackRows(GgmlType::kIQ4_XS, w.Row(0), w.stride, rows, n, packed.data());
  for (const Variant& v : variants) {
    if (!v.runs) continue;
    for (int64_t n_tok : {1, 5}) {
      std::vector<float> y(n_tok * rows, kNaN);
      v.gemm(packed.data(), RowBytes(GgmlType::kIQ4_XS_R16, n), rows, a.Row(0), a.stride, n_tok, n,
             y.data(), rows);
      for (int64_t t = 0; t < n_tok; ++t) {
        for (int64_t r = 0; r < rows; ++r) {
          const double tol = 1e-5 * ExactDot(w, r, a, t).norm;
          ASSERT_NEAR(y[t * rows + r], ref(w.Row(r), a.Row(t), n), tol) << v.name;
          ASSERT_NEAR(v.dot(w.Row(r), a.Row(t), n), ref(w.Row(r), a.Row(t), n), tol) << v.name;
        }
      }
    }
  }
}

#endif  // MOESPLIT_GEMV_X86

TEST(Iq4TableTest, LoadLayoutRepacksOnlyWithNativeTiles) {
  for (GgmlType wt : kTypes) {
    for (IsaTier tier : kTiers) {
      // Every SIMD tier: the VNNI tiles, and the AVX2 kernels at avx2 and avx512.
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

}  // namespace
}  // namespace moesplit::gemv
