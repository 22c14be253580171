// cuBLAS on the emulated device: a reference GEMM (double accumulation, then rounded to C's type)
// queued on the handle's stream, behind cuBLAS's documented argument checks, so that a call the
// real library would refuse is refused here with the same status.
#include <cublas_v2.h>

#include <cstring>
#include <memory>
#include <vector>

#include "core/base/float16.h"
#include "gpu_kernels/emu/runtime.h"

struct cublasContext {
  cudaStream_t stream = nullptr;
};

using moesplit::emu::Device;

namespace {

size_t TypeBytes(cudaDataType_t t) {
  switch (t) {
    case CUDA_R_32F:
      return 4;
    case CUDA_R_16F:
    case CUDA_R_16BF:
      return 2;
    default:
      return 0;
  }
}

double Load(const void* p, cudaDataType_t t, size_t i) {
  switch (t) {
    case CUDA_R_32F:
      return static_cast<const float*>(p)[i];
    case CUDA_R_16F:
      return moesplit::Fp16ToFp32(static_cast<const uint16_t*>(p)[i]);
    default:  // CUDA_R_16BF
      return moesplit::Bf16ToFp32(static_cast<const uint16_t*>(p)[i]);
  }
}

void Store(void* p, cudaDataType_t t, size_t i, double v) {
  const float f = static_cast<float>(v);
  switch (t) {
    case CUDA_R_32F:
      static_cast<float*>(p)[i] = f;
      break;
    case CUDA_R_16F:
      static_cast<uint16_t*>(p)[i] = moesplit::Fp32ToFp16(f);
      break;
    default:
      static_cast<uint16_t*>(p)[i] = moesplit::Fp32ToBf16(f);
  }
}

// cublasGemmEx's supported (A/B type, C type, compute type) combinations with f32 compute
// (cuBLAS documentation, "cublasGemmEx"): A and B of the same type.
bool Supported(cudaDataType_t a, cudaDataType_t b, cudaDataType_t c, cublasComputeType_t ct) {
  if (ct != CUBLAS_COMPUTE_32F && ct != CUBLAS_COMPUTE_32F_FAST_16BF &&
      ct != CUBLAS_COMPUTE_32F_FAST_TF32) {
    return false;
  }
  if (a != b) return false;
  if (a == CUDA_R_32F) return c == CUDA_R_32F;
  if (a == CUDA_R_16BF) return c == CUDA_R_16BF || c == CUDA_R_32F;
  if (a == CUDA_R_16F) return c == CUDA_R_16F || c == CUDA_R_32F;
  return false;
}

// Device pointers must lie in device allocations of the size the arguments imply.
bool InDevice(const void* p, size_t bytes) {
  Device& d = Device::Get();
  std::lock_guard<std::mutex> lock(d.mem_mu);
  bool partial = false;
  const auto* a = d.Find(p, bytes, &partial);
  return a != nullptr && !a->pinned;
}

}  // namespace

