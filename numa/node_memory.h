// Memory on a chosen NUMA node (or interleaved over several), and the check that it really is
// there: a silent fallback to one node is the classic NUMA failure, so every placement the
// runtime makes is verified with move_pages(2) and reported.
//
// Allocation = anonymous mmap + mbind (MPOL_BIND / MPOL_INTERLEAVE) + MADV_HUGEPAGE where
// transparent huge pages are available, then first touch by threads pinned to the node (so even
// a kernel that ignores the policy places the pages locally). Freed with munmap.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "core/base/status.h"

namespace moesplit {
class Executor;  // core/base/executor.h
}  // namespace moesplit

namespace moesplit::numa {

struct NodeAllocOptions {
  std::vector<int> nodes;  // OS node ids: one = bind there, several = interleave over them
  bool huge_pages = true;  // madvise(MADV_HUGEPAGE) when THP is "madvise" or "always"
  // Workers pinned to the node(s) that write the first touch (page-sized stride); nullptr: the
  // calling thread touches everything.
  Executor* toucher = nullptr;
  // false: no first touch at all (the caller writes every page itself, with threads on the
  // target node or under the bound policy): pages become resident as they are written.
  bool touch = true;
};

// Owns an mmap'ed region; move-only.
class NodeBuffer {
 public:
  NodeBuffer() = default;
  ~NodeBuffer();
  NodeBuffer(NodeBuffer&& other) noexcept;
  NodeBuffer& operator=(NodeBuffer&& other) noexcept;
  NodeBuffer(const NodeBuffer&) = delete;
  NodeBuffer& operator=(const NodeBuffer&) = delete;

  uint8_t* data() const { return data_; }
  size_t size() const { return bytes_; }
  // Policy warnings (mbind refused, THP unavailable...) — empty when everything was honoured.
  const std::vector<std::string>& warnings() const { return warnings_; }

 private:
  friend StatusOr<NodeBuffer> AllocateOnNodes(size_t bytes, const NodeAllocOptions& options);
  uint8_t* data_ = nullptr;
  size_t bytes_ = 0;
  size_t mapped_ = 0;  // bytes_ rounded up to the mapping granularity
  std::vector<std::string> warnings_;
};

// ResourceExhausted naming the bytes and nodes when the mapping fails; InvalidArgument for a node
// id the machine does not have. Policy failures are warnings, not errors.
StatusOr<NodeBuffer> AllocateOnNodes(size_t bytes, const NodeAllocOptions& options);

// Drops this process's pages of [data, data + bytes) of a read-only file mapping (whole pages
// inside the range only; MADV_DONTNEED): a tensor copied or repacked out of the mapping then
// costs its copy's memory only. A later read of the range faults the file's pages back in.
void ReleaseFilePages(const void* data, size_t bytes);

// Where the pages of [data, data + bytes) actually are: move_pages(2) queried on up to
// `max_samples` pages spread evenly over the range.
struct PlacementReport {
  std::vector<int> node_ids;        // OS node ids seen
  std::vector<int64_t> node_pages;  // sampled pages per entry of node_ids
  int64_t not_present = 0;          // sampled pages not faulted in yet
  int64_t sampled = 0;
  int64_t huge_bytes = 0;       // AnonHugePages of the range (/proc/self/smaps), -1 unknown
  std::string Summary() const;  // "node 0: 100% (4096 of 4096 sampled pages), THP 98%"
};
StatusOr<PlacementReport> QueryPlacement(const void* data, size_t bytes, int max_samples = 4096);

// "" when every sampled page that is present sits on one of `planned` (OS node ids); else a
// warning naming the share of pages elsewhere, e.g. "25% of the sampled pages (16 of 64) are on
// node 1, not on node 0 as placed" (the node holding most of the stray pages is named).
std::string PlacementMismatch(const PlacementReport& r, const std::vector<int>& planned);

}  // namespace moesplit::numa
