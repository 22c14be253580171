// For tests that run CUDA kernels: they skip, saying why, where no CUDA device is visible (CI and
// the development machines have nvcc but no GPU), and run on the GPU machine.
//
//   TEST(GpuRmsNorm, MatchesCpu) { MOESPLIT_SKIP_WITHOUT_GPU(); ... }
#pragma once

#include <gtest/gtest.h>

#include "gpu_kernels/device_info.h"

#define MOESPLIT_SKIP_WITHOUT_GPU()                                                            \
  do {                                                                                         \
    auto moesplit_devices_ = ::moesplit::gpu::ListDevices();                                   \
    if (!moesplit_devices_.ok()) {                                                             \
      GTEST_SKIP() << "no usable CUDA device (" << moesplit_devices_.status().ToString()      \
                   << "): this GPU test runs only on a machine with an NVIDIA GPU";            \
    }                                                                                          \
    if (moesplit_devices_->empty()) {                                                          \
      GTEST_SKIP() << "no CUDA device visible: this GPU test runs only on a machine with an " \
                      "NVIDIA GPU";                                                            \
    }                                                                                          \
  } while (0)
