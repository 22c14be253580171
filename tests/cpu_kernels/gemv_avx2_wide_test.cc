// The AVX2 tier's gemm at many tokens: the wide paths (cpu_kernels/gemv/gemv_avx2_wide.inc for
// the K-quant and IQ types, gemv_legacy_wide_avx2.inc for Q4_0 / Q5_0 / Q5_1 / Q4_1 / MXFP4; 8
// tokens and more) against the scalar dot, for every type they run and the ones left to the tiles
// (IQ4_XS):
//   - token counts across the path's edges: 7 (the token tile), 8 (the first wide call), 63 /
//     64 / 65 / 131 (one, two and three token blocks of 64, tails of 1..3 tokens);
//   - rows 1, 9, 16, 17, 40 (row sets of 8 and groups of 16, with padding rows);
//   - 256, 1280 and 2304 values (the K-quant path's chunks of 4 blocks, the legacy path's chunks
//     of 16 blocks of 32, and their tails); NaN-poisoned y with guard columns;
//   - random bytes (every quant, scale and min pattern the format has) and constant bytes
//     (0x00 / 0xFF / 0x80 / 0x55: the largest quants and scales), against activations of
//     normal values and of all +127 / all -127 / alternating quants, where an i16 pair sum
//     that saturated would show.
#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "core/base/dtype.h"
#include "core/base/float16.h"
#include "cpu_kernels/cpu_features.h"
#include "cpu_kernels/gemv/gemv.h"
#include "cpu_kernels/quant/blocks.h"
#include "cpu_kernels/quant/blocks_iq.h"
#include "tests/cpu_kernels/gemv_test_util.h"

