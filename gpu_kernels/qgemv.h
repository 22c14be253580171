// Decode-time matrix-vector products with quantized weights on the GPU (plain C++ interface).
//
//   y[t][r] = sum_c W[r][c] * x[t][c]     t < n_tok (1..8), r < rows, c < cols
//
// W is `rows` GGUF rows of `cols` values of `type`, back to back (row stride RowBytes(type,
// cols)); x is n_tok x cols f32 and y n_tok x rows f32, both row-major and contiguous. Every
// weight row is read once for all n_tok tokens. QuantGemvBatched does n_batch such products at
// once over strided activations (MLA's per-head maps W_kb / W_vb); QuantGemvIds one product per
// (token, expert) pair with the expert's matrix chosen on the device (routed experts). Accumulation
// is in f32 in an order different from the CPU's, so results agree with a double-precision
// reference to ~1e-4 * sum |w * x|.
#pragma once

#include <cstdint>

#include "core/base/dtype.h"
#include "core/base/status.h"
#include "gpu_kernels/device_buffer.h"

namespace moesplit::gpu {

inline constexpr int kQGemvMaxTokens = 8;

// True for the weight types QuantGemv accepts: those of quant_blocks_hd.h (kHdDecodableTypes).
bool QuantGemvSupports(GgmlType type);

// Checks the arguments of QuantGemv without touching the GPU: InvalidArgument for an
// unsupported type, cols not a multiple of the block size (32 for the float types and the
// legacy blocks, 256 for the K-quants), rows or cols < 1, n_tok outside 1..8, or x not 16-byte
// aligned. Each message names the value and what is allowed.
Status CheckQuantGemvArgs(GgmlType type, int64_t rows, int64_t cols, const float* x, int n_tok);

// Enqueues the product on `stream` (asynchronous; w, x, y are device pointers; w needs no
// alignment). Returns CheckQuantGemvArgs' error, if any, before any CUDA call.
Status QuantGemv(GgmlType type, const void* w, int64_t rows, int64_t cols, const float* x,
                 int n_tok, float* y, Stream stream);

// n_batch products with their own weights, strided activations (strides in floats):
//
//   y[t*y_tok + b*y_batch + r] = sum_c W_b[r][c] * x[t*x_tok + b*x_batch + c]
//   W_b = w + b * rows * RowBytes(type, cols)       (the batch's matrices back to back)
//
// for t < n_tok (1..8), b < n_batch, r < rows, c < cols. QuantGemv is the case n_batch = 1,
// x_tok = cols, y_tok = rows. Nothing of y outside those n_tok x n_batch rows of `rows` floats is
// written (gaps between them stay as they are).
inline constexpr int64_t kQGemvMaxBatch = 65535;              // grid.y
inline constexpr int64_t kQGemvMaxStride = int64_t{1} << 40;  // floats; keeps offsets < 2^63

// Checks the arguments of QuantGemvBatched without touching the GPU: CheckQuantGemvArgs' rules
// (type, cols, rows, n_tok, x 16-byte aligned), and InvalidArgument, naming the value, for
// n_batch outside [1, kQGemvMaxBatch], a stride outside [0, kQGemvMaxStride], x_tok (n_tok > 1)
// or x_batch (n_batch > 1) not a multiple of 4 floats (every (t, b) row of x must start 16-byte
// aligned like x: float4 loads), or output rows that could overlap (two warps writing one float):
// the strides of the y dimensions of count > 1, sorted, must satisfy inner >= rows and outer >=
// inner * (inner count
// - 1) + rows. x strides may be 0 (one x for every batch) and y has no alignment requirement.
Status CheckQuantGemvBatchedArgs(GgmlType type, int64_t rows, int64_t cols, int64_t n_batch,
                                 const float* x, int64_t x_tok, int64_t x_batch, int n_tok,
                                 int64_t y_tok, int64_t y_batch);

// Enqueues the n_batch products on `stream` (asynchronous; w, x, y are device pointers; w needs
// no alignment; y must not overlap x). Returns CheckQuantGemvBatchedArgs' error, if any, before
// any CUDA call.
Status QuantGemvBatched(GgmlType type, const void* w, int64_t rows, int64_t cols, int64_t n_batch,
                        const float* x, int64_t x_tok, int64_t x_batch, int n_tok, float* y,
                        int64_t y_tok, int64_t y_batch, Stream stream);

// Routed experts: one single-token product per (token, expert) pair p < n_pairs,
//
//   y[p*rows + r] = sum_c W_{ids[p]}[r][c] * x[(p / x_div)*cols + c]      r < rows, c < cols
//   W_e = w + e * rows * RowBytes(type, cols)      (n_expert matrices back to back: [cols, rows,
//                                                   n_expert], the GGUF expert tensor)
//
// x: [ceil(n_pairs / x_div) x cols] f32 (x_div = k: one hidden row per token for its k pairs;
// x_div = 1: one row per pair), y: [n_pairs x rows] f32, ids: [n_pairs] int32, all device memory.
// The pair index is the kernel's batch index and ids[p] is read on the device (the router's
// output; the host never sees it). An id outside [0, n_expert) reads no weights: that pair's
// `rows` floats of y are all set to NaN, so that a routing bug shows in the result (and in
// whatever sums it) instead of reading past the expert tensor.
//
// Each pair reads its expert's whole matrix: with many pairs (prefill, n_pairs = tokens * k, e.g.
// 512 * 8 = 4096) an expert chosen by several tokens is read once per pair. That is accepted for
// now; a grouped GEMM (pairs sorted by expert) would read each expert once.
inline constexpr int64_t kQGemvMaxPairs = int64_t{1} << 24;  // launched in chunks of grid.y

// Checks the arguments of QuantGemvIds without touching the GPU: CheckQuantGemvArgs' rules with
// n_tok = 1 (type, cols a positive multiple of the block size, rows, x 16-byte aligned: the rows
// of x then all start 16-byte aligned, since cols is a multiple of 32 floats, as the kernel's
// float4 loads need), and InvalidArgument, naming the value, for cols > 2^36, n_expert outside
// [1, 2^31 - 1] (ids are int32), n_expert matrices spanning 2^63 bytes or more, n_pairs outside [0,
// kQGemvMaxPairs], x_div < 1, or ids null when n_pairs > 0. The ids' values are not checked here
// (they are on the device; see above).
Status CheckQuantGemvIdsArgs(GgmlType type, int64_t rows, int64_t cols, int64_t n_expert,
                             const int32_t* ids, int64_t n_pairs, const float* x, int64_t x_div);

// Enqueues the n_pairs products on `stream` (asynchronous; w needs no alignment; y must not
// overlap x; n_pairs = 0 queues nothing). Returns CheckQuantGemvIdsArgs' error, if any, before
// any CUDA call.
Status QuantGemvIds(GgmlType type, const void* w, int64_t rows, int64_t cols, int64_t n_expert,
                    const int32_t* ids, int64_t n_pairs, const float* x, int64_t x_div, float* y,
                    Stream stream);

}  // namespace moesplit::gpu
