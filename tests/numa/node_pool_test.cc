#include "numa/node_pool.h"

#include <gtest/gtest.h>
#include <sched.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <thread>
#include <vector>

#include "numa/affinity.h"

namespace moesplit::numa {
namespace {

// The CPUs the calling thread may run on (its own mask, not the process's).
std::vector<int> ThreadCpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  std::vector<int> out;
  if (sched_getaffinity(0, sizeof(set), &set) != 0) return out;
  for (int c = 0; c < CPU_SETSIZE; ++c) {
    if (CPU_ISSET(c, &set)) out.push_back(c);
  }
  return out;
}

// What one worker saw from inside a task.
struct Seen {
  std::vector<int> mask;  // ThreadCpus() of the worker's thread
  int cpu = -1;           // sched_getcpu() while running the task
  std::thread::id thread;
};

// Runs exactly one task on every worker: size() tasks, each waiting until all have started, so
// no thread can take two (a blocked thread claims nothing). Fails instead of hanging after 10 s.
std::vector<Seen> SeenByEachWorker(Executor& pool) {
  const int n = pool.size();
  std::vector<Seen> seen(static_cast<size_t>(n));  // [workers]
  std::atomic<int> started{0};
  std::atomic<bool> timed_out{false};
  pool.ParallelFor(n, [&](int64_t, int worker) {
    started.fetch_add(1);
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (started.load() < n) {
      if (std::chrono::steady_clock::now() > deadline) {
        timed_out.store(true);
        break;
      }
      std::this_thread::yield();
    }
    Seen& s = seen[static_cast<size_t>(worker)];
    s.mask = ThreadCpus();
    s.cpu = sched_getcpu();
    s.thread = std::this_thread::get_id();
  });
  EXPECT_FALSE(timed_out.load()) << "not every worker took a task";
  return seen;
}

int64_t SumOfTasks(Executor& pool, int64_t n) {
  std::atomic<int64_t> sum{0};
  pool.ParallelFor(n, [&](int64_t task, int) { sum.fetch_add(task + 1); });
  return sum.load();
}

TEST(NodePoolTest, PinnedWorkersRunOnTheirCpus) {
  const std::vector<int> allowed = AllowedCpus();
  ASSERT_FALSE(allowed.empty());
  // Repeats are fine: one worker per entry, on a 2-CPU box too.
  NodePool pool({.node = 0, .cpus = {allowed.front(), allowed.back(), allowed.front()}});
  EXPECT_EQ(pool.size(), 3);
  EXPECT_EQ(pool.node(), 0);
  EXPECT_TRUE(pool.warnings().empty()) << pool.warnings().front();
  const std::vector<Seen> seen = SeenByEachWorker(pool);
  for (int w = 1; w < pool.size(); ++w) {
    const int cpu = pool.cpus()[static_cast<size_t>(w)];
    EXPECT_EQ(seen[static_cast<size_t>(w)].mask, std::vector<int>{cpu}) << "worker " << w;
    EXPECT_EQ(seen[static_cast<size_t>(w)].cpu, cpu) << "worker " << w;
  }
  EXPECT_EQ(seen[0].thread, std::this_thread::get_id());  // worker 0 = the caller, not pinned
  EXPECT_EQ(seen[0].mask, ThreadCpus());
  EXPECT_EQ(SumOfTasks(pool, 1000), 1000 * 1001 / 2);
}

TEST(NodePoolTest, WithoutPinNothingIsPinned) {
  const std::vector<int> allowed = AllowedCpus();
  if (allowed.size() < 2) GTEST_SKIP() << "needs 2 allowed CPUs to tell pinned from not";
  NodePool pool({.node = 0, .cpus = {allowed.back(), allowed.back()}, .pin = false});
  EXPECT_TRUE(pool.warnings().empty());
  const std::vector<Seen> seen = SeenByEachWorker(pool);
  EXPECT_EQ(seen[1].mask, allowed);
}

TEST(NodePoolTest, UnpinnableCpuWarnsAndStillWorks) {
  const std::vector<int> allowed = AllowedCpus();
  ASSERT_FALSE(allowed.empty());
  NodePool pool({.node = 3, .cpus = {allowed.front(), 4095}});
  EXPECT_EQ(pool.size(), 2);
  ASSERT_EQ(pool.warnings().size(), 1u);
  const std::string& w = pool.warnings()[0];
  EXPECT_NE(w.find("node 3 worker 1"), std::string::npos) << w;
  EXPECT_NE(w.find("4095"), std::string::npos) << w;
  EXPECT_NE(w.find("unpinned"), std::string::npos) << w;
  EXPECT_EQ(SumOfTasks(pool, 5000), 5000 * 5001 / 2);
  const std::vector<Seen> seen = SeenByEachWorker(pool);
  EXPECT_EQ(seen[1].mask, allowed);  // floats over the allowed set
}

TEST(NodePoolTest, PinCallerPinsTheFirstCaller) {
  const std::vector<int> allowed = AllowedCpus();
  ASSERT_FALSE(allowed.empty());
  // On its own thread: pinning the test's main thread would leak into later tests.
  std::thread t([&] {
    NodePool pool({.node = 0, .cpus = {allowed.back(), allowed.front()}, .pin_caller = true});
    EXPECT_EQ(ThreadCpus(), allowed);  // not before the first ParallelFor
    const std::vector<Seen> seen = SeenByEachWorker(pool);
    EXPECT_EQ(seen[0].mask, std::vector<int>{allowed.back()});
    EXPECT_EQ(ThreadCpus(), std::vector<int>{allowed.back()});
    EXPECT_TRUE(pool.warnings().empty());
  });
  t.join();
  std::thread bad([&] {
    NodePool pool({.node = 0, .cpus = {4095}, .pin_caller = true});
    EXPECT_EQ(SumOfTasks(pool, 10), 55);
    ASSERT_EQ(pool.warnings().size(), 1u);
    EXPECT_NE(pool.warnings()[0].find("(the caller)"), std::string::npos) << pool.warnings()[0];
    EXPECT_EQ(ThreadCpus(), allowed);
  });
  bad.join();
}

TEST(NodeFanoutTest, SumsOverPools) {
  const std::vector<int> allowed = AllowedCpus();
  const int a = allowed.front(), b = allowed.back();
  NodeFanout fan(
      {{.node = 0, .cpus = {a, b}}, {.node = 1, .cpus = {b}}, {.node = 2, .cpus = {b, a, b}}});
  ASSERT_EQ(fan.num_nodes(), 3);
  EXPECT_TRUE(fan.warnings().empty());
  EXPECT_EQ(fan.pool(2).size(), 3);
  std::vector<int64_t> sums(3, 0);          // [nodes]
  std::vector<std::thread::id> threads(3);  // [nodes] thread that ran fn
  std::vector<std::vector<int>> masks(3);   // [nodes] its affinity
  fan.Run([&](int i, NodePool& pool) {
    threads[static_cast<size_t>(i)] = std::this_thread::get_id();
    masks[static_cast<size_t>(i)] = ThreadCpus();
    sums[static_cast<size_t>(i)] = SumOfTasks(pool, 1000 * (i + 1));
  });
  for (int i = 0; i < 3; ++i) {
    const int64_t n = 1000 * (i + 1);
    EXPECT_EQ(sums[static_cast<size_t>(i)], n * (n + 1) / 2) << "node " << i;
  }
  EXPECT_EQ(threads[0], std::this_thread::get_id());  // node 0 on the caller
  EXPECT_NE(threads[1], threads[0]);
  EXPECT_NE(threads[2], threads[0]);
  EXPECT_NE(threads[1], threads[2]);
  EXPECT_EQ(masks[1], std::vector<int>{b});  // leader i pinned to cpus[0] of pool i
  EXPECT_EQ(masks[2], std::vector<int>{b});
}

TEST(NodeFanoutTest, ManyTinyRunsLoseNoWakeUp) {
  const std::vector<int> allowed = AllowedCpus();
  NodeFanout fan({{.cpus = {allowed.front()}}, {.node = 1, .cpus = {allowed.back()}}});
  std::vector<int> runs(2, 0);  // [nodes]: each written by one leader only
  for (int r = 0; r < 10000; ++r) {
    fan.Run([&](int i, NodePool&) { ++runs[static_cast<size_t>(i)]; });
  }
  EXPECT_EQ(runs[0], 10000);
  EXPECT_EQ(runs[1], 10000);
  // With a parallel-for inside each node, and a sleep so that every thread goes idle once.
  NodeFanout fan2({{.cpus = {allowed.front(), allowed.back()}},
                   {.node = 1, .cpus = {allowed.back(), allowed.front()}}});
  std::vector<int64_t> sums(2, 0);  // [nodes]
  for (int r = 0; r < 2000; ++r) {
    if (r == 1000) std::this_thread::sleep_for(std::chrono::milliseconds(20));
    fan2.Run([&](int i, NodePool& pool) { sums[static_cast<size_t>(i)] += SumOfTasks(pool, 4); });
  }
  EXPECT_EQ(sums[0], 2000 * 10);
  EXPECT_EQ(sums[1], 2000 * 10);
}

TEST(NodeFanoutTest, OnePoolAndPoolsOfSizeOne) {
  NodeFanout one(std::vector<NodePoolOptions>{{.cpus = {AllowedCpus().front()}}});
  int calls = 0;
  one.Run([&](int i, NodePool& pool) {
    EXPECT_EQ(i, 0);
    EXPECT_EQ(pool.size(), 1);
    calls += static_cast<int>(SumOfTasks(pool, 3));
  });
  EXPECT_EQ(calls, 6);
  const int c = AllowedCpus().front();
  NodeFanout three({{.cpus = {c}}, {.node = 1, .cpus = {c}}, {.node = 2, .cpus = {c}}});
  std::vector<int64_t> sums(3, 0);  // [nodes]
  for (int r = 0; r < 100; ++r) {
    three.Run([&](int i, NodePool& pool) { sums[static_cast<size_t>(i)] += SumOfTasks(pool, 5); });
  }
  for (int64_t s : sums) EXPECT_EQ(s, 100 * 15);
}

TEST(NodeFanoutTest, UnpinnableLeaderWarns) {
  NodeFanout fan({{.cpus = {AllowedCpus().front()}}, {.node = 1, .cpus = {4095, 4094}}});
  const std::vector<std::string> w = fan.warnings();
  // Pool 1: its worker 1 (cpu 4094) and its leader (cpu 4095) could not be pinned.
  ASSERT_EQ(w.size(), 2u);
  EXPECT_NE(w[0].find("node 1 worker 1"), std::string::npos) << w[0];
  EXPECT_NE(w[1].find("node 1 worker 0 (leader)"), std::string::npos) << w[1];
  std::vector<int64_t> sums(2, 0);  // [nodes]
  fan.Run([&](int i, NodePool& pool) { sums[static_cast<size_t>(i)] = SumOfTasks(pool, 100); });
  EXPECT_EQ(sums[0], 5050);
  EXPECT_EQ(sums[1], 5050);
}

}  // namespace
}  // namespace moesplit::numa
