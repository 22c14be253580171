// CUDA error handling, for .cu files only (needs cuda_runtime.h).
//   CUDA_CHECK(cudaMemsetAsync(...));          a failure is a broken invariant: abort with the call
//   CUDA_RETURN_IF_ERROR(cudaMalloc(&p, n));   a failure the user can cause (out of VRAM): Status
#pragma once

#include <cuda_runtime.h>

#include "core/base/status.h"

#define CUDA_CHECK(expr)                                                                  \
  do {                                                                                    \
    const cudaError_t moesplit_cuda_err_ = (expr);                                        \
    MOESPLIT_CHECK(moesplit_cuda_err_ == cudaSuccess, #expr, ": ",                        \
                   cudaGetErrorName(moesplit_cuda_err_), " (",                             \
                   cudaGetErrorString(moesplit_cuda_err_), ")");                          \
  } while (0)

#define CUDA_RETURN_IF_ERROR(expr)                                                         \
  do {                                                                                     \
    const cudaError_t moesplit_cuda_err_ = (expr);                                         \
    if (moesplit_cuda_err_ != cudaSuccess) {                                               \
      (void)cudaGetLastError(); /* clear the sticky-free error state for the next call */ \
      return ::moesplit::FailedPreconditionError(#expr, " failed: ",                       \
                                                 cudaGetErrorString(moesplit_cuda_err_));  \
    }                                                                                      \
  } while (0)

// After a kernel launch: launch-configuration errors surface here, not at the <<<>>> line.
#define CUDA_CHECK_LAUNCH() CUDA_CHECK(cudaGetLastError())
