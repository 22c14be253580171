// Helpers for the GGUF tests: a byte-level image builder for crafted (often invalid) files.
#pragma once

#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <string>
#include <string_view>
#include <vector>

#include "core/gguf/gguf_file.h"

namespace moesplit::gguf::testing {

// Appends little-endian fields; no validation at all, so tests can write any garbage.
class ImageBuilder {
 public:
  ImageBuilder& Raw(const void* p, size_t n) {
    // resize + memcpy rather than insert(): GCC 12 mis-warns (-Wstringop-overflow) on the latter.
    const size_t old = bytes_.size();
    bytes_.resize(old + n);
    if (n) std::memcpy(bytes_.data() + old, p, n);
    return *this;
  }
  ImageBuilder& U8(uint8_t x) { return Raw(&x, 1); }
  ImageBuilder& U32(uint32_t x) { return Raw(&x, 4); }
  ImageBuilder& U64(uint64_t x) { return Raw(&x, 8); }
  ImageBuilder& Str(std::string_view s) { return U64(s.size()).Raw(s.data(), s.size()); }
  // "GGUF" version n_tensors n_kv (24 bytes).
  ImageBuilder& Header(uint32_t version, uint64_t n_tensors, uint64_t n_kv) {
    return Raw("GGUF", 4).U32(version).U64(n_tensors).U64(n_kv);
  }
  ImageBuilder& KvU32(std::string_view key, uint32_t v) { return Str(key).U32(4).U32(v); }
  ImageBuilder& KvStr(std::string_view key, std::string_view v) { return Str(key).U32(8).Str(v); }
  ImageBuilder& Tensor(std::string_view name, std::initializer_list<uint64_t> ne, uint32_t type,
                       uint64_t offset) {
    Str(name).U32(static_cast<uint32_t>(ne.size()));
    for (uint64_t n : ne) U64(n);
    return U32(type).U64(offset);
  }
  ImageBuilder& PadTo(size_t align) {
    while (bytes_.size() % align != 0) bytes_.push_back(0);
    return *this;
  }
  ImageBuilder& Zeros(size_t n) {
    bytes_.resize(bytes_.size() + n, 0);
    return *this;
  }
  const std::vector<uint8_t>& bytes() const { return bytes_; }

 private:
  std::vector<uint8_t> bytes_;
};

inline StatusOr<ParsedGguf> ParseImage(const std::vector<uint8_t>& b, const OpenOptions& opt = {}) {
  return ParseGguf(b.data(), b.size(), "crafted.gguf", opt);
}

// Reads every tensor's first and last byte and every value's display string, as a user would.
inline uint64_t TouchEverything(const ParsedGguf& g) {
  uint64_t sum = 0;
  for (const TensorInfo& t : g.tensors) sum += t.data[0] + t.data[t.nbytes - 1];
  for (const KeyValue& kv : g.metadata) sum += kv.value.ToDisplayString().size();
  return sum;
}

}  // namespace moesplit::gguf::testing
