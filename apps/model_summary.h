// Byte accounting of a GGUF model: by quant type, by role, and what one decoded token reads.
// Pure arithmetic on the tensor table — nothing here is measured.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "core/gguf/gguf_file.h"
#include "core/model/tensor_role.h"

namespace moesplit::app {

struct ByteCount {
  int64_t tensors = 0;
  int64_t elements = 0;
  uint64_t bytes = 0;
  double BitsPerWeight() const { return elements ? 8.0 * bytes / elements : 0.0; }
};

struct ModelSummary {
  std::string architecture;  // general.architecture ("" if absent)
  std::string name;          // general.name
  std::string file_type;     // "Q4_K_M" from general.file_type, or "" if absent
  uint64_t file_bytes = 0;   // all shards
  ByteCount total;
  std::map<std::string, ByteCount> by_type;                  // "q4_K" -> counts
  std::array<ByteCount, kNumTensorRoles> by_role;            // index = TensorRole
  std::vector<std::pair<std::string, std::string>> hparams;  // "<arch>.*" keys, display form
  int64_t vocab_size = 0;  // tokenizer.ggml.tokens length (0 if absent)
  // "gpt2 / deepseek-v3, 1024 tokens, 766 merges, BOS 0, EOS 1, add_bos true"; "" if no tokenizer.
  std::string tokenizer;

  // MoE decode arithmetic (0 for dense models): each token runs expert_used of expert_count
  // routed experts per MoE layer, so it reads routed_bytes * used / count of expert weights.
  int64_t expert_count = 0;
  int64_t expert_used = 0;
  int64_t moe_layers = 0;  // layers that hold *_exps tensors
  uint64_t routed_bytes_per_token = 0;
  // Everything a token reads besides routed experts: all weights except routed experts and
  // the embedding table (a token reads one row of it).
  uint64_t dense_bytes_per_token = 0;
};

ModelSummary Summarize(const gguf::GgufFile& file);

// "1.23 GiB", "45.6 MiB", "789 B".
std::string HumanBytes(uint64_t bytes);

}  // namespace moesplit::app
