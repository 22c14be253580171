#include "numa/node_memory.h"

#include <gtest/gtest.h>
#include <sched.h>
#include <sys/mman.h>

#include <cstring>

#include "numa/affinity.h"
#include "numa/thread_pool.h"

namespace moesplit::numa {
namespace {

TEST(NodeMemory, BindsToNodeZeroAndReportsIt) {
  const size_t bytes = (size_t{8} << 20) + 123;  // not a multiple of any page size
  ThreadPool toucher(2);
  StatusOr<NodeBuffer> buf = AllocateOnNodes(bytes, {.nodes = {0}, .toucher = &toucher});
  ASSERT_TRUE(buf.ok()) << buf.status().ToString();
  ASSERT_NE(buf->data(), nullptr);
  EXPECT_EQ(buf->size(), bytes);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(buf->data()) % (2 << 20), 0u);  // THP-aligned start
  std::memset(buf->data(), 0x5a, bytes);  // the whole range is writable
  StatusOr<PlacementReport> r = QueryPlacement(buf->data(), bytes, 64);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->sampled, 64);
  EXPECT_EQ(r->not_present, 0);
  ASSERT_EQ(r->node_ids.size(), 1u);
  EXPECT_EQ(r->node_ids[0], 0);
  EXPECT_EQ(r->node_pages[0], 64);
  EXPECT_NE(r->Summary().find("node 0: 100%"), std::string::npos) << r->Summary();
}

// The check run/chat/bench print with the expert placement: silent when the pages are where
// the plan put them, a warning naming both nodes when they are not (here: the one node this
// machine has, against a plan that said node 1).
TEST(NodeMemory, PlacementMismatchWarnsOnlyWhenPagesAreElsewhere) {
  const size_t bytes = size_t{4} << 20;
  StatusOr<NodeBuffer> buf = AllocateOnNodes(bytes, {.nodes = {0}});
  ASSERT_TRUE(buf.ok()) << buf.status().ToString();
  StatusOr<PlacementReport> r = QueryPlacement(buf->data(), bytes, 64);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(PlacementMismatch(*r, {0}), "");
  EXPECT_EQ(PlacementMismatch(*r, {0, 1}), "");  // interleave over both: node 0 is one of them
  EXPECT_EQ(PlacementMismatch(*r, {1}),
            "100% of the sampled pages (64 of 64) are on node 0, not on node 1 as placed");

  // A synthetic report (a two-node machine): 16 of 64 pages fell back to node 1.
  PlacementReport two;
  two.node_ids = {0, 1};
  two.node_pages = {48, 16};
  two.sampled = 64;
  EXPECT_EQ(PlacementMismatch(two, {0}),
            "25% of the sampled pages (16 of 64) are on node 1, not on node 0 as placed");
  EXPECT_EQ(PlacementMismatch(two, {1, 0}), "");
  // Pages not faulted in yet are no mismatch.
  PlacementReport untouched;
  untouched.sampled = 16;
  untouched.not_present = 16;
  EXPECT_EQ(PlacementMismatch(untouched, {3}), "");
}

TEST(NodeMemory, InterleaveOverOneNodeAndMove) {
  StatusOr<NodeBuffer> a = AllocateOnNodes(1 << 20, {.nodes = {0}, .huge_pages = false});
  ASSERT_TRUE(a.ok());
  uint8_t* p = a->data();
  NodeBuffer b = std::move(*a);  // ownership moves, no double unmap
  EXPECT_EQ(b.data(), p);
  EXPECT_EQ(a->data(), nullptr);
  StatusOr<NodeBuffer> empty = AllocateOnNodes(0, {.nodes = {0}});
  ASSERT_TRUE(empty.ok());
  EXPECT_EQ(empty->data(), nullptr);
}

TEST(NodeMemory, UnknownNodeIsAnError) {
  StatusOr<NodeBuffer> buf = AllocateOnNodes(4096, {.nodes = {999}});
  ASSERT_FALSE(buf.ok());
  EXPECT_NE(buf.status().ToString().find("NUMA node 999"), std::string::npos);
  EXPECT_FALSE(AllocateOnNodes(4096, {.nodes = {}}).ok());
}

TEST(NodeMemory, UntouchedPagesAreReportedAsNotPresent) {
  const size_t bytes = 1 << 20;
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(p, MAP_FAILED);
  StatusOr<PlacementReport> r = QueryPlacement(p, bytes, 16);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->not_present, 16);
  EXPECT_TRUE(r->node_ids.empty());
  EXPECT_NE(r->Summary().find("not faulted in"), std::string::npos);
  munmap(p, bytes);
}

TEST(Affinity, PinsToAnAllowedCpuAndRefusesOthers) {
  const std::vector<int> allowed = AllowedCpus();
  ASSERT_FALSE(allowed.empty());
  std::thread t([&] {
    ASSERT_TRUE(PinCurrentThread({allowed.back()}).ok());
    EXPECT_EQ(sched_getcpu(), allowed.back());
    EXPECT_EQ(AllowedCpus(), std::vector<int>{allowed.back()});
    const Status bad = PinCurrentThread({1023});  // no such CPU here
    if (std::find(allowed.begin(), allowed.end(), 1023) == allowed.end()) {
      EXPECT_FALSE(bad.ok());
      EXPECT_NE(bad.ToString().find("1023"), std::string::npos) << bad.ToString();
    }
    EXPECT_FALSE(PinCurrentThread({}).ok());
    EXPECT_FALSE(PinCurrentThread({-1}).ok());
  });
  t.join();
}

}  // namespace
}  // namespace moesplit::numa
