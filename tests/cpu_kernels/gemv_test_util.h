// Shared harness of the per-family GEMV kernel tests (gemv_q23k_test.cc, gemv_iq4_test.cc,
// gemv_iq_test.cc): test matrices with their dequantized values, the float64 reference dot, and
// the NaN-poisoned gemm check against a reference dot.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "core/base/dtype.h"
#include "core/base/float16.h"
#include "cpu_kernels/quant/blocks_iq.h"
#include "cpu_kernels/cpu_features.h"
#include "cpu_kernels/gemv/gemv.h"
#include "cpu_kernels/quant/quant.h"

namespace moesplit::gemv::test_util {

inline constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

// Whether this CPU runs `tier`'s kernels.
inline bool TierAvailable(cpu::IsaTier tier) {
  return static_cast<int>(tier) <= static_cast<int>(cpu::BestTier(cpu::DetectCpuFeatures()));
}

// rows x n values of `type`, rows `stride` bytes apart (u32 storage: 4-byte aligned), with the
// dequantized values.
struct Matrix {
  GgmlType type;
  int64_t rows = 0, n = 0;
  size_t stride = 0;
  std::vector<uint32_t> storage;
  std::vector<float> values;  // [rows, n]
  const uint8_t* Row(int64_t r) const {
    return reinterpret_cast<const uint8_t*>(storage.data()) + r * stride;
  }
  uint8_t* MutableRow(int64_t r) { return reinterpret_cast<uint8_t*>(storage.data()) + r * stride; }
  void Dequantize() {
    values.resize(rows * n);
    for (int64_t r = 0; r < rows; ++r) quant::DequantizeRow(type, Row(r), &values[r * n], n);
  }
};

// A rows x n matrix whose rows are RowBytes + pad bytes apart, every byte 0xFF (NaN f16 scales
// in the padding, so a kernel reading past a row shows).
inline Matrix Allocate(GgmlType type, int64_t rows, int64_t n, size_t pad) {
  Matrix m{type, rows, n, static_cast<size_t>(RowBytes(type, n)) + pad, {}, {}};
  m.storage.assign(rows * m.stride / 4 + 1, 0xFFFFFFFFu);
  return m;
}

// Weights (the reference quantizer of `type`) or activations (Q8_0 / Q8_K: the scalar table's
// quantizer, as the engine does) of normal(0, sigma) values.
inline Matrix Random(GgmlType type, int64_t rows, int64_t n, size_t pad, uint32_t seed,
                     float sigma) {
  Matrix m = Allocate(type, rows, n, pad);
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, sigma);
  std::vector<float> x(n);
  for (int64_t r = 0; r < rows; ++r) {
    for (float& v : x) v = dist(rng);
    if (type == GgmlType::kQ8_0 || type == GgmlType::kQ8_K) {
      KernelsFor(cpu::IsaTier::kScalar).Quantizer(type)(x.data(), m.MutableRow(r), n);
    } else {
      quant::QuantizeRow(type, x.data(), m.MutableRow(r), n);
    }
  }
  m.Dequantize();
  return m;
}

// sum_i w_i a_i of the dequantized values in float64, and sum_i |w_i a_i| (the error scale).
struct Exact {
  double dot = 0, norm = 0;
};
inline Exact ExactDot(const Matrix& w, int64_t r, const Matrix& a, int64_t t) {
  Exact e;
  for (int64_t i = 0; i < w.n; ++i) {
    const double p = static_cast<double>(w.values[r * w.n + i]) * a.values[t * a.n + i];
    e.dot += p;
    e.norm += std::fabs(p);
  }
  return e;
}

// gemm over `rows` rows of weights stored at `data` (`stride` bytes per row: w's own rows, or a
// repacked copy of them) and tokens 0..n_tok-1 of a (n_tok <= a.rows) into a NaN-poisoned y with
// ldy = rows + 3: every y equals ref(row r of w, token) within rel * sum |w a|, and the guard
// columns stay NaN.
inline void ExpectGemmOnMatches(GemmFn gemm, const void* data, size_t stride, DotFn ref,
                                const Matrix& w, int64_t rows, const Matrix& a, int64_t n_tok,
                                double rel, const std::string& where) {
  const int64_t ldy = rows + 3, n = w.n;
  std::vector<float> y(n_tok * ldy, kNaN);
  gemm(data, stride, rows, a.Row(0), a.stride, n_tok, n, y.data(), ldy);
  for (int64_t t = 0; t < n_tok; ++t) {
    for (int64_t r = 0; r < ldy; ++r) {
      const float got = y[t * ldy + r];
      if (r >= rows) {
        ASSERT_TRUE(std::isnan(got)) << where << ": wrote past rows: r " << r << " t " << t;
        continue;
      }
      ASSERT_NEAR(got, ref(w.Row(r), a.Row(t), n), rel * ExactDot(w, r, a, t).norm)
          << where << " n " << n << " rows " << rows << " n_tok " << n_tok << " r " << r << " t "
          << t;
    }
  }
}

// The same over w's own rows 0..rows-1 (rows <= w.rows).
inline void ExpectGemmMatches(GemmFn gemm, DotFn ref, const Matrix& w, int64_t rows,
                              const Matrix& a, int64_t n_tok, double rel,
                              const std::string& where) {
  ExpectGemmOnMatches(gemm, w.Row(0), w.stride, ref, w, rows, a, n_tok, rel, where);
}

// The lattice types (IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS, IQ3_S, IQ1_S, IQ1_M; the four middle ones
// have no quantizer here): n values of random bytes at row, with a finite f16 super-scale per
// block of magnitude [0.5, 2] * d_scale and a random sign. Every code pattern of these types
// decodes to grid values, so the bytes are valid weights.
inline void FillLatticeRow(GgmlType type, uint8_t* row, int64_t n, float d_scale,
                           std::mt19937& rng) {
  std::uniform_real_distribution<float> mag(0.5f * d_scale, 2.0f * d_scale);
  const int64_t bb = RowBytes(type, 256);
  for (int64_t i = 0; i < RowBytes(type, n); ++i) row[i] = static_cast<uint8_t>(rng());
  for (int64_t b = 0; b < n / 256; ++b) {
    uint8_t* blk = row + b * bb;
    const uint16_t d = Fp32ToFp16((rng() & 1 ? 1.0f : -1.0f) * mag(rng));
    quant::SetLatticeBlockScale(type == GgmlType::kIQ1_M, blk, d);
  }
}

}  // namespace moesplit::gemv::test_util
