// Grouped-query attention (qwen3moe, llama/Mixtral): H query heads share Hk kv heads
// (head h reads kv head h / (H / Hk)); qwen3moe RMS-normalises q and k per head before RoPE.
//   q = Wq h, k = Wk h, v = Wv h;  score_s = kq_scale * q . k_s;  o = sum_s softmax_s v_s
#include <vector>

#include "core/engine/forward.h"
#include "cpu_kernels/matmul/matmul.h"

namespace moesplit::engine {

namespace {

// Per-head RMSNorm (qwen3moe q_norm / k_norm) and RoPE of n_heads rows of width hd at `pos`.
void NormRopeHeads(const ForwardContext& ctx, const TensorView& norm, float* x, int64_t n_heads,
                   int64_t hd, const float* cos_sin) {
  for (int64_t i = 0; i < n_heads; ++i) {
    float* head = x + i * hd;
    if (Present(norm)) {
      ops::RmsNorm(head, static_cast<const float*>(norm.data), hd, ctx.cfg.rms_eps, head);
    }
    ops::RopeApply(ctx.rope, cos_sin, head);
  }
}

}  // namespace

void GqaAttention(const ForwardContext& ctx, int64_t il, const float* h, int64_t n_tok,
                  int64_t pos0, float* out) {
  const ModelConfig& c = ctx.cfg;
  const LayerWeights& l = ctx.w.layers[static_cast<size_t>(il)];
  const int64_t D = c.n_embd, H = c.n_head, Hk = c.n_head_kv;
  const int64_t hd = c.head_dim_k, hv = c.head_dim_v;

  std::vector<float> q(static_cast<size_t>(n_tok * H * hd));  // [T x H x hd]
  matmul::MatMul(ctx.pool, matmul::FromTensor(l.attn_q), h, D, n_tok, q.data(), H * hd);
  std::vector<float> k(static_cast<size_t>(n_tok * Hk * hd));  // [T x Hk*hd]
  std::vector<float> v(static_cast<size_t>(n_tok * Hk * hv));  // [T x Hk*hv]
  matmul::MatMul(ctx.pool, matmul::FromTensor(l.attn_k), h, D, n_tok, k.data(), Hk * hd);
  matmul::MatMul(ctx.pool, matmul::FromTensor(l.attn_v), h, D, n_tok, v.data(), Hk * hv);
  std::vector<float> cs(static_cast<size_t>(c.n_rot));
  for (int64_t t = 0; t < n_tok; ++t) {
    ops::RopeCosSin(ctx.rope, pos0 + t, cs.data());
    NormRopeHeads(ctx, l.attn_q_norm, &q[t * H * hd], H, hd, cs.data());
    NormRopeHeads(ctx, l.attn_k_norm, &k[t * Hk * hd], Hk, hd, cs.data());
    ctx.kv.Write(KvCache::kK, il, pos0 + t, &k[t * Hk * hd]);
    ctx.kv.Write(KvCache::kV, il, pos0 + t, &v[t * Hk * hv]);
  }

  const int64_t n_ctx_max = pos0 + n_tok, group = H / Hk;
  std::vector<float> scores(static_cast<size_t>(ctx.pool.size() * n_ctx_max));  // [threads x ctx]
  std::vector<float> o(static_cast<size_t>(n_tok * H * hv));                    // [T x H x hv]
  std::vector<float> k_rows, v_rows;  // f32 copies when the cache is f16
  const float* kc = ctx.kv.Rows(KvCache::kK, il, n_ctx_max, &k_rows);
  const float* vc = ctx.kv.Rows(KvCache::kV, il, n_ctx_max, &v_rows);
  ctx.pool.ParallelFor(n_tok * H, [&](int64_t task, int worker) {
    const int64_t t = task / H, hh = task % H, g = hh / group;
    AttendOne(&q[(t * H + hh) * hd], hd, nullptr, 0, kc + g * hd, Hk * hd, 0, vc + g * hv, Hk * hv,
              hv, pos0 + t + 1, c.kq_scale, &scores[static_cast<size_t>(worker * n_ctx_max)],
              &o[(t * H + hh) * hv]);
  });
  matmul::MatMul(ctx.pool, matmul::FromTensor(l.attn_output), o.data(), H * hv, n_tok, out, D);
}

}  // namespace moesplit::engine
