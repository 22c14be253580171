// Reference quantized matrix products for the CPU path. A weight matrix is `rows` rows of `cols`
// values in any GGUF type quant::DequantizeRow supports (the ggml layout: row r starts at
// data + r * row_bytes). Each weight row is dequantized once (per-worker scratch) and dotted with
// all T activation rows, so prefill reads the weights once; rows are split over the pool in
// blocks. The fast per-ISA kernels come later and are tested against these.
#pragma once

#include <cstdint>

#include "core/base/dtype.h"
#include "core/base/tensor_view.h"
#include "core/base/executor.h"

namespace moesplit::matmul {

struct WeightMatrix {
  GgmlType type = GgmlType::kF32;
  const void* data = nullptr;  // row 0
  int64_t cols = 0;            // K: values per row (ggml ne[0])
  int64_t rows = 0;            // M
  int64_t row_bytes = 0;       // RowBytes(type, cols)

  const void* Row(int64_t r) const { return static_cast<const uint8_t*>(data) + r * row_bytes; }
  // Rows [begin, begin + n) as a matrix of their own (e.g. one head's slice of attn_kv_b).
  WeightMatrix Rows(int64_t begin, int64_t n) const;
};

// A 2-D tensor [cols, rows] as a matrix; for a 3-D tensor [cols, rows, n_slices] (experts,
// per-head attn_k_b / attn_v_b) slice `slice` (each slice is a contiguous slab of `rows` rows).
WeightMatrix FromTensor(const TensorView& t, int64_t slice = 0);

// y[t*ldy + r] = sum_k x[t*ldx + k] * W[r][k]  for t < n_tok, r in [row_begin, row_end):
// y = x W^T on a row range, single-threaded. scratch: [W.cols] floats (unused for F32 weights).
void MatMulRowRange(const WeightMatrix& w, const float* x, int64_t ldx, int64_t n_tok, float* y,
                    int64_t ldy, int64_t row_begin, int64_t row_end, float* scratch);

// y[T x M] = x[T x K] W^T over all rows, parallel over row blocks on `pool`.
void MatMul(Executor& pool, const WeightMatrix& w, const float* x, int64_t ldx,
            int64_t n_tok, float* y, int64_t ldy);

// y[T x K] = x[T x M] W (the transposed product): y[t*ldy + k] = sum_r x[t*ldx + r] * W[r][k].
// Single-threaded (callers parallelise over heads); scratch: [W.cols] floats.
void MatMulTransposed(const WeightMatrix& w, const float* x, int64_t ldx, int64_t n_tok, float* y,
                      int64_t ldy, float* scratch);

// Dot product of two float vectors of length n (8 partial sums: vectorizes without -ffast-math).
float Dot(const float* a, const float* b, int64_t n);

}  // namespace moesplit::matmul
