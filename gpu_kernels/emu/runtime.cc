// The emulated device's runtime: streams (a worker thread each), events, the legacy default
// stream's implicit ordering, errors, device queries and kernel launches. Memory and copies are
// in memory.cc.
#include "gpu_kernels/emu/runtime.h"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "gpu_kernels/emu/block.h"
#include "gpu_kernels/emu/launch.h"

namespace moesplit::emu {

// --- Device --------------------------------------------------------------------------------------

namespace {

size_t ParseBytes(const char* s, size_t fallback) {
  if (s == nullptr || *s == '\0') return fallback;
  char* end = nullptr;
  double v = std::strtod(s, &end);
  if (end != nullptr) {
    if (*end == 'G' || *end == 'g') v *= double(1 << 30);
    if (*end == 'M' || *end == 'm') v *= double(1 << 20);
  }
  return v > 0 ? static_cast<size_t>(v) : fallback;
}

}  // namespace

Device::Device() {
  // MOESPLIT_CUDA_EMU_MEMORY: the device's memory (default 8 GiB; allocations are real host
  // memory, so only what is allocated is used). MOESPLIT_CUDA_EMU_DEVICES=0: no device visible.
  // MOESPLIT_CUDA_EMU_SCHEDULE = inorder | reverse | random (threads of a block, blocks of a
  // grid, and streams: block.h, queue.h) | rotate (the default: kernel launches cycle through
  // random, reverse, in order; streams random), MOESPLIT_CUDA_EMU_SEED for the random ones.
  capacity = ParseBytes(std::getenv("MOESPLIT_CUDA_EMU_MEMORY"), size_t{8} << 30);
  if (const char* d = std::getenv("MOESPLIT_CUDA_EMU_DEVICES")) devices = std::atoi(d) > 0 ? 1 : 0;
  if (const char* s = std::getenv("MOESPLIT_CUDA_EMU_SCHEDULE")) {
    const std::string v = s;
    rotate = v == "rotate" || v.empty();
    if (v == "inorder") schedule_fixed = Schedule::kInOrder;
    if (v == "reverse") schedule_fixed = Schedule::kReverse;
    if (v == "random") schedule_fixed = Schedule::kRandom;
  }
  if (const char* s = std::getenv("MOESPLIT_CUDA_EMU_SEED")) seed = std::strtoull(s, nullptr, 10);
  // Streams: the fixed schedule's policy (queue.h); rotating kernels use random stream picks.
  Queue::SetPolicy(rotate ? Schedule::kRandom : schedule_fixed, seed);
  legacy_ = std::make_shared<Queue>(true);
}

Device::~Device() { SynchronizeAll(); }

Device& Device::Get() {
  static Device* d = new Device();  // never destroyed: stream workers may outlive main's statics
  return *d;
}

cudaError_t& Device::LastError() {
  thread_local cudaError_t e = cudaSuccess;
  return e;
}

void Device::SetSticky(cudaError_t e, const std::string& what) {
  cudaError_t expected = cudaSuccess;
  if (sticky_.compare_exchange_strong(expected, e)) {
    std::fprintf(stderr, "emulated CUDA device: %s: %s\n", cudaGetErrorName(e), what.c_str());
  }
}

std::shared_ptr<Queue> Device::QueueOf(cudaStream_t s) {
  if (s == nullptr || s == cudaStreamLegacy) return legacy_;
  return s->queue;
}

void Device::RegisterStream(const std::shared_ptr<Queue>& q) {
  std::lock_guard<std::mutex> lock(streams_mu_);
  streams_.push_back(q);
  if (q->blocking()) blocking_.push_back(q);
}

// CUDA's legacy default stream: an operation on it waits for all earlier work of every blocking
// stream, and an operation on a blocking stream waits for earlier legacy-stream work.
// Non-blocking streams (cudaStreamNonBlocking) are ordered with neither.
uint64_t Device::Push(cudaStream_t s, std::function<void()> fn, std::vector<Queue::Dep> deps) {
  std::shared_ptr<Queue> q = QueueOf(s);
  if (q == legacy_) {
    std::lock_guard<std::mutex> lock(streams_mu_);
    for (auto it = blocking_.begin(); it != blocking_.end();) {
      if (auto b = it->lock()) {
        deps.push_back({b, b->Enqueued()});
        ++it;
      } else {
        it = blocking_.erase(it);
      }
    }
  } else if (q->blocking()) {
    deps.push_back({legacy_, legacy_->Enqueued()});
  }
  return q->Push(std::move(deps), std::move(fn));
}

void Device::SynchronizeAll() {
  std::vector<std::shared_ptr<Queue>> qs{legacy_};
  {
    std::lock_guard<std::mutex> lock(streams_mu_);
    for (auto it = streams_.begin(); it != streams_.end();) {
      if (auto q = it->lock()) {
        qs.push_back(std::move(q));
        ++it;
      } else {
        it = streams_.erase(it);
      }
    }
  }
  for (auto& q : qs) q->WaitFor(q->Enqueued());
}

}  // namespace moesplit::emu

