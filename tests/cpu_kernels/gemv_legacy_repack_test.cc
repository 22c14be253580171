// Load-time repacking of the legacy blocks (Q8_0 / Q5_0 / Q4_0 / Q5_1 / Q4_1 -> kQ8_0_R16 /
// kQ5_0_R16 / kQ4_0_R16 / kQ5_1_R16 / kQ4_1_R16, cpu_kernels/quant/repack.h) and their kernels on
// every ISA tier:
//   - the repack is lossless (random block bytes, every qs / qh pattern, round-trip exactly),
//     never a file type, and the same bytes per row as the file type;
//   - every tier's R16 gemm against the scalar dot of the original rows (1e-5 of sum |w a|), for
//     16 / 48 rows, 1..33 tokens, 1..224 blocks, NaN-poisoned outputs and guard cells;
//   - AVX-512 VNNI with >= 4 tokens gives the legacy row-lane GEMM's bits (same buffer values);
//   - extreme blocks (max / min quants, every 5th bit, activations +-127) match float64;
//   - rows longer than one token pass (> 8192 blocks) take the chunked one-token path;
//   - LoadLayout repacks only where the tier has native tiles.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "core/base/dtype.h"
#include "core/base/float16.h"
#include "cpu_kernels/cpu_features.h"
#include "cpu_kernels/gemv/gemv.h"
#include "cpu_kernels/quant/quant.h"
#include "cpu_kernels/quant/repack.h"
#include "tests/cpu_kernels/kquant_test_util.h"
#include "tests/isa_tiers.h"