namespace moesplit::gemv {
namespace {

using cpu::IsaTier;
using test_util::Allocate;
using test_util::ExpectGemmMatches;
using test_util::Matrix;

constexpr GgmlType kTypes[] = {
    GgmlType::kQ2_K,   GgmlType::kQ3_K,    GgmlType::kQ4_K,   GgmlType::kQ5_K,  GgmlType::kQ6_K,
    GgmlType::kIQ4_XS, GgmlType::kIQ2_XXS, GgmlType::kIQ2_XS, GgmlType::kIQ2_S, GgmlType::kIQ3_XXS,
    GgmlType::kIQ3_S,  GgmlType::kIQ1_S,   GgmlType::kIQ1_M,  GgmlType::kQ4_0,  GgmlType::kQ5_0,
    GgmlType::kQ5_1,   GgmlType::kQ4_1,    GgmlType::kMXFP4};

// Sets the block's f16 super-scale d to `v` and its dmin, where the type has one, to `vmin`.
void SetScales(GgmlType t, uint8_t* blk, uint16_t v, uint16_t vmin) {
  switch (t) {
    case GgmlType::kQ2_K: {
      auto* b = reinterpret_cast<quant::BlockQ2_K*>(blk);
      b->d = v;
      b->dmin = vmin;
      return;
    }
    case GgmlType::kQ3_K:
      reinterpret_cast<quant::BlockQ3_K*>(blk)->d = v;
      return;
    case GgmlType::kQ4_K: {
      auto* b = reinterpret_cast<quant::BlockQ4_K*>(blk);
      b->d = v;
      b->dmin = vmin;
      return;
    }
    case GgmlType::kQ5_K: {
      auto* b = reinterpret_cast<quant::BlockQ5_K*>(blk);
      b->d = v;
      b->dmin = vmin;
      return;
    }
    case GgmlType::kQ6_K:
      reinterpret_cast<quant::BlockQ6_K*>(blk)->d = v;
      return;
    case GgmlType::kIQ4_XS:
      reinterpret_cast<quant::BlockIQ4_XS*>(blk)->d = v;
      return;
    case GgmlType::kQ4_0:
      reinterpret_cast<quant::BlockQ4_0*>(blk)->d = v;
      return;
    case GgmlType::kQ5_0:
      reinterpret_cast<quant::BlockQ5_0*>(blk)->d = v;
      return;
    case GgmlType::kQ5_1: {
      auto* b = reinterpret_cast<quant::BlockQ5_1*>(blk);
      b->d = v;
      b->m = vmin;
      return;
    }
    case GgmlType::kQ4_1: {
      auto* b = reinterpret_cast<quant::BlockQ4_1*>(blk);
      b->d = v;
      b->m = vmin;
      return;
    }
    case GgmlType::kMXFP4:  // E8M0: 2^(e - 127) halved; 121 + (v & 3): 2^-7 .. 2^-4
      reinterpret_cast<quant::BlockMXFP4*>(blk)->e = static_cast<uint8_t>(121 + (v & 3));
      return;
    default:
      quant::SetLatticeBlockScale(t == GgmlType::kIQ1_M, blk, v);
      return;
  }
}

// rows x n weights of `t`: random bytes (fill < 0) or every byte `fill`, then finite scales
// (random sign and magnitude in [0.5, 2) / 64; for constant bytes d = 1 / 64 and dmin = 3 / 256,
// so that d s q - dmin m is not an exact 0 whose error scale would be 0). Row padding
// stays 0xFF (NaN scales: a read past a row shows).
Matrix Weights(GgmlType t, int64_t rows, int64_t n, int fill, uint32_t seed) {
  Matrix m = Allocate(t, rows, n, 6);
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> mag(0.5f / 64, 2.0f / 64);
  const int64_t block = GetTypeTraits(t).block_size;
  const int64_t bb = RowBytes(t, block);
  for (int64_t r = 0; r < rows; ++r) {
    uint8_t* row = m.MutableRow(r);
    for (int64_t i = 0; i < RowBytes(t, n); ++i) {
      row[i] = static_cast<uint8_t>(fill < 0 ? rng() : fill);
    }
    for (int64_t b = 0; b < n / block; ++b) {
      const float s = fill < 0 ? (rng() & 1 ? 1.0f : -1.0f) * mag(rng) : 1.0f / 64;
      const float smin = fill < 0 ? (rng() & 1 ? 1.0f : -1.0f) * mag(rng) : 3.0f / 256;
      SetScales(t, row + b * bb, Fp32ToFp16(s), Fp32ToFp16(smin));
    }
  }
  m.Dequantize();
  return m;
}

// n_tok activation rows (Q8_K or Q8_0): normal values, or quants all +127 / all -127 /
// alternating (mode 1 / 2 / 3).
Matrix Acts(GgmlType at, int64_t n_tok, int64_t n, int mode, uint32_t seed) {
  if (mode == 0) return test_util::Random(at, n_tok, n, 12, seed, 3.0f);
  Matrix a = Allocate(at, n_tok, n, 12);
  std::vector<float> x(n);
  for (int64_t t = 0; t < n_tok; ++t) {
    for (int64_t i = 0; i < n; ++i) {
      x[i] = mode == 1 ? 1.0f : mode == 2 ? -1.0f : (i % 2 == 0 ? 1.0f : -1.0f);
    }
    KernelsFor(IsaTier::kScalar).Quantizer(at)(x.data(), a.MutableRow(t), n);
  }
  a.Dequantize();
  return a;
}

class Avx2WideTest : public ::testing::TestWithParam<GgmlType> {};

TEST_P(Avx2WideTest, RandomBytesMatchScalarAcrossTokenBlocks) {
  const GgmlType t = GetParam();
  if (!test_util::TierAvailable(IsaTier::kAvx2)) GTEST_SKIP() << "this CPU lacks AVX2";
  const TypeKernels* tk = KernelsFor(IsaTier::kAvx2).For(t);
  ASSERT_NE(tk, nullptr) << TypeName(t);
  const DotFn ref = KernelsFor(IsaTier::kScalar).For(t)->dot;
  for (int64_t n : {256, 1280, 2304}) {
    const Matrix w = Weights(t, 40, n, -1, static_cast<uint32_t>(n));
    const Matrix a = Acts(tk->act_type, 131, n, 0, static_cast<uint32_t>(n) + 1);
    for (int64_t rows : {1, 9, 16, 17, 40}) {
      for (int64_t n_tok : {7, 8, 63, 64, 65, 131}) {
        ExpectGemmMatches(tk->gemm, ref, w, rows, a, n_tok, 1e-5, TypeName(t));
      }
    }
  }
}

TEST_P(Avx2WideTest, ConstantBytesAndFullScaleActivations) {
  const GgmlType t = GetParam();
  if (!test_util::TierAvailable(IsaTier::kAvx2)) GTEST_SKIP() << "this CPU lacks AVX2";
  const TypeKernels* tk = KernelsFor(IsaTier::kAvx2).For(t);
  ASSERT_NE(tk, nullptr) << TypeName(t);
  const DotFn ref = KernelsFor(IsaTier::kScalar).For(t)->dot;
  const int64_t n = 1024;
  for (int fill : {0x00, 0xFF, 0x80, 0x55}) {
    const Matrix w = Weights(t, 17, n, fill, 1);
    for (int mode : {1, 2, 3}) {
      const Matrix a = Acts(tk->act_type, 9, n, mode, 2);
      ExpectGemmMatches(tk->gemm, ref, w, 17, a, 9, 1e-5,
                        std::string(TypeName(t)) + " fill " + std::to_string(fill) + " acts " +
                            std::to_string(mode));
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Types, Avx2WideTest, ::testing::ValuesIn(kTypes),
                         [](const ::testing::TestParamInfo<GgmlType>& info) {
                           return std::string(TypeName(info.param));
                         });

}  // namespace
}  // namespace moesplit::gemv