using moesplit::emu::Device;
using moesplit::emu::Queue;

const char* cudaGetErrorName(cudaError_t e) {
  switch (e) {
#define EMU_CASE(x) \
  case x:           \
    return #x;
    EMU_CASE(cudaSuccess)
    EMU_CASE(cudaErrorInvalidValue)
    EMU_CASE(cudaErrorMemoryAllocation)
    EMU_CASE(cudaErrorInitializationError)
    EMU_CASE(cudaErrorInvalidConfiguration)
    EMU_CASE(cudaErrorInvalidPitchValue)
    EMU_CASE(cudaErrorInvalidMemcpyDirection)
    EMU_CASE(cudaErrorInsufficientDriver)
    EMU_CASE(cudaErrorInvalidDeviceFunction)
    EMU_CASE(cudaErrorNoDevice)
    EMU_CASE(cudaErrorInvalidDevice)
    EMU_CASE(cudaErrorInvalidResourceHandle)
    EMU_CASE(cudaErrorNotReady)
    EMU_CASE(cudaErrorLaunchOutOfResources)
    EMU_CASE(cudaErrorSetOnActiveProcess)
    EMU_CASE(cudaErrorLaunchFailure)
    EMU_CASE(cudaErrorNotPermitted)
    EMU_CASE(cudaErrorNotSupported)
#undef EMU_CASE
  }
  return "cudaErrorUnknown";
}

const char* cudaGetErrorString(cudaError_t e) {
  switch (e) {
    case cudaSuccess:
      return "no error";
    case cudaErrorInvalidValue:
      return "invalid argument";
    case cudaErrorMemoryAllocation:
      return "out of memory";
    case cudaErrorInvalidConfiguration:
      return "invalid configuration argument";
    case cudaErrorInvalidPitchValue:
      return "invalid pitch argument";
    case cudaErrorInvalidMemcpyDirection:
      return "invalid copy direction for memcpy";
    case cudaErrorNoDevice:
      return "no CUDA-capable device is detected";
    case cudaErrorInvalidDevice:
      return "invalid device ordinal";
    case cudaErrorInvalidResourceHandle:
      return "invalid resource handle";
    case cudaErrorNotReady:
      return "device not ready";
    case cudaErrorLaunchOutOfResources:
      return "too many resources requested for launch";
    case cudaErrorLaunchFailure:
      return "unspecified launch failure";
    case cudaErrorNotPermitted:
      return "operation not permitted";
    case cudaErrorNotSupported:
      return "operation not supported";
    default:
      return cudaGetErrorName(e);
  }
}

cudaError_t cudaGetLastError() {
  cudaError_t& last = Device::LastError();
  const cudaError_t e = last;
  last = cudaSuccess;
  if (e != cudaSuccess) return e;
  return Device::Get().Sticky();
}

cudaError_t cudaPeekAtLastError() {
  const cudaError_t e = Device::LastError();
  return e != cudaSuccess ? e : Device::Get().Sticky();
}

cudaError_t cudaGetDeviceCount(int* count) {
  *count = Device::Get().devices;
  if (*count == 0) return Device::Get().Fail(cudaErrorNoDevice);
  return cudaSuccess;
}

