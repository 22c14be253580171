// Zero-filled memory whose pages become resident only when written: an anonymous private
// mapping (the kernel hands out zero pages on first touch). For buffers sized for the worst case
// and filled front to back, such as the KV cache: `-c 4096` on DeepSeek-V2-Lite (27 layers, f32
// latent rows of 576 + the transposed 512 values = 4,352 B per position and layer) reserves
// 27 x 4096 x 4352 B = 481 MB, of which a 100-token chat touches ~12 MB. A std::vector would
// write (and so keep resident) all of it.
//
// No MAP_NORESERVE: the kernel's overcommit check still refuses a mapping larger than the
// machine can ever back, so such a request fails here with a clear error rather than later
// with the OOM killer.
//
// Mappings of 2 MiB and more ask for transparent huge pages (MADV_HUGEPAGE), so memory becomes
// resident 2 MiB at a time where the kernel grants them. Why: long-context MLA decode reads every
// layer's latent cache rows per token, and on 4 KiB pages that walk missed the TLB: ds-v2-lite
// at 2048 positions reads 127 MB of rows over 31k pages per token, their page tables evicted by
// the 1.6 GB of weights between two reads. On one Zen 5 core "attention (cache, scores)" took
// 41.8 ms per token on 4 KiB pages and 19.1 on huge pages (bench tg32 @ d2048 -t 1). The cost:
// a written KV position makes 2 MiB per layer resident (27 layers: 54 MB), not 4 KiB.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>
#include <utility>

#include "core/base/status.h"

namespace moesplit {

inline constexpr size_t kHugePage = size_t{2} << 20;  // x86-64's transparent huge page

class ZeroedPages {
 public:
  ZeroedPages() = default;
  ~ZeroedPages();
  ZeroedPages(ZeroedPages&& other) noexcept
      : data_(std::exchange(other.data_, nullptr)), bytes_(std::exchange(other.bytes_, 0)) {}
  ZeroedPages& operator=(ZeroedPages&& other) noexcept;
  ZeroedPages(const ZeroedPages&) = delete;
  ZeroedPages& operator=(const ZeroedPages&) = delete;

  // ResourceExhausted naming `what`, the bytes and the machine's RAM when the mapping is
  // refused, followed by `hint` (what to do). 0 bytes: empty.
  static StatusOr<ZeroedPages> Map(size_t bytes, std::string_view what, std::string_view hint);

  uint8_t* data() const { return data_; }
  size_t size() const { return bytes_; }
  // Bytes of it resident now (mincore(2)); for tests and reports.
  size_t ResidentBytes() const;

 private:
  uint8_t* data_ = nullptr;
  size_t bytes_ = 0;
};

// The machine's physical memory in bytes (sysconf), 0 when unknown.
uint64_t PhysicalMemoryBytes();
// ResourceExhausted: "cannot reserve <GB> for the <what>; this machine has <GB> of RAM: <hint>".
Status CannotReserveError(uint64_t bytes, std::string_view what, std::string_view hint);

// A typed view: n zero-initialised T (trivially copyable) in ZeroedPages.
template <class T>
class ZeroedArray {
 public:
  ZeroedArray() = default;
  static StatusOr<ZeroedArray> Map(size_t n, std::string_view what, std::string_view hint) {
    ZeroedArray a;
    MOESPLIT_ASSIGN_OR_RETURN(a.pages_, ZeroedPages::Map(n * sizeof(T), what, hint));
    a.n_ = n;
    return a;
  }
  T* data() { return reinterpret_cast<T*>(pages_.data()); }
  const T* data() const { return reinterpret_cast<const T*>(pages_.data()); }
  size_t size() const { return n_; }
  T& operator[](size_t i) { return data()[i]; }
  const T& operator[](size_t i) const { return data()[i]; }
  size_t ResidentBytes() const { return pages_.ResidentBytes(); }

 private:
  ZeroedPages pages_;
  size_t n_ = 0;  // elements
};

}  // namespace moesplit
