// The emulated device's state behind the runtime API (runtime.cc, memory.cc): one process-wide
// device, because the CUDA runtime API it implements is process-wide (cudaMalloc, the legacy
// default stream and the sticky error take no context argument). The emulator's global state is
// this Device and its stream executor (queue.cc), both created on first use and never destroyed
// (stream workers may run past static destructors); per OS thread: the last error (CUDA's
// cudaGetLastError is per thread), the running block and thread (block.cc), the fiber stacks,
// and whether a host function is running.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "gpu_kernels/emu/block.h"
#include "gpu_kernels/emu/queue.h"
#include "gpu_kernels/emu/runtime_api.h"

namespace moesplit::emu {

struct Allocation {
  size_t bytes;
  bool pinned;
};

class Device {
 public:
  static Device& Get();
  ~Device();

  // The queue of a stream handle (nullptr / cudaStreamLegacy: the legacy default stream) and the
  // dependencies CUDA's legacy-stream rule adds to an operation queued on it.
  std::shared_ptr<Queue> QueueOf(cudaStream_t s);
  uint64_t Push(cudaStream_t s, std::function<void()> fn, std::vector<Queue::Dep> extra = {});
  void RegisterStream(const std::shared_ptr<Queue>& q);
  // Waits for the work queued so far on every stream (cudaDeviceSynchronize, cudaFree).
  void SynchronizeAll();

  // Errors: the sticky one (a kernel fault; every later call returns it) and this thread's last.
  cudaError_t Sticky() const { return sticky_.load(); }
  void SetSticky(cudaError_t e, const std::string& what);
  static cudaError_t& LastError();
  cudaError_t Fail(cudaError_t e) { return LastError() = e; }

  // Memory: device allocations and pinned host allocations by start address.
  std::mutex mem_mu;
  std::map<uintptr_t, Allocation> allocs;
  size_t capacity = 0, used = 0;
  // The allocation holding [p, p + n), or null; `partial` is set when [p, p + n) starts inside
  // one but runs past its end.
  const Allocation* Find(const void* p, size_t n, bool* partial);

  std::mutex attr_mu;
  std::map<const void*, int> max_dynamic_shared;
  unsigned flags = 0;
  int devices = 1;
  Schedule schedule_fixed = Schedule::kInOrder;
  bool rotate = true;
  uint64_t seed = 1;
  std::atomic<uint64_t> launches{0};

 private:
  Device();
  std::atomic<cudaError_t> sticky_{cudaSuccess};
  std::mutex streams_mu_;
  std::shared_ptr<Queue> legacy_;
  std::vector<std::weak_ptr<Queue>> blocking_;  // streams ordered with the legacy stream
  std::vector<std::weak_ptr<Queue>>
      streams_;  // every stream created (weak: destroyed ones drained)
};

// Set on a stream worker while it runs a host function: CUDA forbids CUDA calls there.
inline thread_local bool tls_in_host_fn = false;

// Every API call starts here (runtime.cc, memory.cc): no CUDA calls in host functions, and a
// sticky error is returned by every call once it happened.
inline cudaError_t EnterApi() {
  if (tls_in_host_fn) return Device::Get().Fail(cudaErrorNotPermitted);
  const cudaError_t s = Device::Get().Sticky();
  if (s != cudaSuccess) return Device::Get().Fail(s);
  return cudaSuccess;
}

}  // namespace moesplit::emu

#define EMU_ENTER()                                             \
  do {                                                          \
    const cudaError_t emu_e_ = ::moesplit::emu::EnterApi();     \
    if (emu_e_ != cudaSuccess) return emu_e_;                   \
  } while (0)

struct CUstream_st {
  std::shared_ptr<moesplit::emu::Queue> queue;
};

struct CUevent_st {
  unsigned flags = 0;
  std::mutex mu;
  std::shared_ptr<moesplit::emu::Queue> queue;  // of the last record (null: never recorded)
  uint64_t position = 0;
  std::shared_ptr<double> time_ms;  // set when the recorded position is reached
};
