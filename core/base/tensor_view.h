// A non-owning view of one tensor's bytes (usually inside a read-only mmap of a GGUF file).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "core/base/dtype.h"

namespace moesplit {

inline constexpr int kMaxDims = 4;

struct TensorView {
  std::string_view name;  // e.g. "blk.3.ffn_up_exps.weight"; points into the owner's storage
  GgmlType type = GgmlType::kF32;
  int n_dims = 0;  // 1..4
  // ggml order: ne[0] is the contiguous row length; unused dims are 1. An expert tensor
  // ffn_up_exps of DeepSeek-V3 is ne = [7168, 2048, 256, 1]: 256 experts x 2048 rows x 7168.
  std::array<int64_t, kMaxDims> ne = {1, 1, 1, 1};
  const void* data = nullptr;  // first byte of the tensor, nbytes long
  uint64_t nbytes = 0;

  int64_t NumElements() const { return ne[0] * ne[1] * ne[2] * ne[3]; }
  int64_t NumRows() const { return ne[1] * ne[2] * ne[3]; }
  int64_t RowBytes() const { return moesplit::RowBytes(type, ne[0]); }
};

}  // namespace moesplit