namespace moesplit::gemv {
namespace {

using cpu::IsaTier;
using kquant_testing::Exact;
using kquant_testing::ExactDot;

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr float kSentinel = -12345.0f;
constexpr GgmlType kFileTypes[] = {GgmlType::kQ8_0, GgmlType::kQ5_0, GgmlType::kQ4_0,
                                   GgmlType::kQ5_1, GgmlType::kQ4_1};

// The blocks with a min m beside d (both f16, at bytes 0 and 2).
bool HasMin(GgmlType t) { return t == GgmlType::kQ5_1 || t == GgmlType::kQ4_1; }

bool TierAvailable(IsaTier tier) {
  return static_cast<int>(tier) <= static_cast<int>(cpu::BestTier(cpu::DetectCpuFeatures()));
}

// [rows] rows of n values of `type`, row_bytes apart (no padding: the repack input).
struct Rows {
  GgmlType type = GgmlType::kQ8_0;
  int64_t rows = 0, n = 0, row_bytes = 0;
  std::vector<uint8_t> bytes;  // [rows * row_bytes]
  const uint8_t* Row(int64_t r) const { return bytes.data() + r * row_bytes; }
};

Rows NewRows(GgmlType type, int64_t rows, int64_t n) {
  Rows m{type, rows, n, RowBytes(type, n), {}};
  m.bytes.assign(static_cast<size_t>(rows * m.row_bytes), 0);
  return m;
}

// Random bytes everywhere (all quant and qh patterns), then a finite f16 d of either sign (and
// Q4_1's / Q5_1's m: 16 times that size, as a quantizer's min of 16 steps).
Rows RandomBytes(GgmlType type, int64_t rows, int64_t n, uint32_t seed) {
  Rows m = NewRows(type, rows, n);
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> mag(0.5f / 64, 2.0f / 64);
  for (uint8_t& b : m.bytes) b = static_cast<uint8_t>(rng());
  const int64_t bb = RowBytes(type, 32);
  const int scales = HasMin(type) ? 2 : 1;
  for (int64_t i = 0; i < rows * (n / 32); ++i) {
    for (int k = 0; k < scales; ++k) {
      const uint16_t d = Fp32ToFp16((rng() & 1 ? 1.0f : -1.0f) * mag(rng) * (k == 0 ? 1 : 16));
      std::memcpy(m.bytes.data() + i * bb + 2 * k, &d, 2);
    }
  }
  return m;
}

Rows Quantized(GgmlType type, int64_t rows, int64_t n, uint32_t seed) {
  Rows m = NewRows(type, rows, n);
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, 0.02f);
  std::vector<float> x(n);  // [n]
  for (int64_t r = 0; r < rows; ++r) {
    for (float& v : x) v = dist(rng);
    quant::QuantizeRow(type, x.data(), m.bytes.data() + r * m.row_bytes, n);
  }
  return m;
}

// Q8_0 activation rows through the table's quantizer (as the engine does).
Rows Acts(int64_t n_tok, int64_t n, uint32_t seed, float fill = 0.0f) {
  Rows a = NewRows(GgmlType::kQ8_0, n_tok, n);
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> x(n);  // [n]
  for (int64_t t = 0; t < n_tok; ++t) {
    for (float& v : x) v = fill != 0.0f ? fill : dist(rng);
    KernelsFor(IsaTier::kScalar)
        .Quantizer(GgmlType::kQ8_0)(x.data(), a.bytes.data() + t * a.row_bytes, n);
  }
  return a;
}

// The repacked matrix, with 64 guard bytes of 0xEE after it.
std::vector<uint8_t> Repack(const Rows& w) {
  const GgmlType to = quant::RepackedType(w.type, w.rows);
  std::vector<uint8_t> out(static_cast<size_t>(w.rows * RowBytes(to, w.n)) + 64, 0xEE);
  quant::RepackRows(w.type, w.bytes.data(), static_cast<size_t>(w.row_bytes), w.rows, w.n,
                    out.data());
  return out;
}

// Runs tier's gemm of the repacked type, decode reading as `read` says; y poisoned (NaN in the
// tile, a sentinel in the ldy padding). Returns y [n_tok x ldy].
std::vector<float> RunR16(IsaTier tier, GgmlType r16, const std::vector<uint8_t>& packed,
                          int64_t rows, int64_t n, const Rows& a, int64_t n_tok, int64_t ldy,
                          DecodeRead read = DecodeRead::kPrefetched) {
  std::vector<float> y(n_tok * ldy, kSentinel);
  for (int64_t t = 0; t < n_tok; ++t) {
    for (int64_t r = 0; r < rows; ++r) y[t * ldy + r] = kNaN;
  }
  KernelsFor(tier, read)
      .For(r16)
      ->gemm(packed.data(), static_cast<size_t>(RowBytes(r16, n)), rows, a.bytes.data(),
             static_cast<size_t>(a.row_bytes), n_tok, n, y.data(), ldy);
  return y;
}

TEST(RepackLegacy, RoundTripIsLossless) {
  for (GgmlType type : kFileTypes) {
    for (int64_t n : {32, 1408, 2048}) {
      const Rows w = RandomBytes(type, 32, n, static_cast<uint32_t>(n) + 3);
      const GgmlType r16 = quant::RepackedType(type, 32);
      const std::vector<uint8_t> packed = Repack(w);
      Rows back = NewRows(type, 32, n);
      const int64_t group = 16 * RowBytes(r16, n);
      for (int g = 0; g < 2; ++g) {
        quant::UnpackRows16(r16, packed.data() + g * group, n,
                            back.bytes.data() + 16 * g * back.row_bytes,
                            static_cast<size_t>(back.row_bytes));
      }
      EXPECT_EQ(back.bytes, w.bytes) << TypeName(type) << " n=" << n;
      EXPECT_EQ(packed[static_cast<size_t>(2 * group)], 0xEE) << "repack wrote past the end";
    }
  }
}

TEST(RepackLegacy, InternalTypesAreNeverFileTypes) {
  for (GgmlType type : kFileTypes) {
    const GgmlType r16 = quant::RepackedType(type, 16);
    ASSERT_NE(r16, type) << TypeName(type);
    EXPECT_EQ(FindTypeTraits(static_cast<uint32_t>(r16)), nullptr);
    EXPECT_FALSE(TypeFromName(TypeName(r16)).ok()) << TypeName(r16);
    EXPECT_EQ(RowBytes(r16, 2048), RowBytes(type, 2048)) << "same bytes per row";
    EXPECT_EQ(RowGroup(r16), 16);
    EXPECT_EQ(quant::UnpackedType(r16), type);
    EXPECT_EQ(quant::UnpackedType(type), type);
    EXPECT_EQ(quant::RepackedType(type, 24), type) << "not whole groups";
  }
}

TEST(RepackLegacy, LoadLayoutOnlyWhereTheTierHasNativeTiles) {
  for (int i = 0; i < cpu::kNumIsaTiers; ++i) {
    const auto tier = static_cast<IsaTier>(i);
    const GemvKernels& k = KernelsFor(tier);
    for (GgmlType type : kFileTypes) {
      const GgmlType r16 = quant::RepackedType(type, 16);
      ASSERT_NE(k.For(r16), nullptr) << cpu::IsaTierName(tier) << " " << TypeName(r16);
      EXPECT_EQ(k.For(r16)->dot, nullptr);
      EXPECT_EQ(k.For(r16)->act_type, GgmlType::kQ8_0);
      // The VNNI tiles take every legacy layout; the AVX2 kernels (at avx2 and avx512) every
      // one but kQ8_0_R16.
      const bool native =
          tier >= IsaTier::kAvx512Vnni || (tier >= IsaTier::kAvx2 && type != GgmlType::kQ8_0);
      EXPECT_EQ(LoadLayout(k, type, 2048), native ? r16 : type) << cpu::IsaTierName(tier);
      EXPECT_EQ(LoadLayout(k, type, 2040), type);
    }
  }
}

class LegacyR16GemmTest : public ::testing::TestWithParam<IsaTier> {};

TEST_P(LegacyR16GemmTest, MatchesScalarDot) {
  const IsaTier tier = GetParam();
  if (!TierAvailable(tier)) GTEST_SKIP() << "this CPU lacks ISA tier " << cpu::IsaTierName(tier);
  for (GgmlType type : kFileTypes) {
    const DotFn ref = KernelsFor(IsaTier::kScalar).For(type)->dot;
    const GgmlType r16 = quant::RepackedType(type, 48);
    for (int64_t n : {32, 1408, 7168}) {
      for (bool random_bytes : {false, true}) {
        const Rows w = random_bytes ? RandomBytes(type, 48, n, 5) : Quantized(type, 48, n, 6);
        const std::vector<uint8_t> packed = Repack(w);
        const Rows a = Acts(33, n, 99);
        // One token in both read modes: decode reads two groups side by side or one at a time
        // (rows 16: one group; 48: 2 + 1 or 1 + 1 + 1).
        for (int64_t rows : {16, 48}) {
          for (auto [n_tok, read] :
               kquant_testing::DecodeBothModesThen({2, 3, 4, 5, 8, 9, 17, 33})) {
            const int64_t ldy = rows + 3;
            const std::vector<float> y = RunR16(tier, r16, packed, rows, n, a, n_tok, ldy, read);
            for (int64_t t = 0; t < n_tok; ++t) {
              for (int64_t r = 0; r < rows; ++r) {
                const Exact e = ExactDot(type, w.Row(r), a.Row(t), n, GgmlType::kQ8_0);
                ASSERT_NEAR(y[t * ldy + r], ref(w.Row(r), a.Row(t), n), 1e-5 * e.norm + 1e-30)
                    << cpu::IsaTierName(tier) << " " << TypeName(r16) << " " << DecodeReadName(read)
                    << " n=" << n << " rows=" << rows << " n_tok=" << n_tok << " r=" << r
                    << " t=" << t << (random_bytes ? " random bytes" : " quantized");
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
}

// Every quant at its maximum / minimum (Q8_0 -128 included, every Q5_0 / Q5_1 5th bit set or
// clear), scales (and Q4_1's / Q5_1's m) 1.0, activations all +127 or all -127: the largest integer
// sums; with these scales every product is an exact integer, so the results match float64 to f32
// rounding.
TEST_P(LegacyR16GemmTest, ExtremeBlocksMatchFloat64) {
  const IsaTier tier = GetParam();
  if (!TierAvailable(tier)) GTEST_SKIP() << "this CPU lacks ISA tier " << cpu::IsaTierName(tier);
  const int64_t n = 2048, rows = 16;
  for (GgmlType type : kFileTypes) {
    for (uint8_t fill : {uint8_t{0xFF}, uint8_t{0x00}, uint8_t{0x80}}) {
      Rows w = NewRows(type, rows, n);
      std::memset(w.bytes.data(), fill, w.bytes.size());
      const int64_t bb = RowBytes(type, 32);
      for (int64_t i = 0; i < rows * (n / 32); ++i) {
        const uint16_t one[2] = {0x3C00, 0x3C00};  // f16 1.0: d (and the m)
        std::memcpy(w.bytes.data() + i * bb, one, HasMin(type) ? 4 : 2);
      }
      const std::vector<uint8_t> packed = Repack(w);
      const GgmlType r16 = quant::RepackedType(type, rows);
      for (float v : {1.0f, -1.0f}) {
        const Rows a = Acts(17, n, 0, v);  // every quant +-127
        for (int64_t n_tok : {1, 17}) {    // decode, and a 16-token tile + 1 (AMX)
          const std::vector<float> y = RunR16(tier, r16, packed, rows, n, a, n_tok, rows);
          for (int64_t t = 0; t < n_tok; ++t) {
            for (int64_t r = 0; r < rows; ++r) {
              const Exact e = ExactDot(type, w.Row(r), a.Row(t), n, GgmlType::kQ8_0);
              EXPECT_NEAR(y[t * rows + r], e.dot, 1e-6 * e.norm)
                  << cpu::IsaTierName(tier) << " " << TypeName(type) << " fill " << int{fill}
                  << " n_tok " << n_tok << " t " << t;
            }
          }
        }
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(AllTiers, LegacyR16GemmTest, testing::AllIsaTiers(),
                         testing::IsaTierParamName());

// Several tokens on AVX-512 VNNI: the R16 fill computes the values FillLegacyRowLane computes from
// the file rows, so the row-lane tile gives the file type's GEMM bits (it uses row lanes from 4
// tokens on, for whole 16-row groups).
TEST(LegacyR16VnniTest, SeveralTokensGiveTheRowLaneBits) {
  if (!TierAvailable(IsaTier::kAvx512Vnni)) GTEST_SKIP() << "this CPU lacks AVX-512 VNNI";
  const int64_t n = 7168, rows = 32;
  for (GgmlType type : kFileTypes) {
    const Rows w = Quantized(type, rows, n, 11);
    const std::vector<uint8_t> packed = Repack(w);
    const GgmlType r16 = quant::RepackedType(type, rows);
    for (int64_t n_tok : {4, 12, 40}) {
      const Rows a = Acts(n_tok, n, 12);
      const std::vector<float> got =
          RunR16(IsaTier::kAvx512Vnni, r16, packed, rows, n, a, n_tok, rows);
      std::vector<float> want(n_tok * rows, kNaN);
      KernelsFor(IsaTier::kAvx512Vnni)
          .For(type)
          ->gemm(w.bytes.data(), static_cast<size_t>(w.row_bytes), rows, a.bytes.data(),
                 static_cast<size_t>(a.row_bytes), n_tok, n, want.data(), rows);
      for (int64_t i = 0; i < n_tok * rows; ++i) {
        ASSERT_EQ(got[i], want[i]) << TypeName(type) << " n_tok=" << n_tok << " i=" << i;
      }
    }
  }
}

// Rows of more than 8192 blocks: one token at a time, the token's block terms prepared in chunks
// (the second chunk adds to the first's partial sums; Q4_1 / Q5_1: their min terms too).
TEST(LegacyR16VnniTest, RowsLongerThanOnePass) {
  if (!TierAvailable(IsaTier::kAvx512Vnni)) GTEST_SKIP() << "this CPU lacks AVX-512 VNNI";
  const int64_t n = 32 * 8200, rows = 16;
  for (GgmlType type : {GgmlType::kQ5_0, GgmlType::kQ5_1, GgmlType::kQ4_1}) {
    const DotFn ref = KernelsFor(IsaTier::kScalar).For(type)->dot;
    const Rows w = Quantized(type, rows, n, 21);
    const std::vector<uint8_t> packed = Repack(w);
    const Rows a = Acts(2, n, 22);
    const std::vector<float> y =
        RunR16(IsaTier::kAvx512Vnni, quant::RepackedType(type, rows), packed, rows, n, a, 2, rows);
    for (int64_t t = 0; t < 2; ++t) {
      for (int64_t r = 0; r < rows; ++r) {
        const Exact e = ExactDot(type, w.Row(r), a.Row(t), n, GgmlType::kQ8_0);
        ASSERT_NEAR(y[t * rows + r], ref(w.Row(r), a.Row(t), n), 1e-5 * e.norm)
            << TypeName(type) << " r=" << r;
      }
    }
  }
}

}  // namespace
}  // namespace moesplit::gemv