cudaError_t cudaGetDeviceProperties(cudaDeviceProp* prop, int device) {
  if (device < 0 || device >= Device::Get().devices) {
    return Device::Get().Fail(cudaErrorInvalidDevice);
  }
  std::memset(prop, 0, sizeof(*prop));
  std::snprintf(prop->name, sizeof(prop->name), "moesplit emulated CUDA device (sm_86 limits)");
  prop->totalGlobalMem = Device::Get().capacity;
  prop->sharedMemPerBlock = moesplit::emu::kMaxStaticShared;
  prop->sharedMemPerBlockOptin = moesplit::emu::kMaxSharedOptIn;
  prop->regsPerBlock = 65536;
  prop->warpSize = 32;
  prop->maxThreadsPerBlock = moesplit::emu::kMaxThreadsPerBlock;
  prop->maxThreadsDim[0] = 1024;
  prop->maxThreadsDim[1] = 1024;
  prop->maxThreadsDim[2] = 64;
  prop->maxGridSize[0] = 2147483647;
  prop->maxGridSize[1] = 65535;
  prop->maxGridSize[2] = 65535;
  prop->major = 8;
  prop->minor = 6;
  prop->multiProcessorCount = 1;
  return cudaSuccess;
}

cudaError_t cudaSetDevice(int device) {
  EMU_ENTER();
  if (Device::Get().devices == 0) return Device::Get().Fail(cudaErrorNoDevice);
  if (device != 0) return Device::Get().Fail(cudaErrorInvalidDevice);
  return cudaSuccess;
}

cudaError_t cudaGetDevice(int* device) {
  EMU_ENTER();
  *device = 0;
  return cudaSuccess;
}

cudaError_t cudaSetDeviceFlags(unsigned flags) {
  EMU_ENTER();
  Device::Get().flags = flags;
  return cudaSuccess;
}

cudaError_t cudaGetDeviceFlags(unsigned* flags) {
  EMU_ENTER();
  *flags = Device::Get().flags;
  return cudaSuccess;
}

cudaError_t cudaRuntimeGetVersion(int* version) {
  *version = 13000;
  return cudaSuccess;
}

cudaError_t cudaDriverGetVersion(int* version) {
  *version = 13000;
  return cudaSuccess;
}

cudaError_t cudaDeviceSynchronize() {
  if (moesplit::emu::tls_in_host_fn) return Device::Get().Fail(cudaErrorNotPermitted);
  Device::Get().SynchronizeAll();
  return Device::Get().Sticky() != cudaSuccess ? Device::Get().Fail(Device::Get().Sticky())
                                               : cudaSuccess;
}

namespace moesplit::emu {
// memory.cc: cudaFree waits for the whole device.
void SynchronizeDevice() { (void)cudaDeviceSynchronize(); }
}  // namespace moesplit::emu

// --- Streams -------------------------------------------------------------------------------------

cudaError_t cudaStreamCreateWithFlags(cudaStream_t* stream, unsigned flags) {
  EMU_ENTER();
  if (stream == nullptr || (flags & ~cudaStreamNonBlocking) != 0) {
    return Device::Get().Fail(cudaErrorInvalidValue);
  }
  const bool blocking = (flags & cudaStreamNonBlocking) == 0;
  auto q = std::make_shared<Queue>(blocking);
  Device::Get().RegisterStream(q);
  *stream = new CUstream_st{std::move(q)};
  return cudaSuccess;
}

cudaError_t cudaStreamCreate(cudaStream_t* stream) {
  return cudaStreamCreateWithFlags(stream, cudaStreamDefault);
}

cudaError_t cudaStreamDestroy(cudaStream_t stream) {
  if (moesplit::emu::tls_in_host_fn) return Device::Get().Fail(cudaErrorNotPermitted);
  if (stream == nullptr || stream == cudaStreamLegacy) {
    return Device::Get().Fail(cudaErrorInvalidResourceHandle);
  }
  delete stream;  // the queue lives on while events or other streams' waits refer to it
  return cudaSuccess;
}

// Waits even after a fault (the work still queued is skipped, a running host function finishes),
// so that the caller may free what the queued work used.
cudaError_t cudaStreamSynchronize(cudaStream_t stream) {
  if (moesplit::emu::tls_in_host_fn) return Device::Get().Fail(cudaErrorNotPermitted);
  auto q = Device::Get().QueueOf(stream);
  q->WaitFor(q->Enqueued());
  const cudaError_t s = Device::Get().Sticky();
  return s != cudaSuccess ? Device::Get().Fail(s) : cudaSuccess;
}

