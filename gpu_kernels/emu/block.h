// The emulated device's execution of one kernel launch on the calling OS thread (a stream's
// worker): blocks one after another, the threads of a block as fibers (fiber.h). A thread runs
// until it reaches a synchronisation point (__syncthreads, a warp shuffle / vote / __syncwarp)
// or returns; then the scheduler resumes the first runnable thread in the block's priority order:
//   kInOrder  thread 0 first (and blocks 0, 1, 2, ...)
//   kReverse  the last thread first (and the last block first)
//   kRandom   a seeded random order of threads (and of blocks)
// Greedy priority lets one warp run as far ahead of the others as the barriers allow (a warp
// goes through all its shuffles up to the next __syncthreads before a lower-priority warp
// starts), so a missing __syncthreads or __syncwarp, or a read of another thread's value before
// it is written, reads stale or poisoned (0xFF: NaN) shared memory in at least one schedule.
// Between two synchronisation points a thread runs alone: lanes are never assumed to run in
// lock-step (CUDA's independent thread scheduling, sm_70 and later).
//
// Everything a kernel can do wrong that CUDA leaves undefined or hangs on, and the emulator can
// see, ends the launch with a fault (the sticky cudaErrorLaunchFailure, the message on stderr):
// a barrier some threads never reach (deadlock), a warp operation whose mask does not name the
// calling lane or whose named lanes reach different operations, a shuffle width that is not a
// power of two <= 32, static shared memory beyond 48 KiB, static + dynamic beyond the opt-in
// limit. A shuffle reading an exited or non-participating lane gets all-one bits (NaN).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>

#include "gpu_kernels/emu/types.h"

namespace moesplit::emu {

enum class Schedule { kInOrder, kReverse, kRandom };

// The limits the emulator enforces: those of the smallest GPU the project builds for
// (sm_86 / sm_89: 99 KiB of opt-in shared memory a block).
inline constexpr int kMaxThreadsPerBlock = 1024;
inline constexpr unsigned kMaxBlockDimZ = 64;
inline constexpr unsigned kMaxGridDimX = 2147483647u;
inline constexpr unsigned kMaxGridDimYZ = 65535u;
inline constexpr size_t kMaxStaticShared = 48 * 1024;
inline constexpr size_t kMaxSharedOptIn = 99 * 1024;

// One launch as the worker runs it. body() runs the kernel for the current thread (the current
// thread's built-in variables are set before it is called).
struct KernelLaunch {
  std::string name;
  dim3 grid, block;
  size_t dynamic_shared = 0;
  std::function<void()> body;
};

// Runs every block; returns "" or the fault's description.
std::string RunGrid(const KernelLaunch& launch, Schedule schedule, uint64_t seed);

// --- Called from kernel code (kernel_api.h) -----------------------------------------------------

// The current thread's built-in variables (threadIdx, blockIdx, blockDim, gridDim).
struct BuiltinIds {
  uint3 thread_idx;
  uint3 block_idx;
  dim3 block_dim;
  dim3 grid_dim;
};
inline thread_local const BuiltinIds* tls_ids = nullptr;

enum class WarpOpKind : uint8_t {
  kSync,
  kShflIdx,
  kShflUp,
  kShflDown,
  kShflXor,
  kBallot,
  kAny,
  kAll
};

void SyncThreads();
// A warp-wide operation of the calling lane: waits until every non-exited lane named in mask
// has reached it, then returns this lane's result (see block.cc for each kind's rule).
uint64_t WarpOp(WarpOpKind kind, unsigned mask, uint64_t value, int arg, int width);
// Per-block static shared memory for the declaration at `site` (one per declaration), poisoned
// with 0xFF when a block first reaches it.
void* SharedStatic(const void* site, size_t bytes);
// The block's dynamic shared memory (the launch's size, poisoned with 0xFF at block start).
void* SharedDynamic();
[[noreturn]] void KernelFault(const std::string& what);
int LaneId();

}  // namespace moesplit::emu
