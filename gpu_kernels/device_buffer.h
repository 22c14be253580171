// Device memory owned by one object, and the stream type, behind a plain C++ interface (no CUDA
// headers) so that tests and the engine can hold GPU buffers without being compiled by nvcc.
//
//   MOESPLIT_ASSIGN_OR_RETURN(gpu::DeviceBuffer x, gpu::DeviceBuffer::Alloc(n * sizeof(float)));
//   MOESPLIT_RETURN_IF_ERROR(x.CopyFromHost(host.data(), n * sizeof(float)));
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/base/status.h"

struct CUstream_st;  // the CUDA runtime's stream object (cudaStream_t is CUstream_st*)

namespace moesplit::gpu {

using Stream = CUstream_st*;  // nullptr = the legacy default stream

class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  // cudaMalloc of `bytes` (0 allowed: an empty buffer). Errors: out of device memory (with the
  // size asked for and what is free), no device.
  static StatusOr<DeviceBuffer> Alloc(size_t bytes);
  ~DeviceBuffer();
  DeviceBuffer(DeviceBuffer&& o) noexcept;
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  void* data() const { return ptr_; }
  template <typename T>
  T* as() const {
    return static_cast<T*>(ptr_);
  }
  size_t size() const { return bytes_; }

  // Synchronous copies of `bytes` (<= size(), CHECKed) from / to host memory.
  Status CopyFromHost(const void* src, size_t bytes);
  Status CopyToHost(void* dst, size_t bytes) const;
  // Fills every byte with `value` (tests poison outputs with 0xFF: NaN in f32/f16/bf16).
  Status Fill(uint8_t value);

 private:
  void* ptr_ = nullptr;
  size_t bytes_ = 0;
};

// Waits for all work on `stream`; a kernel fault surfaces here as an error with CUDA's message.
Status Synchronize(Stream stream);

}  // namespace moesplit::gpu
