// The KV cache of one session: per layer, per position, what attention needs of past tokens.
//  - deepseek2 (MLA): the latent form, one row per token of [kv_lora + qk_rope] values: the
//    normalised compressed kv (c, 512 for V3) followed by the roped shared key (k_pe, 64):
//    576 values per token per layer (V3, 61 layers, f16: 70 KB per token, 288 MB at 4096).
//    The c part is also kept transposed ([kv_lora][ctx] per layer): attention's second product
//    o_lat = P C (probabilities times cached latents) is then a plain matrix product over the
//    cache's rows (kernel form y = x W^T with W = C^T), like the first one, scores = Q C^T.
//    That costs another kv_lora values per token per layer (1.9x the memory).
//  - GQA archs (qwen3moe, llama): K rows [n_head_kv x head_dim_k] and V rows [n_head_kv x
//    head_dim_v] per token.
// Stored as f32 or f16 (llama.cpp's default); attention reads rows back as f32.
#pragma once

#include <cstdint>
#include <vector>

#include "core/model/model_config.h"

namespace moesplit::engine {

enum class KvCacheType { kF32, kF16 };

class KvCache {
 public:
  enum Part { kK = 0, kV = 1 };  // MLA uses kK for the latent row

  KvCache(const ModelConfig& config, int64_t ctx_size, KvCacheType type = KvCacheType::kF32);

  int64_t ctx_size() const { return ctx_size_; }
  KvCacheType type() const { return type_; }
  uint64_t element_bytes() const { return type_ == KvCacheType::kF16 ? 2 : 4; }
  uint64_t bytes() const;
  int64_t width(Part part) const { return width_[part]; }  // values per row

  // Stores row[width(part)] for layer il at position pos.
  void Write(Part part, int64_t il, int64_t pos, const float* row);
  // Rows [0, n) of layer il as f32 [n x width(part)]: a pointer into the cache (f32) or into
  // *buffer after conversion (f16). Valid until the next Write or buffer change.
  const float* Rows(Part part, int64_t il, int64_t n, std::vector<float>* buffer) const;

  // MLA only: the latent c of positions [0, n) of layer il transposed, [kv_lora rows x n], row
  // i at result + i * *stride (stride ctx_size for f32; n after conversion into *buffer, f16).
  const float* LatentTransposed(int64_t il, int64_t n, std::vector<float>* buffer,
                                int64_t* stride) const;

 private:
  size_t Index(Part part, int64_t il, int64_t pos) const {
    return static_cast<size_t>((il * ctx_size_ + pos) * width_[part]);
  }
  int64_t ctx_size_;
  KvCacheType type_;
  int64_t width_[2];              // values per row: [K or latent, V (0 for MLA)]
  std::vector<float> f32_[2];     // [n_layer][ctx_size][width] when type_ == kF32
  std::vector<uint16_t> f16_[2];  // the same in IEEE half when type_ == kF16
  int64_t latent_t_ = 0;          // MLA: kv_lora (rows of the transposed copy); else 0
  std::vector<float> t_f32_;      // [n_layer][latent_t_][ctx_size] when type_ == kF32
  std::vector<uint16_t> t_f16_;   // the same in IEEE half when type_ == kF16
};

}  // namespace moesplit::engine
