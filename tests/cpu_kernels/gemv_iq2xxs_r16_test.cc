// IQ2_XXS's 16-row layout kIQ2_XXS_R16 (cpu_kernels/quant/repack.h):
//   - the repack is lossless on random bytes (every sign index, grid index and scale), 70
//     bytes per row and block, never a file type;
//   - every tier's R16 gemm (the VNNI tier's own kernel where the CPU has VBMI and GFNI, the
//     unpack to the file layout's gemm elsewhere) matches the scalar dot of the original rows:
//     decode (two groups per pass and the odd one) and 2-9 tokens, 1-4 groups, widths of 1, 8,
//     28 and 72 blocks (the last past the decode call's 16 KB stack buffer of permuted
//     activations), NaN-poisoned outputs with guard rows;
//   - activations at +-127 (the kernel negates them) match float64;
//   - LoadLayout repacks IQ2_XXS only where the tier has the native kernel.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
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

constexpr GgmlType kW = GgmlType::kIQ2_XXS, kR16 = GgmlType::kIQ2_XXS_R16;
constexpr IsaTier kTiers[] = {IsaTier::kScalar, IsaTier::kAvx2, IsaTier::kAvx512,
                              IsaTier::kAvx512Vnni, IsaTier::kAmx};

Matrix RandomRows(int64_t rows, int64_t n, uint32_t seed) {
  Matrix m = Allocate(kW, rows, n, 0);
  std::mt19937 rng(seed);
  for (int64_t r = 0; r < rows; ++r)
    test_util::FillLatticeRow(kW, m.MutableRow(r), n, 1.0f / 64, rng);
  m.Dequantize();
  return m;
}

std::vector<uint8_t> Repack(const Matrix& w, int64_t rows) {
  std::vector<uint8_t> packed(rows * RowBytes(kR16, w.n), 0xA5);
  quant::RepackRows(kW, w.Row(0), w.stride, rows, w.n, packed.data());
  return packed;
}

bool NativeR16(IsaTier tier) {
  return tier >= IsaTier::kAvx512Vnni && cpu::DetectCpuFeatures().avx512vbmi &&
         cpu::DetectCpuFeatures().gfni;
}

TEST(Iq2XxsR16Test, LosslessRoundTrip) {
  EXPECT_EQ(quant::RepackedType(kW, 32), kR16);
  EXPECT_EQ(quant::RepackedType(kW, 24), kW) << "rows not a multiple of 16 stay";
  EXPECT_EQ(quant::UnpackedType(kR16), kW);
  EXPECT_EQ(FindTypeTraits(static_cast<uint32_t>(kR16)), nullptr) << "never a file type";
  EXPECT_EQ(RowGroup(kR16), 16);
  EXPECT_EQ(RowBytes(kR16, 7168), 7168 / 256 * 70);
  const int64_t n = 2304, rows = 48;
  const Matrix w = RandomRows(rows, n, 3);
  const std::vector<uint8_t> packed = Repack(w, rows);
  std::vector<uint8_t> back(rows * w.stride);
  for (int64_t g = 0; g < rows / 16; ++g) {
    quant::UnpackRows16(kR16, packed.data() + g * 16 * RowBytes(kR16, n), n,
                        back.data() + g * 16 * w.stride, w.stride);
  }
  EXPECT_EQ(std::memcmp(back.data(), w.Row(0), back.size()), 0);
}

class Iq2XxsR16TierTest : public ::testing::TestWithParam<IsaTier> {};

TEST_P(Iq2XxsR16TierTest, GemmMatchesScalar) {
  const IsaTier tier = GetParam();
  if (!TierAvailable(tier)) GTEST_SKIP() << "this CPU lacks " << cpu::IsaTierName(tier);
  const TypeKernels* tk = KernelsFor(tier).For(kR16);
  ASSERT_NE(tk, nullptr);
  EXPECT_EQ(tk->dot, nullptr);
  EXPECT_EQ(KernelsFor(tier).native_layout[static_cast<size_t>(kR16)], NativeR16(tier));
  const DotFn ref = KernelsFor(IsaTier::kScalar).For(kW)->dot;
  for (int64_t n : {256, 2048, 7168, 18432}) {
    for (int64_t rows : {16, 48, 64}) {
      if (n == 18432 && rows > 16) continue;  // the width is for the heap buffer, not the rows
      const Matrix w = RandomRows(rows, n, static_cast<uint32_t>(n + rows));
      const std::vector<uint8_t> packed = Repack(w, rows);
      const Matrix a = Random(GgmlType::kQ8_K, 9, n, 0, static_cast<uint32_t>(n) + 5, 3.0f);
      for (int64_t n_tok : {1, 2, 3, 4, 5, 7, 9}) {
        test_util::ExpectGemmOnMatches(tk->gemm, packed.data(),
                                       static_cast<size_t>(RowBytes(kR16, n)), ref, w, rows, a,
                                       n_tok, 1e-5, std::string(cpu::IsaTierName(tier)));
      }
    }
  }
}

// Activations +-127 with scale 1 and weights with d = 1 / 64: the kernel's negated bytes at
// their edge; float64 of the dequantized values is the oracle.
TEST_P(Iq2XxsR16TierTest, FullScaleActivationsMatchFloat64) {
  const IsaTier tier = GetParam();
  if (!TierAvailable(tier)) GTEST_SKIP() << "this CPU lacks " << cpu::IsaTierName(tier);
  const int64_t n = 2048, rows = 32;
  const Matrix w = RandomRows(rows, n, 11);
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
  KernelsFor(tier).For(kR16)->gemm(packed.data(), RowBytes(kR16, n), rows, a.Row(0), a.stride, 2, n,
                                   y.data(), rows);
  for (int64_t t = 0; t < 2; ++t) {
    for (int64_t r = 0; r < rows; ++r) {
      const test_util::Exact e = ExactDot(w, r, a, t);
      EXPECT_NEAR(y[t * rows + r], e.dot, 1e-5 * e.norm) << "r " << r << " t " << t;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Iq2XxsR16, Iq2XxsR16TierTest, ::testing::ValuesIn(kTiers),
                         [](const ::testing::TestParamInfo<IsaTier>& info) {
                           return std::string(cpu::IsaTierName(info.param));
                         });

TEST(Iq2XxsR16Test, LoadLayoutRepacksOnlyWithTheNativeKernel) {
  for (IsaTier tier : kTiers) {
    const GgmlType want = NativeR16(tier) ? kR16 : kW;
    EXPECT_EQ(LoadLayout(KernelsFor(tier), kW, 32), want) << cpu::IsaTierName(tier);
    EXPECT_EQ(LoadLayout(KernelsFor(tier), kW, 24), kW);
  }
}

}  // namespace
}  // namespace moesplit::gemv
