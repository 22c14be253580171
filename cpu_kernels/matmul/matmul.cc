#include "cpu_kernels/matmul/matmul.h"

#include <algorithm>
#include <vector>

#include "core/base/status.h"
#include "cpu_kernels/quant/quant.h"

namespace moesplit::matmul {

WeightMatrix WeightMatrix::Rows(int64_t begin, int64_t n) const {
  MOESPLIT_CHECK(begin >= 0 && n >= 0 && begin + n <= rows, "rows ", begin, "+", n, " of ", rows);
  WeightMatrix m = *this;
  m.data = Row(begin);
  m.rows = n;
  return m;
}

WeightMatrix FromTensor(const TensorView& t, int64_t slice) {
  const int64_t slices = t.ne[2] * t.ne[3];
  MOESPLIT_CHECK(slice >= 0 && slice < slices, t.name, ": slice ", slice, " of ", slices);
  WeightMatrix m;
  m.type = t.type;
  m.cols = t.ne[0];
  m.rows = t.ne[1];
  m.row_bytes = RowBytes(t.type, t.ne[0]);
  m.data = static_cast<const uint8_t*>(t.data) + slice * m.rows * m.row_bytes;
  return m;
}

float Dot(const float* a, const float* b, int64_t n) {
  float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    for (int j = 0; j < 8; ++j) acc[j] += a[i + j] * b[i + j];
  }
  float sum = ((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7]));
  for (; i < n; ++i) sum += a[i] * b[i];
  return sum;
}

namespace {
// The row as floats: the weights themselves for F32, else dequantized into scratch.
const float* RowAsFloat(const WeightMatrix& w, int64_t r, float* scratch) {
  if (w.type == GgmlType::kF32) return static_cast<const float*>(w.Row(r));
  quant::DequantizeRow(w.type, w.Row(r), scratch, w.cols);
  return scratch;
}
}  // namespace

void MatMulRowRange(const WeightMatrix& w, const float* x, int64_t ldx, int64_t n_tok, float* y,
                    int64_t ldy, int64_t row_begin, int64_t row_end, float* scratch) {
  for (int64_t r = row_begin; r < row_end; ++r) {
    const float* row = RowAsFloat(w, r, scratch);
    for (int64_t t = 0; t < n_tok; ++t) y[t * ldy + r] = Dot(row, x + t * ldx, w.cols);
  }
}

void MatMul(Executor& pool, const WeightMatrix& w, const float* x, int64_t ldx,
            int64_t n_tok, float* y, int64_t ldy) {
  MOESPLIT_CHECK(quant::CanDequantize(w.type), "matmul: weight type ", TypeName(w.type));
  // ~4 blocks per thread for balance, at least 8 rows per block.
  const int64_t n_threads = pool.size();
  const int64_t block = std::max<int64_t>(8, (w.rows + 4 * n_threads - 1) / (4 * n_threads));
  const int64_t n_blocks = (w.rows + block - 1) / block;
  std::vector<float> scratch(static_cast<size_t>(n_threads * w.cols));  // [threads][cols]
  pool.ParallelFor(n_blocks, [&](int64_t b, int worker) {
    const int64_t r0 = b * block, r1 = std::min(w.rows, r0 + block);
    MatMulRowRange(w, x, ldx, n_tok, y, ldy, r0, r1, scratch.data() + worker * w.cols);
  });
}

void MatMulTransposed(const WeightMatrix& w, const float* x, int64_t ldx, int64_t n_tok, float* y,
                      int64_t ldy, float* scratch) {
  for (int64_t t = 0; t < n_tok; ++t) std::fill(y + t * ldy, y + t * ldy + w.cols, 0.0f);
  for (int64_t r = 0; r < w.rows; ++r) {
    const float* row = RowAsFloat(w, r, scratch);
    for (int64_t t = 0; t < n_tok; ++t) {
      const float a = x[t * ldx + r];
      float* yt = y + t * ldy;
      for (int64_t k = 0; k < w.cols; ++k) yt[k] += a * row[k];
    }
  }
}

}  // namespace moesplit::matmul
