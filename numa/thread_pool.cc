#include "numa/thread_pool.h"

#include "core/base/status.h"

namespace moesplit::numa {

namespace {
// Polls before sleeping. One iteration is a pause (~10-50 ns); every 16th yields so that on an
// oversubscribed machine a spinning thread lets the thread it waits for run. ~2000 iterations
// (~50-100 us) bridge the gap between two matmuls of a decode step.
constexpr int kSpinIterations = 2000;

inline void CpuRelax(int i) {
  if ((i & 15) == 15) {
    std::this_thread::yield();
    return;
  }
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}

constexpr uint64_t kIndexMask = (uint64_t{1} << 40) - 1;
inline uint32_t GenOf(uint64_t v) { return static_cast<uint32_t>(v >> 40); }
}  // namespace

ThreadPool::ThreadPool(int n_threads) : n_threads_(n_threads < 1 ? 1 : n_threads) {
  threads_.reserve(n_threads_ - 1);
  for (int w = 1; w < n_threads_; ++w) threads_.emplace_back([this, w] { WorkerLoop(w); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_.store(true);
  }
  work_cv_.notify_all();
  for (std::thread& t : threads_) t.join();
}

void ThreadPool::RunTasks(uint32_t gen, int worker) {
  for (;;) {
    uint64_t t = ticket_.load(std::memory_order_acquire);
    const uint64_t job = job_.load(std::memory_order_acquire);
    if (GenOf(t) != gen || GenOf(job) != gen) return;  // another job by now
    const int64_t index = static_cast<int64_t>(t & kIndexMask);
    if (index >= static_cast<int64_t>(job & kIndexMask)) return;  // all tasks claimed
    if (!ticket_.compare_exchange_weak(t, t + 1, std::memory_order_acq_rel)) continue;
    (*fn_)(index, worker);  // the job is live until this task is counted done
    const int64_t n_tasks = static_cast<int64_t>(job & kIndexMask);
    // seq_cst on done_ and caller_sleeping_ (both sides): a store-then-load handshake.
    if (done_.fetch_add(1) + 1 == n_tasks && caller_sleeping_.load()) {
      std::lock_guard<std::mutex> lock(mu_);
      done_cv_.notify_one();
    }
  }
}

void ThreadPool::WorkerLoop(int worker) {
  uint32_t seen = 0;
  for (;;) {
    int spins = 0;
    while (GenOf(ticket_.load(std::memory_order_acquire)) == seen && !stop_.load() &&
           spins < kSpinIterations) {
      CpuRelax(spins++);
    }
    if (GenOf(ticket_.load(std::memory_order_acquire)) == seen && !stop_.load()) {
      std::unique_lock<std::mutex> lock(mu_);
      sleepers_.fetch_add(1);
      work_cv_.wait(lock, [&] {
        return stop_.load() || GenOf(ticket_.load(std::memory_order_acquire)) != seen;
      });
      sleepers_.fetch_sub(1);
    }
    if (stop_.load()) return;
    seen = GenOf(ticket_.load(std::memory_order_acquire));
    RunTasks(seen, worker);
  }
}

void ThreadPool::ParallelFor(int64_t n_tasks,
                             const std::function<void(int64_t task, int worker)>& fn) {
  if (n_tasks <= 0) return;
  bool expected = false;
  MOESPLIT_CHECK(in_job_.compare_exchange_strong(expected, true),
                 "ThreadPool::ParallelFor called from inside a task of the same pool");
  MOESPLIT_CHECK(static_cast<uint64_t>(n_tasks) <= kIndexMask, "too many tasks: ", n_tasks);
  if (n_threads_ == 1 || n_tasks == 1) {
    for (int64_t t = 0; t < n_tasks; ++t) fn(t, 0);
    in_job_.store(false);
    return;
  }
  // Publish the job: fn_, the counters and n_tasks before the ticket that makes it claimable.
  const uint32_t gen = ++generation_ & 0xFFFFFF;
  fn_ = &fn;
  done_.store(0, std::memory_order_relaxed);
  job_.store((uint64_t{gen} << 40) | static_cast<uint64_t>(n_tasks), std::memory_order_release);
  {
    std::lock_guard<std::mutex> lock(mu_);  // pairs with the sleepers' predicate check
    ticket_.store(uint64_t{gen} << 40, std::memory_order_release);
  }
  if (sleepers_.load() > 0) work_cv_.notify_all();
  RunTasks(gen, 0);
  // Tasks still running on other threads: spin (yielding), then sleep until the last one ends.
  int spins = 0;
  while (done_.load(std::memory_order_acquire) != n_tasks && spins < kSpinIterations) {
    CpuRelax(spins++);
  }
  if (done_.load(std::memory_order_acquire) != n_tasks) {
    std::unique_lock<std::mutex> lock(mu_);
    caller_sleeping_.store(true);
    done_cv_.wait(lock, [&] { return done_.load() == n_tasks; });
    caller_sleeping_.store(false);
  }
  in_job_.store(false);
}

}  // namespace moesplit::numa
