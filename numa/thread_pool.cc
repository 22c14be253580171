#include "numa/thread_pool.h"

#include <latch>

#include "core/base/status.h"

namespace moesplit::numa {

namespace {
// Polls before sleeping (CpuRelax, executor.h). ~2000 iterations (~50-100 us) bridge the gap
// between two matmuls of a decode step.
constexpr int kSpinIterations = 2000;

constexpr uint64_t kIndexMask = (uint64_t{1} << 40) - 1;
// In job_ only: bit 39 marks a broadcast (RunOnEachWorker), bits 0-38 hold n_tasks, so a
// parallel-for has at most 2^39 - 1 tasks (~5.5e11).
constexpr uint64_t kBroadcastBit = uint64_t{1} << 39;
constexpr uint64_t kCountMask = kBroadcastBit - 1;
inline uint32_t GenOf(uint64_t v) { return static_cast<uint32_t>(v >> 40); }
}  // namespace

ThreadPool::ThreadPool(int n_threads) : n_threads_(n_threads < 1 ? 1 : n_threads) {
  StartWorkers(nullptr);
}

ThreadPool::ThreadPool(int n_threads, const std::function<void(int worker)>& on_worker_start)
    : n_threads_(n_threads < 1 ? 1 : n_threads) {
  StartWorkers(&on_worker_start);
}

void ThreadPool::StartWorkers(const std::function<void(int worker)>* on_worker_start) {
  threads_.reserve(n_threads_ - 1);
  if (on_worker_start == nullptr || !*on_worker_start) {
    for (int w = 1; w < n_threads_; ++w) threads_.emplace_back([this, w] { WorkerLoop(w); });
    return;
  }
  // The hook may record into the caller's state (NodePool's warnings): wait for every call.
  std::latch started(n_threads_ - 1);
  for (int w = 1; w < n_threads_; ++w) {
    threads_.emplace_back([this, w, on_worker_start, &started] {
      (*on_worker_start)(w);
      started.count_down();
      WorkerLoop(w);
    });
  }
  started.wait();
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
    if ((job & kBroadcastBit) != 0) {
      // A broadcast cannot end without this worker, so `job` is still the live one: run our
      // share once. (A worker that saw the ticket of job `gen` finds job_ at `gen` or later.)
      (*fn_)(worker, worker);
      if (done_.fetch_add(1) + 1 == n_threads_ && caller_sleeping_.load()) {
        std::lock_guard<std::mutex> lock(mu_);
        done_cv_.notify_one();
      }
      return;
    }
    const int64_t index = static_cast<int64_t>(t & kIndexMask);
    if (index >= static_cast<int64_t>(job & kCountMask)) return;  // all tasks claimed
    if (!ticket_.compare_exchange_weak(t, t + 1, std::memory_order_acq_rel)) continue;
    (*fn_)(index, worker);  // the job is live until this task is counted done
    const int64_t n_tasks = static_cast<int64_t>(job & kCountMask);
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

void ThreadPool::Publish(uint32_t gen, uint64_t job, const std::function<void(int64_t, int)>* fn) {
  // fn_, the counters and job_ before the ticket that makes the job claimable.
  fn_ = fn;
  done_.store(0, std::memory_order_relaxed);
  job_.store(job, std::memory_order_release);
  {
    std::lock_guard<std::mutex> lock(mu_);  // pairs with the sleepers' predicate check
    ticket_.store(uint64_t{gen} << 40, std::memory_order_release);
  }
  if (sleepers_.load() > 0) work_cv_.notify_all();
}

void ThreadPool::WaitDone(int64_t n) {
  // Work still running on other threads: spin (yielding), then sleep until the last one ends.
  int spins = 0;
  while (done_.load(std::memory_order_acquire) != n && spins < kSpinIterations) {
    CpuRelax(spins++);
  }
  if (done_.load(std::memory_order_acquire) != n) {
    std::unique_lock<std::mutex> lock(mu_);
    caller_sleeping_.store(true);
    done_cv_.wait(lock, [&] { return done_.load() == n; });
    caller_sleeping_.store(false);
  }
}

void ThreadPool::ParallelFor(int64_t n_tasks,
                             const std::function<void(int64_t task, int worker)>& fn) {
  if (n_tasks <= 0) return;
  bool expected = false;
  MOESPLIT_CHECK(in_job_.compare_exchange_strong(expected, true),
                 "ThreadPool::ParallelFor called from inside a task of the same pool");
  MOESPLIT_CHECK(static_cast<uint64_t>(n_tasks) <= kCountMask, "too many tasks: ", n_tasks);
  if (n_threads_ == 1 || n_tasks == 1) {
    for (int64_t t = 0; t < n_tasks; ++t) fn(t, 0);
    in_job_.store(false);
    return;
  }
  const uint32_t gen = ++generation_ & 0xFFFFFF;
  Publish(gen, (uint64_t{gen} << 40) | static_cast<uint64_t>(n_tasks), &fn);
  RunTasks(gen, 0);
  WaitDone(n_tasks);
  in_job_.store(false);
}

void ThreadPool::RunOnEachWorker(const std::function<void(int worker)>& fn) {
  bool expected = false;
  MOESPLIT_CHECK(in_job_.compare_exchange_strong(expected, true),
                 "ThreadPool::RunOnEachWorker called from inside a task of the same pool");
  if (n_threads_ == 1) {
    fn(0);
    in_job_.store(false);
    return;
  }
  const std::function<void(int64_t, int)> share = [&fn](int64_t, int worker) { fn(worker); };
  const uint32_t gen = ++generation_ & 0xFFFFFF;
  Publish(gen, (uint64_t{gen} << 40) | kBroadcastBit | static_cast<uint64_t>(n_threads_), &share);
  fn(0);
  done_.fetch_add(1);
  WaitDone(n_threads_);
  in_job_.store(false);
}

}  // namespace moesplit::numa
