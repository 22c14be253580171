// CUDA error handling, for .cu files only (needs cuda_runtime.h).
//   CUDA_CHECK(cudaMemsetAsync(...));          a failure is a broken invariant: abort with the call
//   CUDA_RETURN_IF_ERROR(cudaMalloc(&p, n));   a failure the user can cause (out of VRAM): Status
#pragma once

#include <cuda_runtime.h>

#include "core/base/status.h"

#define CUDA_CHECK(expr)                                           \
  do {                                                             \
    const cudaError_t moesplit_cuda_err_ = (expr);                 \
    MOESPLIT_CHECK(moesplit_cuda_err_ == cudaSuccess, #expr, ": ", \
                   cudaGetErrorName(moesplit_cuda_err_), " (",     \
                   cudaGetErrorString(moesplit_cuda_err_), ")");   \
  } while (0)

#define CUDA_RETURN_IF_ERROR(expr)                                                        \
  do {                                                                                    \
    const cudaError_t moesplit_cuda_err_ = (expr);                                        \
    if (moesplit_cuda_err_ != cudaSuccess) {                                              \
      (void)cudaGetLastError(); /* clear the sticky-free error state for the next call */ \
      return ::moesplit::FailedPreconditionError(                                         \
          #expr, " failed: ", cudaGetErrorString(moesplit_cuda_err_));                    \
    }                                                                                     \
  } while (0)

// After a kernel launch, in a function returning Status: launch-configuration errors surface
// here, not at the <<<>>> line, and so does an earlier kernel's fault (a sticky error: every
// later call returns it). A Status, not an abort: the fault is the caller's to report (the
// hybrid pass stops with it), and the process must get as far as printing it.
#define CUDA_CHECK_LAUNCH() CUDA_RETURN_IF_ERROR(cudaGetLastError())
