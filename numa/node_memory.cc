#include "numa/node_memory.h"

#include <numa.h>
#include <numaif.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include "core/base/executor.h"

namespace moesplit::numa {

namespace {

constexpr size_t kHugePage = size_t{2} << 20;  // x86-64 THP size: 2 MiB

size_t PageSize() { return static_cast<size_t>(sysconf(_SC_PAGESIZE)); }

// "always" / "madvise" when transparent huge pages can back an madvise(MADV_HUGEPAGE) range.
std::string ThpMode() {
  std::ifstream f("/sys/kernel/mm/transparent_hugepage/enabled");
  std::string line;
  if (!f || !std::getline(f, line)) return "unknown";
  const size_t a = line.find('['), b = line.find(']');
  return (a == std::string::npos || b == std::string::npos) ? "unknown"
                                                            : line.substr(a + 1, b - a - 1);
}

Status CheckNodes(const std::vector<int>& nodes) {
  if (nodes.empty()) return InvalidArgumentError("no NUMA node given for the allocation");
  const int max_node = numa_available() < 0 ? 0 : numa_max_node();
  for (int n : nodes) {
    if (n < 0 || n > max_node || (numa_available() >= 0 && numa_node_size64(n, nullptr) <= 0)) {
      return InvalidArgumentError("NUMA node ", n,
                                  " does not exist or has no memory on this "
                                  "machine (nodes 0..",
                                  max_node, "; see `moesplit topo`)");
    }
  }
  return Status::Ok();
}

// mbind the range to `nodes` (bind for one node, interleave for several); a refusal is a warning.
void ApplyPolicy(uint8_t* p, size_t bytes, const std::vector<int>& nodes,
                 std::vector<std::string>* warnings) {
  if (numa_available() < 0) {
    warnings->push_back(
        "NUMA policy not applied: the kernel reports no NUMA support "
        "(container or non-NUMA kernel); pages go where the OS puts them");
    return;
  }
  unsigned long mask[16] = {};  // up to 1024 nodes
  for (int n : nodes) mask[n / 64] |= 1ul << (n % 64);
  const int mode = nodes.size() == 1 ? MPOL_BIND : MPOL_INTERLEAVE;
  if (mbind(p, bytes, mode, mask, 1024, 0) != 0) {
    warnings->push_back(std::string("mbind(") + (mode == MPOL_BIND ? "bind" : "interleave") +
                        ") refused: " + std::strerror(errno) +
                        "; placement relies on first touch only");
  }
}

}  // namespace

NodeBuffer::~NodeBuffer() {
  if (data_ != nullptr) munmap(data_, mapped_);
}

NodeBuffer::NodeBuffer(NodeBuffer&& o) noexcept
    : data_(o.data_), bytes_(o.bytes_), mapped_(o.mapped_), warnings_(std::move(o.warnings_)) {
  o.data_ = nullptr;
  o.bytes_ = o.mapped_ = 0;
}

NodeBuffer& NodeBuffer::operator=(NodeBuffer&& o) noexcept {
  if (this != &o) {
    if (data_ != nullptr) munmap(data_, mapped_);
    data_ = o.data_;
    bytes_ = o.bytes_;
    mapped_ = o.mapped_;
    warnings_ = std::move(o.warnings_);
    o.data_ = nullptr;
    o.bytes_ = o.mapped_ = 0;
  }
  return *this;
}

StatusOr<NodeBuffer> AllocateOnNodes(size_t bytes, const NodeAllocOptions& options) {
  MOESPLIT_RETURN_IF_ERROR(CheckNodes(options.nodes));
  NodeBuffer buf;
  if (bytes == 0) return buf;
  // Map 2 MiB more than needed and trim to a 2 MiB-aligned start, so THP can back whole pages.
  const size_t mapped = (bytes + kHugePage - 1) / kHugePage * kHugePage;
  void* raw = mmap(nullptr, mapped + kHugePage, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (raw == MAP_FAILED) {
    return ResourceExhaustedError("cannot map ", bytes, " bytes for NUMA node(s) ",
                                  options.nodes.front(), (options.nodes.size() > 1 ? "..." : ""),
                                  ": ", std::strerror(errno));
  }
  uint8_t* base = static_cast<uint8_t*>(raw);
  uint8_t* p = reinterpret_cast<uint8_t*>((reinterpret_cast<uintptr_t>(base) + kHugePage - 1) /
                                          kHugePage * kHugePage);
  if (p > base) munmap(base, p - base);
  const size_t tail = (base + mapped + kHugePage) - (p + mapped);
  if (tail > 0) munmap(p + mapped, tail);
  buf.data_ = p;
  buf.bytes_ = bytes;
  buf.mapped_ = mapped;

  ApplyPolicy(p, mapped, options.nodes, &buf.warnings_);
  if (options.huge_pages) {
    const std::string thp = ThpMode();
    if (thp != "always" && thp != "madvise") {
      buf.warnings_.push_back("transparent huge pages are '" + thp +
                              "': weights stay on 4 KiB pages (more TLB misses)");
    } else if (madvise(p, mapped, MADV_HUGEPAGE) != 0) {
      buf.warnings_.push_back(std::string("madvise(MADV_HUGEPAGE) refused: ") +
                              std::strerror(errno));
    }
  }
  if (!options.touch) return buf;
  // First touch: one store per 4 KiB page, in 2 MiB chunks spread over the toucher's workers
  // (pinned to the target node), so the pages are faulted in where they will be read.
  const size_t page = PageSize();
  const int64_t chunks = static_cast<int64_t>(mapped / kHugePage);
  auto touch = [&](int64_t c, int) {
    volatile uint8_t* q = p + c * kHugePage;
    for (size_t off = 0; off < kHugePage; off += page) q[off] = 0;
  };
  if (options.toucher != nullptr) {
    options.toucher->ParallelFor(chunks, touch);
  } else {
    for (int64_t c = 0; c < chunks; ++c) touch(c, 0);
  }
  return buf;
}

namespace {

// AnonHugePages (bytes) of the mappings overlapping [lo, hi) in /proc/self/smaps; -1 if unknown.
int64_t HugeBytes(uintptr_t lo, uintptr_t hi) {
  std::ifstream f("/proc/self/smaps");
  if (!f) return -1;
  std::string line;
  bool in_range = false;
  int64_t total = 0;
  while (std::getline(f, line)) {
    unsigned long a = 0, b = 0;
    char dash = 0;
    std::istringstream head(line);
    if (line.find('-') != std::string::npos && (head >> std::hex >> a >> dash >> b) &&
        dash == '-') {
      in_range = a < hi && b > lo;
      continue;
    }
    if (in_range && line.rfind("AnonHugePages:", 0) == 0) {
      total += std::stoll(line.substr(14)) * 1024;
    }
  }
  return total;
}

}  // namespace

void ReleaseFilePages(const void* data, size_t bytes) {
  if (data == nullptr) return;
  const uintptr_t page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
  const uintptr_t lo = (reinterpret_cast<uintptr_t>(data) + page - 1) / page * page;
  const uintptr_t hi = (reinterpret_cast<uintptr_t>(data) + bytes) / page * page;
  if (hi > lo) madvise(reinterpret_cast<void*>(lo), hi - lo, MADV_DONTNEED);
}

StatusOr<PlacementReport> QueryPlacement(const void* data, size_t bytes, int max_samples) {
  PlacementReport r;
  if (data == nullptr || bytes == 0) return r;
  const size_t page = PageSize();
  const uintptr_t lo = reinterpret_cast<uintptr_t>(data) / page * page;
  const uintptr_t hi = reinterpret_cast<uintptr_t>(data) + bytes;
  const int64_t n_pages = static_cast<int64_t>((hi - lo + page - 1) / page);
  const int64_t n = std::min<int64_t>(n_pages, std::max(1, max_samples));
  std::vector<void*> pages(n);
  for (int64_t i = 0; i < n; ++i) {
    pages[i] = reinterpret_cast<void*>(lo + (n_pages * i / n) * page);
  }
  std::vector<int> status(n, -1);
  if (numa_available() < 0) {
    return FailedPreconditionError("cannot query page placement: no NUMA support in this kernel");
  }
  if (move_pages(0, n, pages.data(), nullptr, status.data(), 0) != 0) {
    return FailedPreconditionError("move_pages query failed: ", std::strerror(errno));
  }
  r.sampled = n;
  for (int s : status) {
    if (s < 0) {
      ++r.not_present;
      continue;
    }
    auto it = std::find(r.node_ids.begin(), r.node_ids.end(), s);
    if (it == r.node_ids.end()) {
      r.node_ids.push_back(s);
      r.node_pages.push_back(1);
    } else {
      ++r.node_pages[it - r.node_ids.begin()];
    }
  }
  r.huge_bytes = HugeBytes(lo, hi);
  return r;
}

std::string PlacementReport::Summary() const {
  std::ostringstream s;
  for (size_t i = 0; i < node_ids.size(); ++i) {
    if (i) s << ", ";
    s << "node " << node_ids[i] << ": " << (sampled ? 100 * node_pages[i] / sampled : 0) << "% ("
      << node_pages[i] << " of " << sampled << " sampled pages)";
  }
  if (not_present > 0) {
    s << (node_ids.empty() ? "" : ", ") << not_present << " of " << sampled
      << " sampled pages not faulted in";
  }
  if (sampled == 0) s << "empty range";
  if (huge_bytes >= 0) s << ", THP " << huge_bytes / (1 << 20) << " MiB";
  return s.str();
}

std::string PlacementMismatch(const PlacementReport& r, const std::vector<int>& planned) {
  int64_t stray = 0, worst_pages = 0;
  int worst_node = -1;
  for (size_t i = 0; i < r.node_ids.size(); ++i) {
    if (std::find(planned.begin(), planned.end(), r.node_ids[i]) != planned.end()) continue;
    stray += r.node_pages[i];
    if (r.node_pages[i] > worst_pages) worst_pages = r.node_pages[i], worst_node = r.node_ids[i];
  }
  if (stray == 0 || r.sampled == 0) return "";
  std::ostringstream s;
  s << 100 * stray / r.sampled << "% of the sampled pages (" << stray << " of " << r.sampled
    << ") are on node " << worst_node << ", not on node";
  if (planned.size() > 1) s << "s";
  for (size_t i = 0; i < planned.size(); ++i) s << (i ? ", " : " ") << planned[i];
  s << " as placed";
  return s.str();
}

}  // namespace moesplit::numa