cublasStatus_t cublasCreate(cublasHandle_t* handle) {
  if (handle == nullptr) return CUBLAS_STATUS_INVALID_VALUE;
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess || n == 0) {
    (void)cudaGetLastError();
    return CUBLAS_STATUS_NOT_INITIALIZED;
  }
  *handle = new cublasContext();
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasDestroy(cublasHandle_t handle) {
  if (handle == nullptr) return CUBLAS_STATUS_NOT_INITIALIZED;
  delete handle;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasSetStream(cublasHandle_t handle, cudaStream_t stream) {
  if (handle == nullptr) return CUBLAS_STATUS_NOT_INITIALIZED;
  handle->stream = stream;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasGetStream(cublasHandle_t handle, cudaStream_t* stream) {
  if (handle == nullptr) return CUBLAS_STATUS_NOT_INITIALIZED;
  *stream = handle->stream;
  return CUBLAS_STATUS_SUCCESS;
}

const char* cublasGetStatusName(cublasStatus_t s) {
  switch (s) {
    case CUBLAS_STATUS_SUCCESS:
      return "CUBLAS_STATUS_SUCCESS";
    case CUBLAS_STATUS_NOT_INITIALIZED:
      return "CUBLAS_STATUS_NOT_INITIALIZED";
    case CUBLAS_STATUS_ALLOC_FAILED:
      return "CUBLAS_STATUS_ALLOC_FAILED";
    case CUBLAS_STATUS_INVALID_VALUE:
      return "CUBLAS_STATUS_INVALID_VALUE";
    case CUBLAS_STATUS_ARCH_MISMATCH:
      return "CUBLAS_STATUS_ARCH_MISMATCH";
    case CUBLAS_STATUS_MAPPING_ERROR:
      return "CUBLAS_STATUS_MAPPING_ERROR";
    case CUBLAS_STATUS_EXECUTION_FAILED:
      return "CUBLAS_STATUS_EXECUTION_FAILED";
    case CUBLAS_STATUS_INTERNAL_ERROR:
      return "CUBLAS_STATUS_INTERNAL_ERROR";
    case CUBLAS_STATUS_NOT_SUPPORTED:
      return "CUBLAS_STATUS_NOT_SUPPORTED";
  }
  return "CUBLAS_STATUS_UNKNOWN";
}

const char* cublasGetStatusString(cublasStatus_t s) {
  switch (s) {
    case CUBLAS_STATUS_SUCCESS:
      return "success";
    case CUBLAS_STATUS_NOT_INITIALIZED:
      return "the library was not initialized";
    case CUBLAS_STATUS_INVALID_VALUE:
      return "an invalid numeric value was used as an argument";
    case CUBLAS_STATUS_NOT_SUPPORTED:
      return "the functionality requested is not supported";
    case CUBLAS_STATUS_EXECUTION_FAILED:
      return "the GPU program failed to execute";
    default:
      return cublasGetStatusName(s);
  }
}

cublasStatus_t cublasGemmEx(cublasHandle_t handle, cublasOperation_t transa,
                            cublasOperation_t transb, int m, int n, int k, const void* alpha,
                            const void* A, cudaDataType_t a_type, int lda, const void* B,
                            cudaDataType_t b_type, int ldb, const void* beta, void* C,
                            cudaDataType_t c_type, int ldc, cublasComputeType_t compute_type,
                            cublasGemmAlgo_t algo) {
  if (handle == nullptr) return CUBLAS_STATUS_NOT_INITIALIZED;
  const auto op_ok = [](cublasOperation_t o) {
    return o == CUBLAS_OP_N || o == CUBLAS_OP_T || o == CUBLAS_OP_C;
  };
  // cuBLAS's rules: m, n, k >= 0; lda >= max(1, rows of A as stored), likewise ldb, ldc.
  const int a_rows = transa == CUBLAS_OP_N ? m : k;
  const int b_rows = transb == CUBLAS_OP_N ? k : n;
  if (!op_ok(transa) || !op_ok(transb) || m < 0 || n < 0 || k < 0 || lda < std::max(1, a_rows) ||
      ldb < std::max(1, b_rows) || ldc < std::max(1, m) || alpha == nullptr || beta == nullptr) {
    return CUBLAS_STATUS_INVALID_VALUE;
  }
  if (!Supported(a_type, b_type, c_type, compute_type)) return CUBLAS_STATUS_NOT_SUPPORTED;
  if (algo != CUBLAS_GEMM_DEFAULT && algo != CUBLAS_GEMM_DEFAULT_TENSOR_OP) {
    return CUBLAS_STATUS_INVALID_VALUE;
  }
  if (m == 0 || n == 0) return CUBLAS_STATUS_SUCCESS;
  const float al = *static_cast<const float*>(alpha), be = *static_cast<const float*>(beta);
  const int a_cols = transa == CUBLAS_OP_N ? k : m;
  const int b_cols = transb == CUBLAS_OP_N ? n : k;
  const size_t a_span = k == 0 ? 0 : (size_t(a_cols) - 1) * lda + a_rows;
  const size_t b_span = k == 0 ? 0 : (size_t(b_cols) - 1) * ldb + b_rows;
  const size_t c_span = (size_t(n) - 1) * ldc + m;
  // A kernel reading host memory or past an allocation faults on a GPU: here it is refused (the
  // real cuBLAS would fail later with an illegal address, a sticky error).
  if ((a_span > 0 && !InDevice(A, a_span * TypeBytes(a_type))) ||
      (b_span > 0 && !InDevice(B, b_span * TypeBytes(b_type))) ||
      !InDevice(C, c_span * TypeBytes(c_type))) {
    Device::Get().SetSticky(cudaErrorLaunchFailure,
                            "cublasGemmEx: A, B or C is not (entirely) device memory");
    return CUBLAS_STATUS_EXECUTION_FAILED;
  }
  const bool ta = transa != CUBLAS_OP_N, tb = transb != CUBLAS_OP_N;
  Device::Get().Push(handle->stream, [=] {
    for (int j = 0; j < n; ++j) {
      for (int i = 0; i < m; ++i) {
        double acc = 0.0;
        for (int p = 0; p < k; ++p) {
          const size_t ai = ta ? size_t(i) * lda + p : size_t(p) * lda + i;
          const size_t bi = tb ? size_t(p) * ldb + j : size_t(j) * ldb + p;
          acc += Load(A, a_type, ai) * Load(B, b_type, bi);
        }
        const size_t ci = size_t(j) * ldc + i;
        double v = double(al) * acc;
        if (be != 0.0f) v += double(be) * Load(C, c_type, ci);
        Store(C, c_type, ci, v);
      }
    }
  });
  return CUBLAS_STATUS_SUCCESS;
}
