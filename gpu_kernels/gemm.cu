// Prefill GEMM: dequantize W to BF16 in row chunks, round X to BF16, cublasGemmEx (BF16 inputs,
// f32 compute and output, tensor cores).
//
// Layout: cuBLAS is column-major. Row-major Y (n_tok x rows, leading dimension rows) is the
// column-major rows x n_tok matrix Y^T, and Y^T = W * X^T. A row-major chunk Wc (m rows x cols)
// is the column-major cols x m matrix Wc^T, and row-major X (n_tok x cols) the column-major
// cols x n_tok matrix X^T. So for rows [r0, r0 + m):
//   Y^T[r0 .. r0 + m) = op_T(Wc^T) * op_N(X^T):  m x n_tok, k = cols,
//   A = Wc (lda = cols), B = X (ldb = cols), C = y + r0 (ldc = rows).
// The chunks are enqueued one after another on the one stream, so a single scratch buffer
// suffices: dequantizing chunk i + 1 starts after the product of chunk i is done with it.
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <climits>
#include <cstdint>

#include "gpu_kernels/cuda_check.h"
#include "gpu_kernels/dequant.h"
#include "gpu_kernels/gemm.h"
#include "gpu_kernels/quant_blocks_hd.h"

// A failed cuBLAS call that the caller cannot cause (bad arguments were rejected before):
// abort with the call and cuBLAS's status name.
#define CUBLAS_CHECK(expr)                                                    \
  do {                                                                        \
    const cublasStatus_t moesplit_cublas_st_ = (expr);                        \
    MOESPLIT_CHECK(moesplit_cublas_st_ == CUBLAS_STATUS_SUCCESS, #expr, ": ", \
                   cublasGetStatusName(moesplit_cublas_st_), " (",            \
                   cublasGetStatusString(moesplit_cublas_st_), ")");          \
  } while (0)

namespace moesplit::gpu {

GemmContext::GemmContext(Stream stream, cublasContext* handle, size_t weight_scratch_bytes)
    : stream_(stream), handle_(handle), weight_scratch_bytes_(weight_scratch_bytes) {}

StatusOr<std::unique_ptr<GemmContext>> GemmContext::Create(Stream stream,
                                                           size_t weight_scratch_bytes) {
  cublasHandle_t handle = nullptr;
  // Creating the handle fails without a device or out of memory: the user's problem, a Status.
  const cublasStatus_t st = cublasCreate(&handle);
  if (st != CUBLAS_STATUS_SUCCESS) {
    (void)cudaGetLastError();
    return FailedPreconditionError("cublasCreate failed: ", cublasGetStatusName(st), " (",
                                   cublasGetStatusString(st), ")");
  }
  CUBLAS_CHECK(cublasSetStream(handle, stream));
  return std::unique_ptr<GemmContext>(new GemmContext(stream, handle, weight_scratch_bytes));
}

// Unchecked, as ~DeviceBuffer: after a device fault cuBLAS returns it here again.
GemmContext::~GemmContext() {
  if (handle_ != nullptr) (void)cublasDestroy(handle_);
}

Status GemmContext::CheckArgs(GgmlType type, int64_t rows, int64_t cols, int64_t n_tok) {
  if (!GpuDequantSupports(type)) {
    return InvalidArgumentError("QuantGemm: weight type ", TypeName(type),
                                " is not supported (", kHdDecodableTypes, " are)");
  }
  const int64_t bv = HdIsPlainFloat(type) ? 1 : HdBlockValues(type);
  if (cols < 1 || cols > INT_MAX || cols % bv != 0) {
    return InvalidArgumentError("QuantGemm: cols = ", cols, " must be a multiple of ", bv, " for ",
                                TypeName(type), " in [1, ", INT_MAX, "]");
  }
  if (rows < 1 || rows > INT_MAX) {
    return InvalidArgumentError("QuantGemm: rows = ", rows, " must be in [1, ", INT_MAX, "]");
  }
  if (n_tok < 1 || n_tok > INT_MAX) {
    return InvalidArgumentError("QuantGemm: n_tok = ", n_tok, " must be in [1, ", INT_MAX, "]");
  }
  return Status::Ok();
}

Status GemmContext::Reserve(DeviceBuffer& buf, size_t bytes) {
  if (buf.size() >= bytes) return Status::Ok();
  // Free first (the old and new buffers need not fit together). cudaFree waits for the device,
  // so work still reading the old buffer finishes before it goes.
  buf = DeviceBuffer();
  MOESPLIT_ASSIGN_OR_RETURN(buf, DeviceBuffer::Alloc(bytes));
  return Status::Ok();
}

Status GemmContext::QuantGemm(GgmlType type, const void* w, int64_t rows, int64_t cols,
                              const float* x, int64_t n_tok, float* y) {
  MOESPLIT_RETURN_IF_ERROR(CheckArgs(type, rows, cols, n_tok));
  const size_t row_bf16_bytes = static_cast<size_t>(cols) * 2;
  // Rows per chunk: as many as fit the scratch bound, at least one, at most all.
  const int64_t chunk =
      std::clamp<int64_t>(static_cast<int64_t>(weight_scratch_bytes_ / row_bf16_bytes), 1, rows);
  MOESPLIT_RETURN_IF_ERROR(Reserve(x_bf16_, static_cast<size_t>(n_tok) * row_bf16_bytes));
  MOESPLIT_RETURN_IF_ERROR(Reserve(w_bf16_, static_cast<size_t>(chunk) * row_bf16_bytes));
  auto* xb = x_bf16_.as<uint16_t>();
  auto* wb = w_bf16_.as<uint16_t>();
  MOESPLIT_RETURN_IF_ERROR(ConvertF32ToBf16(x, n_tok * cols, xb, stream_));

  const float alpha = 1.0f;
  const float beta = 0.0f;
  for (int64_t r0 = 0; r0 < rows; r0 += chunk) {
    const int64_t m = std::min(chunk, rows - r0);
    MOESPLIT_RETURN_IF_ERROR(DequantizeRowsToBf16(type, w, rows, cols, r0, r0 + m, wb, stream_));
    CUBLAS_CHECK(cublasGemmEx(handle_, CUBLAS_OP_T, CUBLAS_OP_N, static_cast<int>(m),
                              static_cast<int>(n_tok), static_cast<int>(cols), &alpha, wb,
                              CUDA_R_16BF, static_cast<int>(cols), xb, CUDA_R_16BF,
                              static_cast<int>(cols), &beta, y + r0, CUDA_R_32F,
                              static_cast<int>(rows), CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
  }
  return Status::Ok();
}

}  // namespace moesplit::gpu
