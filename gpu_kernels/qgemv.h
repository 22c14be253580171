// Decode-time matrix-vector products with quantized weights on the GPU (plain C++ interface).
//
//   y[t][r] = sum_c W[r][c] * x[t][c]     t < n_tok (1..8), r < rows, c < cols
//
// W is `rows` GGUF rows of `cols` values of `type`, back to back (row stride RowBytes(type,
// cols)); x is n_tok x cols f32 and y n_tok x rows f32, both row-major and contiguous. Every
// weight row is read once for all n_tok tokens. Accumulation is in f32 in an order different
// from the CPU's, so results agree with a double-precision reference to ~1e-4 * sum |w * x|.
#pragma once

#include <cstdint>

#include "core/base/dtype.h"
#include "core/base/status.h"
#include "gpu_kernels/device_buffer.h"

namespace moesplit::gpu {

inline constexpr int kQGemvMaxTokens = 8;

// True for the weight types QuantGemv accepts: Q4_0, Q5_0, Q8_0, Q4_K, Q5_K, Q6_K, F32, F16,
// BF16.
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

}  // namespace moesplit::gpu