// The device runs only while the host waits (queue.h): a query runs the stream's work first, so
// that a polling loop makes progress.
cudaError_t cudaStreamQuery(cudaStream_t stream) {
  EMU_ENTER();
  auto q = Device::Get().QueueOf(stream);
  q->WaitFor(q->Enqueued());
  return cudaSuccess;
}

cudaError_t cudaLaunchHostFunc(cudaStream_t stream, cudaHostFn_t fn, void* user_data) {
  EMU_ENTER();
  if (fn == nullptr) return Device::Get().Fail(cudaErrorInvalidValue);
  Device::Get().Push(stream, [fn, user_data] {
    moesplit::emu::tls_in_host_fn = true;
    fn(user_data);
    moesplit::emu::tls_in_host_fn = false;
  });
  return cudaSuccess;
}

// --- Events --------------------------------------------------------------------------------------

cudaError_t cudaEventCreateWithFlags(cudaEvent_t* event, unsigned flags) {
  EMU_ENTER();
  if (event == nullptr || (flags & ~(cudaEventBlockingSync | cudaEventDisableTiming)) != 0) {
    return Device::Get().Fail(cudaErrorInvalidValue);
  }
  *event = new CUevent_st();
  (*event)->flags = flags;
  return cudaSuccess;
}

cudaError_t cudaEventCreate(cudaEvent_t* event) {
  return cudaEventCreateWithFlags(event, cudaEventDefault);
}

cudaError_t cudaEventDestroy(cudaEvent_t event) {
  if (event == nullptr) return Device::Get().Fail(cudaErrorInvalidResourceHandle);
  delete event;
  return cudaSuccess;
}

// The event captures the work queued on `stream` so far (CUDA: a later record replaces it; a
// wait queued before that record still waits for the old one).
cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t stream) {
  EMU_ENTER();
  if (event == nullptr) return Device::Get().Fail(cudaErrorInvalidResourceHandle);
  auto time = std::make_shared<double>(0.0);
  std::lock_guard<std::mutex> lock(event->mu);
  const uint64_t p = Device::Get().Push(stream, [time] {
    *time = std::chrono::duration<double, std::milli>(
                std::chrono::steady_clock::now().time_since_epoch())
                .count();
  });
  event->queue = Device::Get().QueueOf(stream);
  event->position = p;
  event->time_ms = std::move(time);
  return cudaSuccess;
}

cudaError_t cudaStreamWaitEvent(cudaStream_t stream, cudaEvent_t event, unsigned flags) {
  EMU_ENTER();
  if (event == nullptr) return Device::Get().Fail(cudaErrorInvalidResourceHandle);
  if (flags != 0) return Device::Get().Fail(cudaErrorInvalidValue);
  std::vector<Queue::Dep> deps;
  {
    std::lock_guard<std::mutex> lock(event->mu);
    if (event->queue == nullptr) return cudaSuccess;  // never recorded: nothing to wait for
    deps.push_back({event->queue, event->position});
  }
  Device::Get().Push(
      stream, [] {}, std::move(deps));
  return cudaSuccess;
}

cudaError_t cudaEventSynchronize(cudaEvent_t event) {
  EMU_ENTER();
  if (event == nullptr) return Device::Get().Fail(cudaErrorInvalidResourceHandle);
  std::shared_ptr<Queue> q;
  uint64_t p = 0;
  {
    std::lock_guard<std::mutex> lock(event->mu);
    q = event->queue;
    p = event->position;
  }
  if (q != nullptr) q->WaitFor(p);
  const cudaError_t s = Device::Get().Sticky();
  return s != cudaSuccess ? Device::Get().Fail(s) : cudaSuccess;
}

cudaError_t cudaEventQuery(cudaEvent_t event) {
  EMU_ENTER();
  if (event == nullptr) return Device::Get().Fail(cudaErrorInvalidResourceHandle);
  std::lock_guard<std::mutex> lock(event->mu);
  if (event->queue == nullptr) return cudaSuccess;
  event->queue->WaitFor(event->position);  // (see cudaStreamQuery)
  return cudaSuccess;
}

