// Prefill matrix products with quantized weights on the GPU (plain C++ interface):
//
//   Y[t][r] = sum_c X[t][c] * W[r][c]     (Y = X * W^T), t < n_tok, r < rows, c < cols
//
// W (rows x cols of a GGUF type, row stride RowBytes(type, cols)) is dequantized to BF16 in
// chunks of rows, X (n_tok x cols f32) is rounded to BF16 once, and cuBLAS multiplies them on the
// tensor cores with f32 accumulation into Y (n_tok x rows f32, row-major). Each product is
// rounded only through its BF16 inputs (relative 2^-8 each), so Y agrees with an exact product
// of the f32 inputs to ~1e-2 * sum |w * x|.
//
//   MOESPLIT_ASSIGN_OR_RETURN(auto gemm, gpu::GemmContext::Create(stream));
//   MOESPLIT_RETURN_IF_ERROR(gemm->QuantGemm(GgmlType::kQ4_K, w, rows, cols, x, n_tok, y));
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

#include "core/base/dtype.h"
#include "core/base/status.h"
#include "gpu_kernels/device_buffer.h"

struct cublasContext;  // cuBLAS's handle object (cublasHandle_t is cublasContext*)

namespace moesplit::gpu {

class GemmContext {
 public:
  // The default bound of the BF16 copy of W: 64 MiB = 4096 rows of 8192 values.
  static constexpr size_t kDefaultWeightScratchBytes = size_t{64} << 20;

  // A cuBLAS handle bound to `stream`; every product runs on that stream. The BF16 copy of W
  // holds at most max(weight_scratch_bytes, one row) bytes: larger matrices are done in chunks
  // of rows. Errors: no device, cuBLAS cannot initialize.
  static StatusOr<std::unique_ptr<GemmContext>> Create(
      Stream stream, size_t weight_scratch_bytes = kDefaultWeightScratchBytes);
  ~GemmContext();
  GemmContext(const GemmContext&) = delete;
  GemmContext& operator=(const GemmContext&) = delete;

  // QuantGemm's argument checks, without a GPU: InvalidArgument for a type GpuDequantSupports
  // rejects, cols not a multiple of its block size, or rows / cols / n_tok outside [1, 2^31 - 1]
  // (cuBLAS takes int dimensions). Each message names the value and what is allowed.
  static Status CheckArgs(GgmlType type, int64_t rows, int64_t cols, int64_t n_tok);

  // Y = X * W^T on stream() (asynchronous; w, x, y are device pointers, w needs no alignment).
  // Errors: CheckArgs', out of device memory for the scratch buffers.
  Status QuantGemm(GgmlType type, const void* w, int64_t rows, int64_t cols, const float* x,
                   int64_t n_tok, float* y);

  Stream stream() const { return stream_; }

 private:
  GemmContext(Stream stream, cublasContext* handle, size_t weight_scratch_bytes);
  // Grows `buf` to at least `bytes` (contents are not kept).
  static Status Reserve(DeviceBuffer& buf, size_t bytes);

  Stream stream_;
  cublasContext* handle_;
  size_t weight_scratch_bytes_;
  DeviceBuffer x_bf16_;  // n_tok x cols
  DeviceBuffer w_bf16_;  // chunk rows x cols
};

}  // namespace moesplit::gpu
