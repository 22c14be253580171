// CUDA device discovery. Plain C++ interface (no CUDA headers) so that code built without CUDA
// can include it; the implementation exists only in CUDA builds (MOESPLIT_HAVE_CUDA).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/base/status.h"

namespace moesplit::gpu {

struct DeviceInfo {
  int index = 0;
  std::string name;  // "NVIDIA H100 80GB HBM3"
  int cc_major = 0;  // compute capability, e.g. 9.0 for H100
  int cc_minor = 0;
  uint64_t total_bytes = 0;  // device memory
  uint64_t free_bytes = 0;   // free at query time (with_free_memory only; else 0)
  int sm_count = 0;
  int pci_bus = 0;
};

// Lists the CUDA devices visible to this process. An empty list (not an error) when the driver
// reports no device; an error when the CUDA runtime itself fails (e.g. driver/runtime mismatch),
// with the CUDA error string. with_free_memory also reads each device's free memory, which
// creates a CUDA context (~300-500 MiB) on every device for the rest of the process: only for
// `moesplit version`; the engine asks its own device (CudaBackend::DeviceBytesFree).
StatusOr<std::vector<DeviceInfo>> ListDevices(bool with_free_memory = false);

// The CUDA runtime version this binary was built with, e.g. "13.0".
std::string RuntimeVersionString();

}  // namespace moesplit::gpu