cudaError_t cudaEventElapsedTime(float* ms, cudaEvent_t start, cudaEvent_t end) {
  EMU_ENTER();
  if (start == nullptr || end == nullptr) return Device::Get().Fail(cudaErrorInvalidResourceHandle);
  if ((start->flags | end->flags) & cudaEventDisableTiming) {
    return Device::Get().Fail(cudaErrorInvalidResourceHandle);
  }
  if (start->queue == nullptr || end->queue == nullptr) {
    return Device::Get().Fail(cudaErrorInvalidResourceHandle);
  }
  if (!start->queue->Reached(start->position) || !end->queue->Reached(end->position)) {
    return Device::Get().Fail(cudaErrorNotReady);
  }
  *ms = static_cast<float>(*end->time_ms - *start->time_ms);  // wall time of the emulation
  return cudaSuccess;
}

// --- Kernels -------------------------------------------------------------------------------------

cudaError_t cudaFuncSetAttribute(const void* func, cudaFuncAttribute attr, int value) {
  EMU_ENTER();
  if (func == nullptr) return Device::Get().Fail(cudaErrorInvalidDeviceFunction);
  if (attr == cudaFuncAttributeMaxDynamicSharedMemorySize) {
    if (value < 0 || static_cast<size_t>(value) > moesplit::emu::kMaxSharedOptIn) {
      return Device::Get().Fail(cudaErrorInvalidValue);
    }
    std::lock_guard<std::mutex> lock(Device::Get().attr_mu);
    Device::Get().max_dynamic_shared[func] = value;
    return cudaSuccess;
  }
  if (attr == cudaFuncAttributePreferredSharedMemoryCarveout) return cudaSuccess;
  return Device::Get().Fail(cudaErrorInvalidValue);
}

namespace moesplit::emu {

void LaunchKernel(const void* func, KernelLaunch&& launch, cudaStream_t stream) {
  if (EnterApi() != cudaSuccess) return;
  Device& d = Device::Get();
  const dim3 g = launch.grid, b = launch.block;
  const uint64_t threads = uint64_t{b.x} * b.y * b.z;
  if (g.x == 0 || g.y == 0 || g.z == 0 || threads == 0 || threads > kMaxThreadsPerBlock ||
      b.x > 1024 || b.y > 1024 || b.z > kMaxBlockDimZ || g.x > kMaxGridDimX ||
      g.y > kMaxGridDimYZ || g.z > kMaxGridDimYZ) {
    d.Fail(cudaErrorInvalidConfiguration);
    return;
  }
  if (launch.dynamic_shared > kMaxStaticShared) {
    int allowed = 0;
    {
      std::lock_guard<std::mutex> lock(d.attr_mu);
      auto it = d.max_dynamic_shared.find(func);
      if (it != d.max_dynamic_shared.end()) allowed = it->second;
    }
    // Above 48 KiB only with cudaFuncAttributeMaxDynamicSharedMemorySize set high enough.
    if (launch.dynamic_shared > static_cast<size_t>(allowed)) {
      d.Fail(cudaErrorInvalidValue);
      return;
    }
  }
  const uint64_t n = d.launches.fetch_add(1);
  // Rotating: random, reverse, in order, ... (random first: a test's single launch gets the
  // schedule most likely to expose a missing barrier).
  static constexpr Schedule kRotation[3] = {Schedule::kRandom, Schedule::kReverse,
                                            Schedule::kInOrder};
  const Schedule sched = d.rotate ? kRotation[n % 3] : d.schedule_fixed;
  const uint64_t seed = d.seed * 0x9E3779B97F4A7C15ull + n;
  auto l = std::make_shared<KernelLaunch>(std::move(launch));
  d.Push(stream, [l, sched, seed] {
    const std::string fault = RunGrid(*l, sched, seed);
    if (!fault.empty()) Device::Get().SetSticky(cudaErrorLaunchFailure, fault);
  });
}

uint64_t KernelsLaunched() { return Device::Get().launches.load(); }

void SetSchedulesForTesting(Schedule threads, Schedule streams, uint64_t seed) {
  Device& d = Device::Get();
  d.rotate = false;
  d.schedule_fixed = threads;
  d.seed = seed;
  Queue::SetPolicy(streams, seed);
}

}  // namespace moesplit::emu
