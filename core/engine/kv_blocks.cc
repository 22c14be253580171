#include "core/engine/kv_blocks.h"

#include <algorithm>
#include <limits>

#include "core/base/status.h"

namespace moesplit::engine {

KvBlocks::KvBlocks(int32_t n_blocks, int64_t block_size)
    : block_(block_size), blocks_(static_cast<size_t>(n_blocks)) {
  MOESPLIT_CHECK(n_blocks > 0 && block_size > 0, "KvBlocks: ", n_blocks, " blocks of ",
                 block_size);
  for (int32_t b = n_blocks; b-- > 0;) free_.push_back(b);
}

uint64_t KvBlocks::KeyOf(uint64_t parent, std::span<const int32_t> tokens) const {
  // FNV-1a over the parent key and the token ids, then a final mix; 0 is reserved for "root".
  uint64_t h = 1469598103934665603ull ^ parent;
  auto mix = [&h](uint64_t v) {
    for (int i = 0; i < 8; ++i) {
      h ^= (v >> (8 * i)) & 0xff;
      h *= 1099511628211ull;
    }
  };
  for (int32_t t : tokens) mix(static_cast<uint32_t>(t));
  h ^= h >> 29;
  return h == 0 ? 1 : h;
}

const KvBlocks::Entry* KvBlocks::Find(uint64_t parent, std::span<const int32_t> tokens,
                                      uint64_t* key) const {
  *key = KeyOf(parent, tokens);
  const auto it = index_.find(*key);
  if (it == index_.end() || it->second.parent != parent ||
      !std::equal(tokens.begin(), tokens.end(), it->second.tokens.begin(),
                  it->second.tokens.end())) {
    return nullptr;
  }
  return &it->second;
}

void KvBlocks::Touch(std::span<const int32_t> path) {
  for (size_t i = path.size(); i-- > 0;) blocks_[static_cast<size_t>(path[i])].last_use = ++clock_;
}

std::vector<int32_t> KvBlocks::Match(std::span<const int32_t> tokens, int64_t max_blocks) {
  std::vector<int32_t> path;
  uint64_t parent = 0;
  const int64_t full = std::min<int64_t>(static_cast<int64_t>(tokens.size()) / block_, max_blocks);
  for (int64_t i = 0; i < full; ++i) {
    uint64_t key = 0;
    const Entry* e = Find(parent, tokens.subspan(static_cast<size_t>(i * block_),
                                                 static_cast<size_t>(block_)),
                          &key);
    if (e == nullptr) break;
    path.push_back(e->block);
    parent = key;
  }
  for (int32_t b : path) {
    Block& blk = blocks_[static_cast<size_t>(b)];
    if (blk.ref++ == 0) {
      --cached_;
      ++used_;
    }
  }
  Touch(path);
  return path;
}

void KvBlocks::Unindex(int32_t block) {
  Block& blk = blocks_[static_cast<size_t>(block)];
  index_.erase(blk.key);
  blk.indexed = false;
  blk.key = 0;
}

int32_t KvBlocks::Allocate() {
  int32_t b = -1;
  if (!free_.empty()) {
    b = free_.back();
    free_.pop_back();
  } else if (cached_ > 0) {  // evict the least recently used cached block
    uint64_t oldest = std::numeric_limits<uint64_t>::max();
    for (int32_t i = 0; i < n_blocks(); ++i) {
      const Block& blk = blocks_[static_cast<size_t>(i)];
      if (blk.ref == 0 && blk.indexed && blk.last_use < oldest) {
        oldest = blk.last_use;
        b = i;
      }
    }
    MOESPLIT_CHECK(b >= 0, "KvBlocks: ", cached_, " cached blocks counted, none found");
    Unindex(b);
    --cached_;
    ++evictions_;
  } else {
    return -1;
  }
  Block& blk = blocks_[static_cast<size_t>(b)];
  blk.ref = 1;
  blk.last_use = ++clock_;
  ++used_;
  return b;
}

void KvBlocks::Release(std::span<const int32_t> blocks) {
  for (int32_t b : blocks) {
    Block& blk = blocks_[static_cast<size_t>(b)];
    MOESPLIT_CHECK(blk.ref > 0, "KvBlocks: block ", b, " released without a reference");
    if (--blk.ref > 0) continue;
    --used_;
    if (blk.indexed) {
      ++cached_;
    } else {
      free_.push_back(b);
    }
  }
  // Keep handing out the lowest ids first (a lone sequence then gets consecutive blocks and
  // attention reads them in place).
  std::sort(free_.begin(), free_.end(), std::greater<>());
}

void KvBlocks::Insert(std::span<const int32_t> tokens, std::span<const int32_t> blocks) {
  uint64_t parent = 0;
  const size_t full = std::min(tokens.size() / static_cast<size_t>(block_), blocks.size());
  std::vector<int32_t> path;
  for (size_t i = 0; i < full; ++i) {
    const std::span<const int32_t> t =
        tokens.subspan(i * static_cast<size_t>(block_), static_cast<size_t>(block_));
    uint64_t key = 0;
    const Entry* e = Find(parent, t, &key);
    const int32_t b = blocks[i];
    if (e != nullptr) {
      // Indexed already: this block (it came from Match) or another one that computed the same
      // prefix (ours stays out; the keys chain contents, so the next blocks index either way).
      if (e->block == b) path.push_back(b);
      parent = key;
      continue;
    }
    Block& blk = blocks_[static_cast<size_t>(b)];
    if (blk.indexed) break;  // indexed under another prefix (cannot happen for a live table)
    if (index_.count(key) != 0) break;  // a hash collision: leave it out
    index_.emplace(key, Entry{b, parent, std::vector<int32_t>(t.begin(), t.end())});
    blk.indexed = true;
    blk.key = key;
    if (blk.ref == 0) {  // (callers insert live tables; an unreferenced block would be free)
      ++cached_;
      free_.erase(std::remove(free_.begin(), free_.end(), b), free_.end());
    }
    path.push_back(b);
    parent = key;
  }
  Touch(path);
}

}  // namespace moesplit::engine
