// GGUF reader: memory-maps one model (one file, or all shards of a split model), validates
// everything before it is used, and presents one tensor table with zero-copy views.
//
// File layout (v2/v3, little-endian):
//   "GGUF" u32 version  u64 n_tensors  u64 n_kv
//   n_kv x { string key, u32 type, value }         string = u64 len + bytes (no NUL)
//   n_tensors x { string name, u32 n_dims, u64 ne[n_dims], u32 ggml_type, u64 offset }
//   padding to `general.alignment` (default 32), then the data section; tensor offsets are
//   relative to the data section start and aligned.
// Split models (llama.cpp's gguf-split): NAME-00001-of-00009.gguf ... each shard is a complete
// GGUF holding `split.no` (u16, 0-based), `split.count` (u16) and `split.tensors.count` (i32,
// the total over all shards); metadata of the model lives in shard 0.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "core/base/status.h"
#include "core/base/tensor_view.h"
#include "core/gguf/gguf_value.h"

namespace moesplit::gguf {

inline constexpr uint32_t kDefaultAlignment = 32;

struct TensorInfo {
  std::string name;
  GgmlType type = GgmlType::kF32;
  int n_dims = 0;
  std::array<int64_t, kMaxDims> ne = {1, 1, 1, 1};  // ggml order, unused dims 1
  uint64_t offset = 0;            // byte offset inside its shard's data section (as stored)
  uint64_t nbytes = 0;            // RowBytes(type, ne[0]) * ne[1] * ne[2] * ne[3]
  int shard = 0;                  // index into GgufFile::shards()
  const uint8_t* data = nullptr;  // inside the read-only mapping; nbytes long

  int64_t NumElements() const { return ne[0] * ne[1] * ne[2] * ne[3]; }
  TensorView View() const { return TensorView{name, type, n_dims, ne, data, nbytes}; }
};

struct ShardInfo {
  std::string path;
  uint64_t file_size = 0;
  uint32_t version = 0;
  uint64_t n_kv = 0;
  uint64_t n_tensors = 0;
  uint64_t alignment = kDefaultAlignment;
  uint64_t data_offset = 0;  // absolute file offset of the data section
};

struct OpenOptions {
  // Limits that keep a corrupt file from making us allocate or loop absurdly. Real models:
  // DeepSeek-V3 has ~1100 tensors and ~50 keys; the largest vocab arrays hold ~150k strings.
  uint64_t max_tensors = 1u << 20;
  uint64_t max_kv = 1u << 16;
  uint64_t max_array_len = 1u << 26;   // elements per array
  uint64_t max_string_len = 1u << 26;  // bytes per string (chat templates are ~10 KB)
  int max_array_depth = 8;             // nested arrays
  // Open every shard of a split model (true) or only the given file (false).
  bool load_all_shards = true;
  // Advise the kernel about access patterns; tests turn this off.
  bool populate = false;
};

class GgufFile {
 public:
  // Opens and validates `path`. If it is a shard of a split model (name matches
  // *-NNNNN-of-MMMMM.gguf or it carries split.* keys), all shards are found next to it, opened,
  // checked for consistency and merged into one tensor table. Errors name the file, the byte
  // offset and what was expected.
  static StatusOr<std::unique_ptr<GgufFile>> Open(const std::string& path,
                                                  const OpenOptions& options = {});
  ~GgufFile();
  GgufFile(const GgufFile&) = delete;
  GgufFile& operator=(const GgufFile&) = delete;

  // Metadata of the model (shard 0), in file order.
  const std::vector<KeyValue>& metadata() const { return metadata_; }
  const Value* Find(std::string_view key) const;
  // Typed getters: NotFound if absent, InvalidArgument (naming key, file and actual type) if the
  // type does not fit.
  StatusOr<uint64_t> GetUint(std::string_view key) const;
  StatusOr<int64_t> GetInt(std::string_view key) const;
  StatusOr<double> GetFloat(std::string_view key) const;
  StatusOr<bool> GetBool(std::string_view key) const;
  StatusOr<std::string> GetString(std::string_view key) const;
  StatusOr<const Array*> GetArray(std::string_view key) const;
  // `general.architecture`, or "" if absent.
  std::string architecture() const;

  // All tensors of all shards, in file order (shard 0's first).
  const std::vector<TensorInfo>& tensors() const { return tensors_; }
  const TensorInfo* FindTensor(std::string_view name) const;

  const std::vector<ShardInfo>& shards() const { return shards_; }
  uint32_t version() const { return shards_.front().version; }
  const std::string& path() const { return shards_.front().path; }
  uint64_t total_file_bytes() const;

  // Maps every page of every shard into this process now (MADV_POPULATE_READ, Linux >= 5.14),
  // then reads one byte per 4 KiB page (a hypervisor may have reclaimed an idle guest's pages
  // behind present page tables), so the first pass over the weights does not pay ~2.5M page
  // faults (10 GB / 4 KiB) inside the timed work. Reads the file from disk where it is not in the
  // page cache. Used by `bench` before its warm-up.
  void Prefault() const;

 private:
  GgufFile() = default;
  struct Mapping;
  std::vector<std::unique_ptr<Mapping>> mappings_;  // one per shard
  std::vector<ShardInfo> shards_;
  std::vector<KeyValue> metadata_;
  std::vector<TensorInfo> tensors_;
  std::unordered_map<std::string_view, size_t> tensor_index_;  // name -> index in tensors_
  std::unordered_map<std::string_view, size_t> kv_index_;      // key -> index in metadata_

  friend class GgufParser;
};

// Parses and validates one GGUF image held in memory (no file, no split handling). Used by the
// reader for each shard and directly by the fuzz target. `name` is used in error messages.
struct ParsedGguf {
  ShardInfo info;
  std::vector<KeyValue> metadata;
  std::vector<TensorInfo> tensors;  // data pointers point into `bytes`
};
StatusOr<ParsedGguf> ParseGguf(const uint8_t* bytes, uint64_t size, const std::string& name,
                               const OpenOptions& options = {});

// "model-00002-of-00009.gguf" -> {prefix "model", no 2, count 9}; nullopt if not that pattern.
struct SplitName {
  std::string prefix;  // path up to (not including) "-NNNNN-of-MMMMM.gguf"
  int no = 0;          // 1-based as in the file name
  int count = 0;
};
std::optional<SplitName> ParseSplitName(const std::string& path);
std::string MakeSplitPath(const std::string& prefix, int no, int count);

}  // namespace moesplit::gguf
