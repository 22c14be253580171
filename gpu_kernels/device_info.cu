#include <cuda_runtime.h>

#include "gpu_kernels/device_info.h"

namespace moesplit::gpu {

StatusOr<std::vector<DeviceInfo>> ListDevices(bool with_free_memory) {
  int n = 0;
  cudaError_t err = cudaGetDeviceCount(&n);
  // No driver / no device is the normal state of a CPU-only machine, not an error.
  if (err == cudaErrorNoDevice || err == cudaErrorInsufficientDriver) {
    (void)cudaGetLastError();
    return std::vector<DeviceInfo>{};
  }
  if (err != cudaSuccess) {
    return FailedPreconditionError("cudaGetDeviceCount failed: ", cudaGetErrorString(err));
  }
  std::vector<DeviceInfo> out;
  for (int i = 0; i < n; ++i) {
    cudaDeviceProp p{};
    err = cudaGetDeviceProperties(&p, i);
    if (err != cudaSuccess) {
      return FailedPreconditionError("cudaGetDeviceProperties(", i,
                                     ") failed: ", cudaGetErrorString(err));
    }
    DeviceInfo d;
    d.index = i;
    d.name = p.name;
    d.cc_major = p.major;
    d.cc_minor = p.minor;
    d.total_bytes = p.totalGlobalMem;
    d.sm_count = p.multiProcessorCount;
    d.pci_bus = p.pciBusID;
    size_t free_b = 0, total_b = 0;
    if (with_free_memory) {
      if (cudaSetDevice(i) == cudaSuccess && cudaMemGetInfo(&free_b, &total_b) == cudaSuccess) {
        d.free_bytes = free_b;
      } else {
        (void)cudaGetLastError();
      }
    }
    out.push_back(std::move(d));
  }
  if (with_free_memory && n > 0) (void)cudaSetDevice(0);  // leave the default device current
  return out;
}

std::string RuntimeVersionString() {
  int v = 0;
  if (cudaRuntimeGetVersion(&v) != cudaSuccess) return "unknown";
  return StrCat(v / 1000, ".", (v % 1000) / 10);
}

}  // namespace moesplit::gpu
