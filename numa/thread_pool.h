// ThreadPool: the project's own persistent worker pool. One pool = one set of threads that run
// `ParallelFor(n_tasks, fn(task, worker))` jobs; the calling thread works too (it is worker 0),
// so a pool of N threads starts N-1 background threads. Idle workers spin briefly (a decode step
// issues many small jobs back to back) and then sleep on a condition variable. No global state:
// whoever needs parallelism is handed a pool. The NUMA planner will later pin one pool per node.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace moesplit::numa {

class ThreadPool {
 public:
  // `n_threads` >= 1 (values < 1 mean 1): the caller plus n_threads - 1 workers.
  explicit ThreadPool(int n_threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const { return n_threads_; }

  // Runs fn(task, worker) once for every task in [0, n_tasks), spread over the threads, and
  // returns when all have finished. `worker` in [0, size()) identifies the thread (index into
  // per-thread scratch). Tasks are handed out dynamically (an atomic counter), so uneven tasks
  // balance. Not reentrant: fn must not call ParallelFor on the same pool (CHECKed).
  void ParallelFor(int64_t n_tasks, const std::function<void(int64_t task, int worker)>& fn);

 private:
  void WorkerLoop(int worker);
  void RunTasks(int worker);

  const int n_threads_;
  std::vector<std::thread> threads_;  // [n_threads_ - 1]

  std::mutex mu_;
  std::condition_variable work_cv_;  // a new job or stop
  std::condition_variable done_cv_;  // the last worker finished the job

  // The current job; written by ParallelFor before `generation_` is bumped.
  const std::function<void(int64_t, int)>* fn_ = nullptr;
  int64_t n_tasks_ = 0;
  std::atomic<int64_t> next_task_{0};
  std::atomic<int> busy_workers_{0};     // background workers still inside the current job
  std::atomic<uint64_t> generation_{0};  // +1 per job; workers compare with the last one seen
  std::atomic<bool> in_job_{false};
  bool stop_ = false;  // guarded by mu_
};

}  // namespace moesplit::numa
