#include "core/base/zeroed_pages.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cstdio>
#include <vector>

namespace moesplit {

ZeroedPages::~ZeroedPages() {
  if (data_ != nullptr) munmap(data_, bytes_);
}

ZeroedPages& ZeroedPages::operator=(ZeroedPages&& other) noexcept {
  if (this != &other) {
    if (data_ != nullptr) munmap(data_, bytes_);
    data_ = std::exchange(other.data_, nullptr);
    bytes_ = std::exchange(other.bytes_, 0);
  }
  return *this;
}

StatusOr<ZeroedPages> ZeroedPages::Map(size_t bytes, std::string_view what, std::string_view hint) {
  ZeroedPages p;
  if (bytes == 0) return p;
  void* raw = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (raw == MAP_FAILED) return CannotReserveError(bytes, what, hint);
  // Transparent huge pages where the kernel allows them (THP "madvise" or "always"; refused
  // otherwise, and then 4 KiB pages serve as before): see the header.
  if (bytes >= kHugePage) madvise(raw, bytes, MADV_HUGEPAGE);
  p.data_ = static_cast<uint8_t*>(raw);
  p.bytes_ = bytes;
  return p;
}

uint64_t PhysicalMemoryBytes() {
  const long pages = sysconf(_SC_PHYS_PAGES);
  const long page = sysconf(_SC_PAGESIZE);
  return pages > 0 && page > 0 ? static_cast<uint64_t>(pages) * static_cast<uint64_t>(page) : 0;
}

Status CannotReserveError(uint64_t bytes, std::string_view what, std::string_view hint) {
  char gb[48];
  std::snprintf(gb, sizeof(gb), "%.2f GB", static_cast<double>(bytes) / 1e9);
  char ram[80];
  std::snprintf(ram, sizeof(ram), "; this machine has %.2f GB of RAM: ",
                static_cast<double>(PhysicalMemoryBytes()) / 1e9);
  return ResourceExhaustedError("cannot reserve ", gb, " for the ", what, ram, hint);
}

size_t ZeroedPages::ResidentBytes() const {
  if (data_ == nullptr) return 0;
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  std::vector<unsigned char> vec((bytes_ + page - 1) / page);
  if (mincore(data_, bytes_, vec.data()) != 0) return 0;
  size_t n = 0;
  for (unsigned char v : vec) n += v & 1;
  return n * page;
}

}  // namespace moesplit
