// Whole-row decoding of GGUF weights on the GPU (plain C++ interface): BF16 tiles of a weight
// matrix for the prefill GEMM, the embedding lookup, and the f32 -> bf16 conversion of
// activations. Every value is decoded bit-exactly as cpu_kernels' DequantizeRow (the BF16
// outputs are that float rounded to nearest even). All calls are asynchronous on `stream`; all
// pointers are device pointers; weights need no alignment.
#pragma once

#include <cstdint>

#include "core/base/dtype.h"
#include "core/base/status.h"
#include "gpu_kernels/device_buffer.h"

namespace moesplit::gpu {

// The types of quant_blocks_hd.h (kHdDecodableTypes: the legacy blocks, IQ4_NL, the K-quants,
// IQ4_XS, F32, F16, BF16).
bool GpuDequantSupports(GgmlType type);

// Argument checks of the calls below, without touching the GPU (InvalidArgument naming the value
// and what is allowed): supported type, cols >= 1 and a multiple of the block size, 0 <= r0 <=
// r1 <= rows, and for the quantized types a 16-byte aligned output (vector stores).
Status CheckDequantizeRowsArgs(GgmlType type, int64_t rows, int64_t cols, int64_t r0, int64_t r1,
                               const void* out);
Status CheckGetRowsArgs(GgmlType type, int64_t cols, int64_t n, const void* out);

// out[(r - r0) * cols + c] = bf16(W[r][c]) for r0 <= r < r1, as raw bf16 bits. W is `rows`
// rows of `cols` values of `type` (row stride RowBytes(type, cols)). r0 == r1 does nothing.
Status DequantizeRowsToBf16(GgmlType type, const void* w, int64_t rows, int64_t cols, int64_t r0,
                            int64_t r1, uint16_t* out, Stream stream);

// Embedding lookup: out[i * cols + c] = W[ids[i]][c] (f32) for i < n. ids (int32, on the device)
// must be valid row indices: checking them is the caller's job. n == 0 does nothing.
Status GetRows(GgmlType type, const void* w, int64_t cols, const int32_t* ids, int64_t n,
               float* out, Stream stream);

// out[i] = bf16(x[i]) for i < n, round to nearest even (NaN stays NaN).
Status ConvertF32ToBf16(const float* x, int64_t n, uint16_t* out, Stream stream);

}  // namespace moesplit::gpu
