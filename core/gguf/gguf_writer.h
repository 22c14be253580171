// GGUF writer (v3). Streams: the header, metadata and tensor infos are written first, then each
// tensor's bytes in declaration order, in as many chunks as the caller likes — a 400 GB model
// never has to sit in RAM, only the chunk being written.
//
//   GgufWriter w(path);
//   w.AddKeyValue("general.architecture", Value::Str("deepseek2"));
//   w.AddTensor("token_embd.weight", GgmlType::kQ4_K, {7168, 129280});
//   MOESPLIT_RETURN_IF_ERROR(w.Begin());            // writes everything before the data section
//   w.WriteTensorData(chunk, n) ...                 // tensor 0 bytes, then tensor 1, ...
//   MOESPLIT_RETURN_IF_ERROR(w.Finish());           // checks every byte was supplied, closes
#pragma once

#include <cstdint>
#include <cstdio>
#include <initializer_list>
#include <string>
#include <vector>

#include "core/base/status.h"
#include "core/base/tensor_view.h"
#include "core/gguf/gguf_file.h"
#include "core/gguf/gguf_value.h"

namespace moesplit::gguf {

class GgufWriter {
 public:
  explicit GgufWriter(std::string path, uint32_t alignment = kDefaultAlignment);
  ~GgufWriter();  // closes (and leaves a partial file) if Finish() was not reached
  GgufWriter(const GgufWriter&) = delete;
  GgufWriter& operator=(const GgufWriter&) = delete;

  // Before Begin(). Keys are written in the order added; a duplicate key is an error at Begin().
  // If alignment != 32 the writer adds `general.alignment` (u32) itself unless already given.
  void AddKeyValue(std::string key, Value value);
  // Declares a tensor; offsets are assigned in declaration order, each aligned.
  // ne in ggml order, 1..4 dims. Errors (bad dims, row not a multiple of the block size,
  // duplicate name) are reported by Begin().
  void AddTensor(std::string name, GgmlType type, std::vector<int64_t> ne);

  // Opens the file and writes header, metadata, tensor infos and padding.
  Status Begin();
  // Appends bytes of the current tensor (the first not yet complete). A chunk may not run past
  // the end of the current tensor; padding between tensors is written automatically.
  Status WriteTensorData(const void* data, uint64_t n);
  // Index of the tensor the next WriteTensorData goes to (== number of tensors when done).
  size_t current_tensor() const { return cur_tensor_; }
  // Verifies every tensor got exactly its bytes, flushes and closes. Errors name the file.
  Status Finish();

  // Declared tensors with their assigned offsets and sizes (valid after Begin()).
  const std::vector<TensorInfo>& tensors() const { return tensors_; }

 private:
  Status ValidateAndLayout();
  Status EncodeHeader(std::string* out) const;
  Status WriteRaw(const void* data, uint64_t n);
  Status WritePadding(uint64_t to_multiple_of);
  std::string path_;
  uint32_t alignment_;
  std::vector<KeyValue> kvs_;
  std::vector<TensorInfo> tensors_;
  Status deferred_error_;  // first error from AddTensor, reported by Begin()
  std::FILE* f_ = nullptr;
  uint64_t pos_ = 0;         // bytes written so far
  uint64_t data_start_ = 0;  // absolute offset of the data section
  size_t cur_tensor_ = 0;
  uint64_t cur_written_ = 0;  // bytes of tensors_[cur_tensor_] written
  bool begun_ = false;
};

// Copies `file` (all shards merged) into one new GGUF at `path`: same metadata (minus split.*
// keys), same tensors in the same order. Used for round-trip tests and for merging splits.
Status WriteCopy(const GgufFile& file, const std::string& path);

// Writes `file` as a split model the way llama.cpp's gguf-split does: `n_shards` files
// prefix-00001-of-0000N.gguf ... with the tensors divided evenly in order (shard s gets tensors
// [s*n/N, (s+1)*n/N)), all metadata in the first shard only, and in every shard
// split.no (u16, 0-based), split.count (u16), split.tensors.count (i32, total).
Status WriteSplit(const GgufFile& file, const std::string& prefix, int n_shards);

}  // namespace moesplit::gguf
