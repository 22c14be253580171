// Quantized matrix products on the tier's kernel table (cpu_kernels/gemv): y = x W^T where the
// activation rows x are quantized ONCE per (rows, activation type) and reused by every matrix
// that takes that type (q and kv_a share the attention input; every expert of a token shares the
// token's Q8_K row).
//
//   QuantizedRows xq;                                       // keep it: its storage is reused
//   qmatmul::Quantize(k, qmatmul::ActTypeFor(k, w.type), x, D, n_tok, D, &xq);
//   qmatmul::MatMul(pool, k, w, xq, y, ldy);                // parallel over row blocks
//
// Weight types without a kernel in the table (e.g. Q2_K, IQ*) take plain f32 rows (ActTypeFor
// returns kF32) and run the reference matmul::MatMulRowRange: correct but slow.
// MissingKernelTypes lets the owner log them once at start-up.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "core/base/dtype.h"
#include "cpu_kernels/gemv/gemv.h"
#include "cpu_kernels/matmul/matmul.h"
#include "core/base/executor.h"

namespace moesplit::qmatmul {

using matmul::WeightMatrix;

// n_tok activation rows of `cols` values in `type` (kF32, kQ8_K or kQ8_0).
struct QuantizedRows {
  GgmlType type = GgmlType::kF32;
  int64_t n_tok = 0;
  int64_t cols = 0;
  size_t stride = 0;             // bytes from one row to the next (>= RowBytes(type, cols))
  const void* data = nullptr;    // row 0: into `storage`, or the caller's f32 rows (kF32)
  std::vector<uint8_t> storage;  // [n_tok x stride] + alignment slack; grows, never shrinks

  const void* Row(int64_t t) const {
    return static_cast<const uint8_t*>(data) + static_cast<size_t>(t) * stride;
  }
  // Rows t0 .. t0 + nt as a view (no storage of its own).
  QuantizedRows View(int64_t t0, int64_t nt) const {
    QuantizedRows v;
    v.type = type;
    v.n_tok = nt;
    v.cols = cols;
    v.stride = stride;
    v.data = Row(t0);
    return v;
  }
};

// The activation type the table's kernel for `weight_type` takes; kF32 when it has none (the
// reference fallback, which reads f32 rows).
GgmlType ActTypeFor(const gemv::GemvKernels& k, GgmlType weight_type);

// True when `weight_type` has no kernel in k (products with it run the slow reference).
bool IsFallback(const gemv::GemvKernels& k, GgmlType weight_type);

// The distinct types among `types` without a kernel in k, in first-seen order.
std::vector<GgmlType> MissingKernelTypes(const gemv::GemvKernels& k,
                                         std::span<const GgmlType> types);

// A 64-byte aligned region of `bytes` inside *storage (grown to bytes + 64 if smaller; never
// shrunk, so steady-state calls do not allocate).
uint8_t* AlignedStorage(std::vector<uint8_t>* storage, size_t bytes);

// Bytes of one quantized row in rows->storage: RowBytes(act_type, cols) rounded up to 64 so
// every row starts on a cache line.
size_t RowStride(GgmlType act_type, int64_t cols);

// rows = x[n_tok x cols] (row t at x + t*ldx) in act_type. kF32 aliases x (no copy; x must
// outlive rows' use); kQ8_K / kQ8_0 quantize into rows->storage (cols a multiple of 256 / 32).
// The parallel form splits tokens over the pool when there are enough of them.
void Quantize(const gemv::GemvKernels& k, GgmlType act_type, const float* x, int64_t ldx,
              int64_t n_tok, int64_t cols, QuantizedRows* rows);
void Quantize(moesplit::Executor& pool, const gemv::GemvKernels& k, GgmlType act_type, const float* x,
              int64_t ldx, int64_t n_tok, int64_t cols, QuantizedRows* rows);

// y[t*ldy + r] = W[r] . x[t] for r in [r0, r1), t < rows.n_tok; single-threaded. rows.type must
// be ActTypeFor(k, w.type) and rows.cols == w.cols (CHECKed). Tokens run in chunks so that a
// chunk of activation rows stays in L2 while the rows' weights are reused from L1/L2.
// f32_gemm (e.g. GemvKernels::f32_gemm_bf16x3), when set, replaces the F32 kernel's gemm for F32
// weights and rows.
void MatMulRows(const gemv::GemvKernels& k, const WeightMatrix& w, const QuantizedRows& rows,
                float* y, int64_t ldy, int64_t r0, int64_t r1, gemv::GemmFn f32_gemm = nullptr);

// One output of a product: y[T x w.rows] (row stride ldy floats) = x W^T.
struct Product {
  WeightMatrix w;
  float* y = nullptr;
  int64_t ldy = 0;
};

// The most products MatMulMany takes in one call.
inline constexpr int kMaxProducts = 8;

// All products over the same activation rows in ONE ParallelFor (one barrier): row blocks of
// every matrix sized so that each thread gets >= 4 tasks. Tiny products run on the caller.
void MatMulMany(moesplit::Executor& pool, const gemv::GemvKernels& k, std::span<const Product> products,
                const QuantizedRows& rows);

// y[T x M] = x W^T with pre-quantized rows, parallel over row blocks.
void MatMul(moesplit::Executor& pool, const gemv::GemvKernels& k, const WeightMatrix& w,
            const QuantizedRows& rows, float* y, int64_t ldy);

// Quantizes x[n_tok x w.cols] (into *scratch) and multiplies: y[T x M] = x W^T.
void MatMul(moesplit::Executor& pool, const gemv::GemvKernels& k, const WeightMatrix& w, const float* x,
            int64_t ldx, int64_t n_tok, float* y, int64_t ldy, QuantizedRows* scratch);

}  // namespace moesplit::qmatmul
