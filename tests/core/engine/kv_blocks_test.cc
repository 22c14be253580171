// The KV pool's bookkeeping: references, the prefix index, LRU eviction (leaves first).
#include "core/engine/kv_blocks.h"

#include <gtest/gtest.h>

#include <numeric>
#include <vector>

namespace moesplit::engine {
namespace {

std::vector<int32_t> Tokens(int n, int start) {
  std::vector<int32_t> t(static_cast<size_t>(n));
  std::iota(t.begin(), t.end(), start);
  return t;
}

// A sequence: blocks for `tokens` allocated, then indexed and released (a finished request).
std::vector<int32_t> RunAndFinish(KvBlocks& kv, const std::vector<int32_t>& tokens) {
  std::vector<int32_t> blocks = kv.Match(tokens, static_cast<int64_t>(tokens.size()) / 4);
  while (blocks.size() * 4 < tokens.size()) blocks.push_back(kv.Allocate());
  kv.Insert(tokens, blocks);
  kv.Release(blocks);
  return blocks;
}

TEST(KvBlocksTest, LowestBlocksFirstAndCounts) {
  KvBlocks kv(4, 4);
  EXPECT_EQ(kv.Allocate(), 0);
  EXPECT_EQ(kv.Allocate(), 1);
  EXPECT_EQ(kv.used(), 2);
  EXPECT_EQ(kv.free(), 2);
  const int32_t zero = 0;
  kv.Release({&zero, 1});
  EXPECT_EQ(kv.Allocate(), 0);  // the lowest free id again
  EXPECT_EQ(kv.Allocate(), 2);
  EXPECT_EQ(kv.Allocate(), 3);
  EXPECT_EQ(kv.Allocate(), -1);  // every block used, none cached
}

TEST(KvBlocksTest, FinishedSequencesLeaveTheirFullBlocksCached) {
  KvBlocks kv(8, 4);
  const std::vector<int32_t> a = Tokens(10, 100);  // 2 full blocks + 2 tokens
  const std::vector<int32_t> blocks = RunAndFinish(kv, a);
  EXPECT_EQ(kv.cached(), 2);
  EXPECT_EQ(kv.free(), 6);
  // The same first 9 tokens then others: 2 blocks match; 8 tokens is the limit asked for.
  std::vector<int32_t> b(a.begin(), a.begin() + 9);
  b.push_back(7);
  std::vector<int32_t> m = kv.Match(b, 2);
  EXPECT_EQ(m, std::vector<int32_t>(blocks.begin(), blocks.begin() + 2));
  EXPECT_EQ(kv.used(), 2);
  EXPECT_EQ(kv.ref(m[0]), 1);
  kv.Release(m);
  // A different second block: only the first matches.
  std::vector<int32_t> c(a.begin(), a.begin() + 4);
  c.insert(c.end(), {1, 2, 3, 4});
  m = kv.Match(c, 2);
  ASSERT_EQ(m.size(), 1u);
  EXPECT_EQ(m[0], blocks[0]);
  kv.Release(m);
  // A different first block: nothing, even if the second is equal.
  std::vector<int32_t> d = a;
  d[0] = 1;
  EXPECT_TRUE(kv.Match(d, 2).empty());
}

TEST(KvBlocksTest, EvictsTheLeastRecentlyUsedLeafFirst) {
  KvBlocks kv(4, 4);
  const std::vector<int32_t> a = Tokens(12, 0);  // 3 cached blocks: a chain
  RunAndFinish(kv, a);
  EXPECT_EQ(kv.cached(), 3);
  EXPECT_EQ(kv.free(), 1);
  EXPECT_GE(kv.Allocate(), 0);  // the free one
  const int32_t evicted = kv.Allocate();  // now a cached one: the chain's leaf (block of 8..11)
  ASSERT_GE(evicted, 0);
  EXPECT_EQ(kv.evictions(), 1);
  EXPECT_FALSE(kv.indexed(evicted));
  std::vector<int32_t> m = kv.Match(a, 3);
  EXPECT_EQ(m.size(), 2u) << "the root and middle blocks stay";
  kv.Release(m);
}

TEST(KvBlocksTest, ASecondCopyOfAPrefixStaysOutOfTheIndex) {
  KvBlocks kv(8, 4);
  const std::vector<int32_t> a = Tokens(8, 50);
  RunAndFinish(kv, a);
  // Another sequence computed the same 8 tokens in its own blocks (admitted before the first
  // finished): inserting it indexes nothing new, and its blocks come back free.
  std::vector<int32_t> own = {kv.Allocate(), kv.Allocate()};
  kv.Insert(a, own);
  kv.Release(own);
  EXPECT_EQ(kv.cached(), 2);
  EXPECT_EQ(kv.free(), 6);
}

}  // namespace
}  // namespace moesplit::engine
