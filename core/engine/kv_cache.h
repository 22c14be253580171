// The KV cache of one session: per layer, per position, what attention needs of past tokens.
//  - deepseek2 (MLA): the latent form, one row per token of [kv_lora + qk_rope] floats: the
//    normalised compressed kv (c, 512 for V3) followed by the roped shared key (k_pe, 64):
//    576 floats = 2304 bytes per token per layer in f32 (V3, 61 layers: 137 KB per token).
//  - GQA archs (qwen3moe, llama): K rows [n_head_kv x head_dim_k] and V rows [n_head_kv x
//    head_dim_v] per token.
// Stored as f32 (the reference path; an f16 option can halve it later).
#pragma once

#include <cstdint>
#include <vector>

#include "core/model/model_config.h"

namespace moesplit::engine {

class KvCache {
 public:
  KvCache(const ModelConfig& config, int64_t ctx_size);

  int64_t ctx_size() const { return ctx_size_; }
  uint64_t bytes() const;

  // MLA: row of [kv_lora + rope] floats of layer il at position pos.
  float* Latent(int64_t il, int64_t pos) { return &k_[Index(il, pos, k_width_)]; }
  const float* Latent(int64_t il, int64_t pos) const { return &k_[Index(il, pos, k_width_)]; }
  int64_t latent_width() const { return k_width_; }

  // GQA: K row [n_head_kv * head_dim_k] / V row [n_head_kv * head_dim_v].
  float* K(int64_t il, int64_t pos) { return &k_[Index(il, pos, k_width_)]; }
  float* V(int64_t il, int64_t pos) { return &v_[Index(il, pos, v_width_)]; }
  const float* K(int64_t il, int64_t pos) const { return &k_[Index(il, pos, k_width_)]; }
  const float* V(int64_t il, int64_t pos) const { return &v_[Index(il, pos, v_width_)]; }

 private:
  size_t Index(int64_t il, int64_t pos, int64_t width) const {
    return static_cast<size_t>((il * ctx_size_ + pos) * width);
  }
  int64_t ctx_size_;
  int64_t k_width_;       // floats per token per layer: MLA latent or K
  int64_t v_width_;       // 0 for MLA
  std::vector<float> k_;  // [n_layer][ctx_size][k_width_]
  std::vector<float> v_;  // [n_layer][ctx_size][v_width_]
};

}  // namespace moesplit::engine
