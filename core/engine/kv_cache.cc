#include "core/engine/kv_cache.h"

namespace moesplit::engine {

KvCache::KvCache(const ModelConfig& c, int64_t ctx_size) : ctx_size_(ctx_size) {
  if (c.arch == ModelArch::kDeepseek2) {
    k_width_ = c.kv_lora_rank + c.qk_rope;
    v_width_ = 0;
  } else {
    k_width_ = c.n_head_kv * c.head_dim_k;
    v_width_ = c.n_head_kv * c.head_dim_v;
  }
  k_.assign(static_cast<size_t>(c.n_layer * ctx_size * k_width_), 0.0f);
  v_.assign(static_cast<size_t>(c.n_layer * ctx_size * v_width_), 0.0f);
}

uint64_t KvCache::bytes() const { return (k_.size() + v_.size()) * sizeof(float); }

}  // namespace moesplit::engine
