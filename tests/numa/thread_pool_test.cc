#include "numa/thread_pool.h"

#include <gtest/gtest.h>

#include <atomic>
#include <mutex>
#include <thread>
#include <vector>

namespace moesplit::numa {
namespace {

TEST(ThreadPoolTest, EveryTaskRunsExactlyOnce) {
  for (int threads = 1; threads <= 4; ++threads) {
    ThreadPool pool(threads);
    EXPECT_EQ(pool.size(), threads);
    for (int64_t n : {0, 1, 2, 3, 7, 64, 1000}) {
      std::vector<std::atomic<int>> hits(static_cast<size_t>(n));
      std::vector<std::atomic<int>> per_worker(static_cast<size_t>(threads));
      pool.ParallelFor(n, [&](int64_t task, int worker) {
        ASSERT_GE(worker, 0);
        ASSERT_LT(worker, threads);
        hits[static_cast<size_t>(task)].fetch_add(1);
        per_worker[static_cast<size_t>(worker)].fetch_add(1);
      });
      int total = 0;
      for (auto& h : hits) EXPECT_EQ(h.load(), 1);
      for (auto& w : per_worker) total += w.load();
      EXPECT_EQ(total, n) << threads << " threads, " << n << " tasks";
    }
  }
}

TEST(ThreadPoolTest, ManySmallJobsBackToBack) {
  // Decode issues thousands of tiny jobs; every one must complete before the next starts.
  ThreadPool pool(4);
  int64_t sum = 0;
  for (int job = 0; job < 2000; ++job) {
    std::vector<int64_t> out(8, 0);
    pool.ParallelFor(8, [&](int64_t t, int) { out[static_cast<size_t>(t)] = t + job; });
    for (int64_t v : out) sum += v;
  }
  int64_t expect = 0;
  for (int job = 0; job < 2000; ++job) expect += 28 + 8 * job;
  EXPECT_EQ(sum, expect);
}

TEST(ThreadPoolTest, UsesSeveralWorkersOnLongTasks) {
  ThreadPool pool(3);
  std::vector<std::atomic<int>> per_worker(3);
  pool.ParallelFor(30, [&](int64_t, int worker) {
    volatile double x = 0;
    for (int i = 0; i < 200000; ++i) x = x + i;
    per_worker[static_cast<size_t>(worker)].fetch_add(1);
  });
  int used = 0;
  for (auto& w : per_worker) used += w.load() > 0;
  EXPECT_GE(used, 2);
}

TEST(ThreadPoolTest, SurvivesIdleSleepAndDestruction) {
  ThreadPool pool(2);
  std::atomic<int> n{0};
  pool.ParallelFor(4, [&](int64_t, int) { n.fetch_add(1); });
  std::this_thread::sleep_for(std::chrono::milliseconds(20));  // workers go to sleep
  pool.ParallelFor(4, [&](int64_t, int) { n.fetch_add(1); });
  EXPECT_EQ(n.load(), 8);
}

TEST(ThreadPoolTest, NonPositiveSizeMeansOne) {
  ThreadPool pool(0);
  EXPECT_EQ(pool.size(), 1);
  int n = 0;
  pool.ParallelFor(5, [&](int64_t, int w) { n += (w == 0); });
  EXPECT_EQ(n, 5);
}

TEST(ThreadPoolTest, StartHookRunsOnEveryWorkerBeforeTheConstructorReturns) {
  std::mutex mu;
  std::vector<std::thread::id> ids(4);  // [workers] thread of each hook call
  std::vector<int> calls(4, 0);         // [workers]
  ThreadPool pool(4, [&](int worker) {
    std::lock_guard<std::mutex> lock(mu);
    ids[static_cast<size_t>(worker)] = std::this_thread::get_id();
    ++calls[static_cast<size_t>(worker)];
  });
  EXPECT_EQ(calls, (std::vector<int>{0, 1, 1, 1}));  // not worker 0 (the caller)
  // Each worker's tasks run on the thread its hook ran on.
  std::atomic<int> mismatches{0};
  pool.ParallelFor(400, [&](int64_t, int worker) {
    if (worker > 0 && ids[static_cast<size_t>(worker)] != std::this_thread::get_id()) {
      mismatches.fetch_add(1);
    }
  });
  EXPECT_EQ(mismatches.load(), 0);
  ThreadPool empty_hook(2, std::function<void(int)>());
  EXPECT_EQ(empty_hook.size(), 2);
}

TEST(ThreadPoolTest, RunOnEachWorkerRunsEveryWorkerOnce) {
  for (int threads = 1; threads <= 4; ++threads) {
    ThreadPool pool(threads);
    std::vector<int> calls(static_cast<size_t>(threads), 0);  // [workers], one writer each
    std::vector<std::thread::id> ids(static_cast<size_t>(threads));
    // Interleaved with parallel-fors: the two job kinds share the generation counter.
    int64_t sum = 0;
    for (int r = 0; r < 3000; ++r) {
      pool.RunOnEachWorker([&](int worker) {
        ++calls[static_cast<size_t>(worker)];
        ids[static_cast<size_t>(worker)] = std::this_thread::get_id();
      });
      std::atomic<int64_t> s{0};
      pool.ParallelFor(5, [&](int64_t t, int) { s.fetch_add(t); });
      sum += s.load();
    }
    for (int c : calls) EXPECT_EQ(c, 3000) << threads << " threads";
    EXPECT_EQ(sum, 3000 * 10);
    EXPECT_EQ(ids[0], std::this_thread::get_id());
    for (int w = 1; w < threads; ++w) EXPECT_NE(ids[static_cast<size_t>(w)], ids[0]);
  }
}

}  // namespace
}  // namespace moesplit::numa
