// Test helpers shared by the K-quant kernel tests (gemv_kquants_test.cc, gemv_repack_test.cc):
// weight matrices (quantized floats or random block bytes), Q8_K activation rows, and the
// float64 dot of their dequantized values.
#pragma once

#include <cmath>
#include <cstdint>
#include <initializer_list>
#include <random>
#include <utility>
#include <vector>

#include "core/base/dtype.h"
#include "core/base/float16.h"
#include "cpu_kernels/gemv/gemv.h"
#include "cpu_kernels/quant/blocks.h"
#include "cpu_kernels/quant/quant.h"

namespace moesplit::gemv::kquant_testing {

inline std::vector<float> RandomRow(int64_t n, uint32_t seed, float scale) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, scale);
  std::vector<float> x(n);  // [n]
  for (float& v : x) v = dist(rng);
  return x;
}

// Bytes of `rows` weight rows of n values, rows `stride` bytes apart (stride >= row bytes;
// the padding is 0xFF). u32 storage keeps the 4-byte alignment Q8_K needs.
struct Matrix {
  GgmlType type = GgmlType::kQ4_K;
  int64_t rows = 0, n = 0;
  size_t stride = 0;
  std::vector<uint32_t> data;  // [rows * stride / 4 + 1]
  uint8_t* Row(int64_t r) { return reinterpret_cast<uint8_t*>(data.data()) + r * stride; }
  const uint8_t* Row(int64_t r) const {
    return reinterpret_cast<const uint8_t*>(data.data()) + r * stride;
  }
};

inline Matrix NewMatrix(GgmlType type, int64_t rows, int64_t n, size_t pad) {
  Matrix m;
  m.type = type;
  m.rows = rows;
  m.n = n;
  m.stride = (RowBytes(type, n) + pad + 3) / 4 * 4;
  m.data.assign(rows * m.stride / 4 + 1, 0xFFFFFFFFu);
  return m;
}

// Weight rows quantized from normal floats with the reference quantizer.
inline Matrix QuantizedWeights(GgmlType type, int64_t rows, int64_t n, size_t pad, uint32_t seed) {
  Matrix m = NewMatrix(type, rows, n, pad);
  for (int64_t r = 0; r < rows; ++r) {
    quant::QuantizeRow(type, RandomRow(n, seed + r, 0.02f).data(), m.Row(r), n);
  }
  return m;
}

// The f16 scale fields of one block (d, and dmin for Q4_K / Q5_K).
inline std::vector<uint16_t*> ScaleFields(GgmlType type, uint8_t* blk) {
  switch (type) {
    case GgmlType::kQ4_K: {
      auto* b = reinterpret_cast<quant::BlockQ4_K*>(blk);
      return {&b->d, &b->dmin};
    }
    case GgmlType::kQ5_K: {
      auto* b = reinterpret_cast<quant::BlockQ5_K*>(blk);
      return {&b->d, &b->dmin};
    }
    default:
      return {&reinterpret_cast<quant::BlockQ6_K*>(blk)->d};
  }
}

// Weight rows of random bytes (all quant / scale / min bit patterns) with finite f16 d, dmin
// of either sign in [0.5, 2) / 1024.
inline Matrix RandomByteWeights(GgmlType type, int64_t rows, int64_t n, size_t pad, uint32_t seed) {
  Matrix m = NewMatrix(type, rows, n, pad);
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> mag(0.5f / 1024, 2.0f / 1024);
  const size_t block = RowBytes(type, 256);
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t i = 0; i < RowBytes(type, n); ++i) m.Row(r)[i] = static_cast<uint8_t>(rng());
    for (int64_t b = 0; b < n / 256; ++b) {
      for (uint16_t* f : ScaleFields(type, m.Row(r) + b * block)) {
        *f = Fp32ToFp16((rng() & 1 ? 1.0f : -1.0f) * mag(rng));
      }
    }
  }
  return m;
}

// n_tok Q8_K activation rows of n values, a_stride bytes apart (a multiple of 4).
struct Acts {
  int64_t n_tok = 0, n = 0;
  size_t stride = 0;
  std::vector<uint32_t> data;  // [n_tok * stride / 4 + 1]
  const uint8_t* Row(int64_t t) const {
    return reinterpret_cast<const uint8_t*>(data.data()) + t * stride;
  }
};

inline Acts QuantizeActs(const std::vector<std::vector<float>>& rows, size_t pad) {
  Acts a;
  a.n_tok = static_cast<int64_t>(rows.size());
  a.n = static_cast<int64_t>(rows[0].size());
  a.stride = (RowBytes(GgmlType::kQ8_K, a.n) + pad + 3) / 4 * 4;
  a.data.assign(a.n_tok * a.stride / 4 + 1, 0xFFFFFFFFu);
  for (int64_t t = 0; t < a.n_tok; ++t) {
    quant::QuantizeRow(GgmlType::kQ8_K, rows[t].data(),
                       reinterpret_cast<uint8_t*>(a.data.data()) + t * a.stride, a.n);
  }
  return a;
}

inline Acts RandomActs(int64_t n_tok, int64_t n, size_t pad, uint32_t seed) {
  std::vector<std::vector<float>> rows;
  for (int64_t t = 0; t < n_tok; ++t) rows.push_back(RandomRow(n, seed + 7 * t, 1.0f));
  return QuantizeActs(rows, pad);
}

// sum_i deq(w)_i * deq(a)_i in float64, and sum_i |deq(w)_i * deq(a)_i|.
struct Exact {
  double dot = 0, norm = 0;
};

// a: an activation row of act_type (Q8_K for the K-quants, Q8_0 for the legacy blocks).
inline Exact ExactDot(GgmlType type, const uint8_t* w, const uint8_t* a, int64_t n,
                      GgmlType act_type = GgmlType::kQ8_K) {
  std::vector<float> wd(n), ad(n);  // [n] each
  quant::DequantizeRow(type, w, wd.data(), n);
  quant::DequantizeRow(act_type, a, ad.data(), n);
  Exact e;
  for (int64_t i = 0; i < n; ++i) {
    const double p = static_cast<double>(wd[i]) * ad[i];
    e.dot += p;
    e.norm += std::fabs(p);
  }
  return e;
}

// The (n_tok, read mode) cases of a 16-row gemm test: one token (decode) in both DecodeRead
// modes, then each of `many` tokens (the mode plays no part there).
inline std::vector<std::pair<int64_t, DecodeRead>> DecodeBothModesThen(
    std::initializer_list<int64_t> many) {
  std::vector<std::pair<int64_t, DecodeRead>> cases = {{1, DecodeRead::kPrefetched},
                                                       {1, DecodeRead::kHardware}};
  for (int64_t n_tok : many) cases.emplace_back(n_tok, DecodeRead::kPrefetched);
  return cases;
}

}  // namespace moesplit::gemv::kquant_testing
