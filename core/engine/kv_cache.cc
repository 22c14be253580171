#include "core/engine/kv_cache.h"

#include <algorithm>

#include "core/base/float16.h"

namespace moesplit::engine {

KvCache::KvCache(const ModelConfig& c, int64_t ctx_size, KvCacheType type)
    : ctx_size_(ctx_size), type_(type) {
  if (c.arch == ModelArch::kDeepseek2) {
    width_[kK] = c.kv_lora_rank + c.qk_rope;
    width_[kV] = 0;
    latent_t_ = c.kv_lora_rank;
  } else {
    width_[kK] = c.n_head_kv * c.head_dim_k;
    width_[kV] = c.n_head_kv * c.head_dim_v;
  }
  for (int p = 0; p < 2; ++p) {
    const size_t n = static_cast<size_t>(c.n_layer * ctx_size * width_[p]);
    if (type_ == KvCacheType::kF32) {
      f32_[p].assign(n, 0.0f);
    } else {
      f16_[p].assign(n, 0);
    }
  }
  const size_t nt = static_cast<size_t>(c.n_layer * latent_t_ * ctx_size);
  if (type_ == KvCacheType::kF32) {
    t_f32_.assign(nt, 0.0f);
  } else {
    t_f16_.assign(nt, 0);
  }
}

uint64_t KvCache::bytes() const {
  return (f32_[0].size() + f32_[1].size() + t_f32_.size()) * sizeof(float) +
         (f16_[0].size() + f16_[1].size() + t_f16_.size()) * sizeof(uint16_t);
}

void KvCache::Write(Part part, int64_t il, int64_t pos, const float* row) {
  const size_t at = Index(part, il, pos);
  const int64_t nt = part == kK ? latent_t_ : 0;  // the transposed latent copy (MLA)
  const size_t t0 = static_cast<size_t>(il * latent_t_ * ctx_size_ + pos);
  if (type_ == KvCacheType::kF32) {
    std::copy(row, row + width_[part], f32_[part].begin() + static_cast<std::ptrdiff_t>(at));
    for (int64_t i = 0; i < nt; ++i) t_f32_[t0 + i * ctx_size_] = row[i];
    return;
  }
  for (int64_t i = 0; i < width_[part]; ++i) f16_[part][at + i] = Fp32ToFp16(row[i]);
  for (int64_t i = 0; i < nt; ++i) t_f16_[t0 + i * ctx_size_] = Fp32ToFp16(row[i]);
}

const float* KvCache::Rows(Part part, int64_t il, int64_t n, std::vector<float>* buffer) const {
  const size_t at = Index(part, il, 0);
  if (type_ == KvCacheType::kF32) return f32_[part].data() + at;
  const size_t count = static_cast<size_t>(n * width_[part]);
  buffer->resize(count);
  for (size_t i = 0; i < count; ++i) (*buffer)[i] = Fp16ToFp32(f16_[part][at + i]);
  return buffer->data();
}

const float* KvCache::LatentTransposed(int64_t il, int64_t n, std::vector<float>* buffer,
                                       int64_t* stride) const {
  const size_t at = static_cast<size_t>(il * latent_t_ * ctx_size_);
  if (type_ == KvCacheType::kF32) {
    *stride = ctx_size_;
    return t_f32_.data() + at;
  }
  buffer->resize(static_cast<size_t>(latent_t_ * n));
  for (int64_t i = 0; i < latent_t_; ++i) {
    for (int64_t s = 0; s < n; ++s)
      (*buffer)[i * n + s] = Fp16ToFp32(t_f16_[at + i * ctx_size_ + s]);
  }
  *stride = n;
  return buffer->data();
}

}  // namespace moesplit::engine
