// Executor: what the kernels, the fused MoE driver and the engine need from a thread pool — a
// blocking parallel-for with a worker index for per-thread scratch. A base type (shared/DESIGN.md:
// kernels take an executor interface, not a concrete pool), implemented by numa::ThreadPool /
// numa::NodePool and by the oneTBB-arena and OpenMP runners that bench_pool compares them
// against, so the same kernel and MoE-layer code runs on each.
#pragma once

#include <cstdint>
#include <functional>
#include <thread>

namespace moesplit {

// One iteration of a spin-wait on another thread: a pause (~10-50 ns); every 16th iteration
// yields instead, so that on an oversubscribed machine the thread waited for gets to run.
inline void CpuRelax(int i) {
  if ((i & 15) == 15) {
    std::this_thread::yield();
    return;
  }
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}

class Executor {
 public:
  virtual ~Executor() = default;
  // Number of workers; `worker` passed to fn lies in [0, size()).
  virtual int size() const = 0;
  // Runs fn(task, worker) for every task in [0, n_tasks) and returns when all have finished; two
  // tasks never run concurrently with the same worker index. Not reentrant.
  virtual void ParallelFor(int64_t n_tasks,
                           const std::function<void(int64_t task, int worker)>& fn) = 0;
};

}  // namespace moesplit
