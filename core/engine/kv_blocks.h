// Bookkeeping of the KV block pool shared by every sequence of an Engine (kv_cache.h holds the
// values): reference counts, a free list, and a prefix index that lets a new sequence start
// after the longest prefix of full blocks any earlier sequence computed (RadixAttention's idea
// at block granularity: SGLang keys a radix tree by tokens; we key each full block by a hash of
// its tokens chained with its parent's key, so a lookup walks the prompt block by block).
//
// A block is in one of three states:
//   used    ref > 0: in the block table of running sequences (a shared prefix: ref > 1);
//   cached  ref == 0, in the index: kept for later requests, evicted least-recently-used when
//           the pool needs room (leaves first: a lookup touches a path's blocks so that a parent
//           is always more recent than its children);
//   free    ref == 0, not in the index.
// Blocks in the index are never written: a sequence that must write into a shared block (the
// last token of a fully cached prompt is evaluated again for its logits) copies it first
// (copy-on-write, the caller's KvCache::CopyBlock).
#pragma once

#include <cstdint>
#include <span>
#include <unordered_map>
#include <vector>

namespace moesplit::engine {

class KvBlocks {
 public:
  KvBlocks(int32_t n_blocks, int64_t block_size);

  int32_t n_blocks() const { return static_cast<int32_t>(blocks_.size()); }
  int64_t block_size() const { return block_; }
  int32_t used() const { return used_; }
  int32_t cached() const { return cached_; }
  int32_t free() const { return n_blocks() - used_ - cached_; }
  int32_t available() const { return n_blocks() - used_; }  // free + evictable

  // The blocks holding the longest prefix of `tokens` made of full cached blocks (each gets a
  // reference and is touched), at most max_blocks of them.
  std::vector<int32_t> Match(std::span<const int32_t> tokens, int64_t max_blocks);
  // A block with one reference: a free one, else the least recently used cached one (dropped
  // from the index). -1 when every block is used.
  int32_t Allocate();
  // Drops one reference of each block; unreferenced blocks stay cached when indexed, else free.
  void Release(std::span<const int32_t> blocks);
  // Indexes the full blocks of a sequence whose KV holds tokens (blocks[i] holds tokens
  // [i*B, (i+1)*B)). A block whose prefix is already indexed under another block stays out.
  void Insert(std::span<const int32_t> tokens, std::span<const int32_t> blocks);
  int32_t ref(int32_t block) const { return blocks_[static_cast<size_t>(block)].ref; }
  bool indexed(int32_t block) const { return blocks_[static_cast<size_t>(block)].indexed; }
  int64_t evictions() const { return evictions_; }

 private:
  struct Block {
    int32_t ref = 0;
    bool indexed = false;
    uint64_t key = 0;       // index key when indexed
    uint64_t last_use = 0;  // LRU clock
  };
  struct Entry {
    int32_t block;
    uint64_t parent;              // the previous block's key (0: the first block)
    std::vector<int32_t> tokens;  // [B] to tell hash collisions apart
  };
  uint64_t KeyOf(uint64_t parent, std::span<const int32_t> tokens) const;
  // The entry for (parent, tokens), or nullptr.
  const Entry* Find(uint64_t parent, std::span<const int32_t> tokens, uint64_t* key) const;
  void Touch(std::span<const int32_t> path);  // the path's first block ends most recent
  void Unindex(int32_t block);

  int64_t block_;
  std::vector<Block> blocks_;   // [n_blocks]
  std::vector<int32_t> free_;   // free block ids, lowest last (handed out lowest first)
  std::unordered_map<uint64_t, Entry> index_;
  int32_t used_ = 0, cached_ = 0;
  uint64_t clock_ = 0;
  int64_t evictions_ = 0;
};

}  // namespace moesplit::engine
