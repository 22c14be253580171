#include "numa/thread_pool.h"

#include "core/base/status.h"

namespace moesplit::numa {

namespace {
// Iterations a worker polls for the next job before sleeping. One iteration is a load and a
// pause (~10-40 ns), so this is ~50-200 us: longer than the gap between two matmuls of a decode
// step, far shorter than the time between two user requests.
constexpr int kSpinIterations = 5000;

inline void CpuRelax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#else
  std::this_thread::yield();
#endif
}
}  // namespace

ThreadPool::ThreadPool(int n_threads) : n_threads_(n_threads < 1 ? 1 : n_threads) {
  threads_.reserve(n_threads_ - 1);
  for (int w = 1; w < n_threads_; ++w) threads_.emplace_back([this, w] { WorkerLoop(w); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
    generation_.fetch_add(1, std::memory_order_release);
  }
  work_cv_.notify_all();
  for (std::thread& t : threads_) t.join();
}

void ThreadPool::RunTasks(int worker) {
  for (;;) {
    const int64_t task = next_task_.fetch_add(1, std::memory_order_relaxed);
    if (task >= n_tasks_) break;
    (*fn_)(task, worker);
  }
}

void ThreadPool::WorkerLoop(int worker) {
  uint64_t seen = 0;
  for (;;) {
    // Spin, then sleep until the generation changes.
    int spins = 0;
    while (generation_.load(std::memory_order_acquire) == seen && spins < kSpinIterations) {
      CpuRelax();
      ++spins;
    }
    if (generation_.load(std::memory_order_acquire) == seen) {
      std::unique_lock<std::mutex> lock(mu_);
      work_cv_.wait(lock, [&] { return generation_.load(std::memory_order_acquire) != seen; });
    }
    seen = generation_.load(std::memory_order_acquire);
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (stop_) return;
    }
    RunTasks(worker);
    if (busy_workers_.fetch_sub(1, std::memory_order_acq_rel) == 1) {
      std::lock_guard<std::mutex> lock(mu_);
      done_cv_.notify_one();
    }
  }
}

void ThreadPool::ParallelFor(int64_t n_tasks,
                             const std::function<void(int64_t task, int worker)>& fn) {
  if (n_tasks <= 0) return;
  bool expected = false;
  MOESPLIT_CHECK(in_job_.compare_exchange_strong(expected, true),
                 "ThreadPool::ParallelFor called from inside a task of the same pool");
  if (n_threads_ == 1 || n_tasks == 1) {
    for (int64_t t = 0; t < n_tasks; ++t) fn(t, 0);
    in_job_.store(false);
    return;
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    fn_ = &fn;
    n_tasks_ = n_tasks;
    next_task_.store(0, std::memory_order_relaxed);
    busy_workers_.store(n_threads_ - 1, std::memory_order_relaxed);
    generation_.fetch_add(1, std::memory_order_release);
  }
  work_cv_.notify_all();
  RunTasks(0);
  // Wait for the background workers: spin first (they are usually nearly done), then sleep.
  int spins = 0;
  while (busy_workers_.load(std::memory_order_acquire) != 0 && spins < kSpinIterations) {
    CpuRelax();
    ++spins;
  }
  if (busy_workers_.load(std::memory_order_acquire) != 0) {
    std::unique_lock<std::mutex> lock(mu_);
    done_cv_.wait(lock, [&] { return busy_workers_.load(std::memory_order_acquire) == 0; });
  }
  in_job_.store(false);
}

}  // namespace moesplit::numa
