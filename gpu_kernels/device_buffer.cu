#include "gpu_kernels/cuda_check.h"
#include "gpu_kernels/device_buffer.h"

namespace moesplit::gpu {

StatusOr<DeviceBuffer> DeviceBuffer::Alloc(size_t bytes) {
  DeviceBuffer b;
  if (bytes == 0) return b;
  const cudaError_t err = cudaMalloc(&b.ptr_, bytes);
  if (err != cudaSuccess) {
    (void)cudaGetLastError();
    size_t free_b = 0, total_b = 0;
    (void)cudaMemGetInfo(&free_b, &total_b);
    (void)cudaGetLastError();
    return FailedPreconditionError("cudaMalloc of ", bytes, " bytes failed (",
                                   cudaGetErrorString(err), "); device memory free ", free_b,
                                   " of ", total_b, " bytes");
  }
  b.bytes_ = bytes;
  return b;
}

// Unchecked frees: after a kernel fault every CUDA call returns that (sticky) error, which the
// op or Synchronize that met it has reported; a destructor must not abort on it.
DeviceBuffer::~DeviceBuffer() {
  if (ptr_ != nullptr) (void)cudaFree(ptr_);
}

DeviceBuffer::DeviceBuffer(DeviceBuffer&& o) noexcept : ptr_(o.ptr_), bytes_(o.bytes_) {
  o.ptr_ = nullptr;
  o.bytes_ = 0;
}

DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& o) noexcept {
  if (this != &o) {
    if (ptr_ != nullptr) (void)cudaFree(ptr_);
    ptr_ = o.ptr_;
    bytes_ = o.bytes_;
    o.ptr_ = nullptr;
    o.bytes_ = 0;
  }
  return *this;
}

Status DeviceBuffer::CopyFromHost(const void* src, size_t bytes) {
  MOESPLIT_CHECK(bytes <= bytes_, bytes, " > ", bytes_);
  if (bytes == 0) return Status::Ok();
  CUDA_RETURN_IF_ERROR(cudaMemcpy(ptr_, src, bytes, cudaMemcpyHostToDevice));
  return Status::Ok();
}

Status DeviceBuffer::CopyToHost(void* dst, size_t bytes) const {
  MOESPLIT_CHECK(bytes <= bytes_, bytes, " > ", bytes_);
  if (bytes == 0) return Status::Ok();
  CUDA_RETURN_IF_ERROR(cudaMemcpy(dst, ptr_, bytes, cudaMemcpyDeviceToHost));
  return Status::Ok();
}

Status DeviceBuffer::Fill(uint8_t value) {
  if (bytes_ == 0) return Status::Ok();
  CUDA_RETURN_IF_ERROR(cudaMemset(ptr_, value, bytes_));
  return Status::Ok();
}

Status Synchronize(Stream stream) {
  CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream));
  return Status::Ok();
}

}  // namespace moesplit::gpu
