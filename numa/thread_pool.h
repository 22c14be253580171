// ThreadPool: the project's own persistent worker pool. One pool = one set of threads that run
// `ParallelFor(n_tasks, fn(task, worker))` jobs; the calling thread works too (it is worker 0),
// so a pool of N threads starts N-1 background threads. Idle workers spin briefly (a decode step
// issues many small jobs back to back) and then sleep on a condition variable. No global state:
// whoever needs parallelism is handed a pool. NodePool (numa/node_pool.h) pins one per node
// through the per-worker start hook; NodeFanout hands work to pinned leader threads through
// RunOnEachWorker.
//
// Tasks are claimed lock-free from one 64-bit ticket (job generation | next task index), and a
// job ends when all its tasks are done — not when every worker has checked in — so a worker that
// is asleep or descheduled (an oversubscribed machine) never delays a job it took no task of.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

#include "core/base/executor.h"

namespace moesplit::numa {

class ThreadPool : public Executor {
 public:
  // `n_threads` >= 1 (values < 1 mean 1): the caller plus n_threads - 1 workers.
  explicit ThreadPool(int n_threads);
  // As above, and on_worker_start(worker) runs on each background worker (1 .. n_threads - 1),
  // on that thread, before it takes any job — e.g. to pin it. The constructor returns once every
  // call has returned, so whatever the hook records is complete by then.
  ThreadPool(int n_threads, const std::function<void(int worker)>& on_worker_start);
  ~ThreadPool() override;
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const override { return n_threads_; }

  // Runs fn(task, worker) once for every task in [0, n_tasks), spread over the threads, and
  // returns when all have finished. `worker` in [0, size()) identifies the thread (index into
  // per-thread scratch); two tasks never run concurrently with the same worker index. Tasks are
  // handed out dynamically, so uneven tasks balance. Not reentrant: fn must not call ParallelFor
  // on the same pool (CHECKed).
  void ParallelFor(int64_t n_tasks,
                   const std::function<void(int64_t task, int worker)>& fn) override;

  // Runs fn(worker) exactly once on every thread of the pool — fn(0) on the caller, fn(w) on
  // background worker w — and returns when all have returned (a broadcast, not a parallel-for:
  // NodeFanout uses it to hand one job to each pinned leader thread). Not reentrant (CHECKed).
  void RunOnEachWorker(const std::function<void(int worker)>& fn);

 private:
  void StartWorkers(const std::function<void(int worker)>* on_worker_start);
  void WorkerLoop(int worker);
  // Publishes job `gen` (fn_, counters, then the ticket) and wakes sleeping workers.
  void Publish(uint32_t gen, uint64_t job, const std::function<void(int64_t, int)>* fn);
  // Returns when done_ == n (spin, then sleep on done_cv_).
  void WaitDone(int64_t n);
  // Claims and runs tasks of job `gen` until none is left (a broadcast: runs this worker's
  // share once); returns at once when the live job is not `gen`.
  void RunTasks(uint32_t gen, int worker);

  const int n_threads_;
  std::vector<std::thread> threads_;  // [n_threads_ - 1]

  // ticket_ = generation << 40 | next task index; job_ = generation << 40 | broadcast << 39 |
  // n_tasks. A job's fn_ is written before its ticket is published and only read by a thread
  // that has claimed one of its tasks, or, for a broadcast, by each worker once (the job cannot
  // end before that task is done).
  static constexpr int kIndexBits = 40;
  std::atomic<uint64_t> ticket_{0};
  std::atomic<uint64_t> job_{0};
  std::atomic<int64_t> done_{0};  // tasks (broadcast: threads) finished in the current job
  const std::function<void(int64_t, int)>* fn_ = nullptr;
  uint32_t generation_ = 0;  // caller side only
  std::atomic<bool> in_job_{false};

  std::mutex mu_;
  std::condition_variable work_cv_;  // a new job (or stop)
  std::condition_variable done_cv_;  // the last task of a job finished
  std::atomic<int> sleepers_{0};     // workers waiting on work_cv_
  std::atomic<bool> caller_sleeping_{false};
  std::atomic<bool> stop_{false};
};

}  // namespace moesplit::numa
