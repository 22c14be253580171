// The emulated device's memory: device allocations are host memory (operator new, so ASan sees
// every out-of-bounds access of a kernel or a copy), poisoned with 0xFF (NaN in f32 / f16 / bf16)
// when allocated, as a first GPU run would find them uninitialised. Copies check their direction
// against what each pointer is (device, pinned host, pageable host) and run in stream order;
// from pageable memory they follow CUDA's staging rules (see CopyOp).
#include <cstring>
#include <memory>
#include <new>
#include <vector>

#include "gpu_kernels/emu/runtime.h"

namespace moesplit::emu {
void SynchronizeDevice();  // runtime.cc

const Allocation* Device::Find(const void* p, size_t n, bool* partial) {
  *partial = false;
  const uintptr_t a = reinterpret_cast<uintptr_t>(p);
  auto it = allocs.upper_bound(a);
  if (it == allocs.begin()) return nullptr;
  --it;
  if (a >= it->first + it->second.bytes) return nullptr;
  if (a + n > it->first + it->second.bytes) {
    *partial = true;
    return nullptr;
  }
  return &it->second;
}

size_t DeviceBytesInUse() {
  std::lock_guard<std::mutex> lock(Device::Get().mem_mu);
  return Device::Get().used;
}

}  // namespace moesplit::emu

using moesplit::emu::Allocation;
using moesplit::emu::Device;

namespace {

constexpr std::align_val_t kAlign{256};  // cudaMalloc's alignment

enum class Space { kDevice, kPinned, kPageable, kBad };

// What [p, p + n) is: inside one device allocation, one pinned host allocation, neither
// (pageable host memory), or partly inside an allocation (an overrun: kBad).
Space SpaceOf(const void* p, size_t n) {
  Device& d = Device::Get();
  std::lock_guard<std::mutex> lock(d.mem_mu);
  bool partial = false;
  const Allocation* a = d.Find(p, n, &partial);
  if (partial) return Space::kBad;
  if (a == nullptr) return Space::kPageable;
  return a->pinned ? Space::kPinned : Space::kDevice;
}

bool IsHost(Space s) { return s == Space::kPinned || s == Space::kPageable; }

// The copy's direction against the pointers (cudaMemcpyDefault: any).
bool DirectionOk(cudaMemcpyKind kind, Space dst, Space src) {
  if (dst == Space::kBad || src == Space::kBad) return false;
  switch (kind) {
    case cudaMemcpyHostToHost:
      return IsHost(dst) && IsHost(src);
    case cudaMemcpyHostToDevice:
      return dst == Space::kDevice && IsHost(src);
    case cudaMemcpyDeviceToHost:
      return IsHost(dst) && src == Space::kDevice;
    case cudaMemcpyDeviceToDevice:
      return dst == Space::kDevice && src == Space::kDevice;
    case cudaMemcpyDefault:
      return true;
  }
  return false;
}

// A (2D) copy of `height` rows of `width` bytes. The rules of CUDA's API-sync behaviour:
//   - from pageable host memory the source is staged when the call is made (the caller may
//     reuse it at once), the device write happens in stream order;
//   - to pageable host memory the call returns once the copy is done;
//   - between device memory and pinned host memory the copy is fully asynchronous: the host must
//     not touch the buffer before the stream has reached it (that is what the tests check).
cudaError_t CopyOp(void* dst, size_t dpitch, const void* src, size_t spitch, size_t width,
                   size_t height, cudaMemcpyKind kind, cudaStream_t stream, bool sync) {
  EMU_ENTER();
  if (width > dpitch || width > spitch) return Device::Get().Fail(cudaErrorInvalidPitchValue);
  if (width == 0 || height == 0) return cudaSuccess;
  if (dst == nullptr || src == nullptr) return Device::Get().Fail(cudaErrorInvalidValue);
  const size_t dspan = dpitch * (height - 1) + width, sspan = spitch * (height - 1) + width;
  const Space ds = SpaceOf(dst, dspan), ss = SpaceOf(src, sspan);
  if (!DirectionOk(kind, ds, ss)) {
    return Device::Get().Fail(ds == Space::kBad || ss == Space::kBad
                                  ? cudaErrorInvalidValue
                                  : cudaErrorInvalidMemcpyDirection);
  }
  std::shared_ptr<std::vector<uint8_t>> staged;
  const uint8_t* from = static_cast<const uint8_t*>(src);
  size_t from_pitch = spitch;
  if (ss == Space::kPageable) {
    staged = std::make_shared<std::vector<uint8_t>>(width * height);
    for (size_t r = 0; r < height; ++r) {
      std::memcpy(staged->data() + r * width, from + r * spitch, width);
    }
    from = staged->data();
    from_pitch = width;
  }
  auto* to = static_cast<uint8_t*>(dst);
  const uint64_t p = Device::Get().Push(stream, [=] {
    for (size_t r = 0; r < height; ++r) std::memcpy(to + r * dpitch, from + r * from_pitch, width);
    (void)staged;  // keeps the staging copy alive until the copy ran
  });
  // The synchronous API returns early only when it staged a pageable source for the device.
  const bool wait =
      (sync && !(ss == Space::kPageable && ds == Space::kDevice)) || ds == Space::kPageable;
  if (wait) {
    auto q = Device::Get().QueueOf(stream);
    q->WaitFor(p);
    const cudaError_t s = Device::Get().Sticky();
    if (s != cudaSuccess) return Device::Get().Fail(s);
  }
  return cudaSuccess;
}

}  // namespace

cudaError_t cudaMalloc(void** ptr, size_t bytes) {
  EMU_ENTER();
  if (ptr == nullptr) return Device::Get().Fail(cudaErrorInvalidValue);
  *ptr = nullptr;
  if (bytes == 0) return cudaSuccess;
  Device& d = Device::Get();
  {
    std::lock_guard<std::mutex> lock(d.mem_mu);
    if (bytes > d.capacity - d.used) return d.Fail(cudaErrorMemoryAllocation);
    d.used += bytes;
  }
  void* p = ::operator new(bytes, kAlign, std::nothrow);
  if (p == nullptr) {
    std::lock_guard<std::mutex> lock(d.mem_mu);
    d.used -= bytes;
    return d.Fail(cudaErrorMemoryAllocation);
  }
  std::memset(p, 0xFF, bytes);
  {
    std::lock_guard<std::mutex> lock(d.mem_mu);
    d.allocs[reinterpret_cast<uintptr_t>(p)] = Allocation{bytes, false};
  }
  *ptr = p;
  return cudaSuccess;
}

cudaError_t cudaFree(void* ptr) {
  if (moesplit::emu::tls_in_host_fn) return Device::Get().Fail(cudaErrorNotPermitted);
  if (ptr == nullptr) return cudaSuccess;
  moesplit::emu::SynchronizeDevice();  // cudaFree waits for the device, as CUDA's does
  Device& d = Device::Get();
  std::lock_guard<std::mutex> lock(d.mem_mu);
  auto it = d.allocs.find(reinterpret_cast<uintptr_t>(ptr));
  if (it == d.allocs.end() || it->second.pinned) return d.Fail(cudaErrorInvalidValue);
  d.used -= it->second.bytes;
  d.allocs.erase(it);
  ::operator delete(ptr, kAlign);
  return cudaSuccess;
}

cudaError_t cudaHostAlloc(void** ptr, size_t bytes, unsigned flags) {
  EMU_ENTER();
  if (ptr == nullptr || bytes == 0) return Device::Get().Fail(cudaErrorInvalidValue);
  void* p = ::operator new(bytes, kAlign, std::nothrow);
  if (p == nullptr) return Device::Get().Fail(cudaErrorMemoryAllocation);
  std::memset(p, 0xFF, bytes);
  Device& d = Device::Get();
  std::lock_guard<std::mutex> lock(d.mem_mu);
  d.allocs[reinterpret_cast<uintptr_t>(p)] = Allocation{bytes, true};
  *ptr = p;
  return cudaSuccess;
}

cudaError_t cudaMallocHost(void** ptr, size_t bytes) {
  return cudaHostAlloc(ptr, bytes, cudaHostAllocDefault);
}

cudaError_t cudaFreeHost(void* ptr) {
  if (moesplit::emu::tls_in_host_fn) return Device::Get().Fail(cudaErrorNotPermitted);
  if (ptr == nullptr) return cudaSuccess;
  moesplit::emu::SynchronizeDevice();
  Device& d = Device::Get();
  std::lock_guard<std::mutex> lock(d.mem_mu);
  auto it = d.allocs.find(reinterpret_cast<uintptr_t>(ptr));
  if (it == d.allocs.end() || !it->second.pinned) return d.Fail(cudaErrorInvalidValue);
  d.allocs.erase(it);
  ::operator delete(ptr, kAlign);
  return cudaSuccess;
}

cudaError_t cudaMemcpy(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind) {
  return CopyOp(dst, bytes, src, bytes, bytes, 1, kind, nullptr, true);
}

cudaError_t cudaMemcpyAsync(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind,
                            cudaStream_t stream) {
  return CopyOp(dst, bytes, src, bytes, bytes, 1, kind, stream, false);
}

cudaError_t cudaMemcpy2DAsync(void* dst, size_t dpitch, const void* src, size_t spitch,
                              size_t width, size_t height, cudaMemcpyKind kind,
                              cudaStream_t stream) {
  return CopyOp(dst, dpitch, src, spitch, width, height, kind, stream, false);
}

cudaError_t cudaMemcpy2D(void* dst, size_t dpitch, const void* src, size_t spitch, size_t width,
                         size_t height, cudaMemcpyKind kind) {
  return CopyOp(dst, dpitch, src, spitch, width, height, kind, nullptr, true);
}

cudaError_t cudaMemsetAsync(void* ptr, int value, size_t bytes, cudaStream_t stream) {
  EMU_ENTER();
  if (bytes == 0) return cudaSuccess;
  if (SpaceOf(ptr, bytes) != Space::kDevice) return Device::Get().Fail(cudaErrorInvalidValue);
  auto* p = static_cast<uint8_t*>(ptr);
  Device::Get().Push(stream, [p, value, bytes] { std::memset(p, value, bytes); });
  return cudaSuccess;
}

// Asynchronous for device memory, as CUDA's (ordered on the legacy default stream).
cudaError_t cudaMemset(void* ptr, int value, size_t bytes) {
  return cudaMemsetAsync(ptr, value, bytes, nullptr);
}

cudaError_t cudaMemGetInfo(size_t* free_bytes, size_t* total_bytes) {
  EMU_ENTER();
  Device& d = Device::Get();
  std::lock_guard<std::mutex> lock(d.mem_mu);
  *free_bytes = d.capacity - d.used;
  *total_bytes = d.capacity;
  return cudaSuccess;
}
