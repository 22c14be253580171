// DeepSeek MLA attention in the absorbed form (llama.cpp's is_mla path, DeepSeek-V2 paper §2.1):
// the cache holds per token only the normalised latent c (L floats) and the roped shared key
// k_pe (R floats). Per head h, with W_kb[h] [L x nope] and W_vb[h] [v x L]:
//   q_abs = W_kb[h]^T q_nope                  (nope -> L: the key up-projection moved onto q)
//   score_s = kq_scale * (q_abs . c_s + q_pe . k_pe_s)
//   o_lat = sum_s softmax(score)_s c_s        (L)
//   o_h = W_vb[h] o_lat                        (L -> v)
// which equals attention over the expanded k_s = [W_kb c_s, k_pe_s], v_s = W_vb c_s.
#include <algorithm>
#include <vector>

#include "core/engine/forward.h"
#include "cpu_kernels/matmul/matmul.h"

namespace moesplit::engine {

namespace {

// q[T x H*(nope+R)] = attn_q_b(rmsnorm(attn_q_a h)) or attn_q h.
void ProjectQ(const ForwardContext& ctx, const LayerWeights& l, const float* h, int64_t n_tok,
              float* q) {
  const ModelConfig& c = ctx.cfg;
  const int64_t D = c.n_embd, Q = c.q_lora_rank, qw = c.n_head * c.head_dim_k;
  if (Q == 0) {
    matmul::MatMul(ctx.pool, matmul::FromTensor(l.attn_q), h, D, n_tok, q, qw);
    return;
  }
  std::vector<float> qa(static_cast<size_t>(n_tok * Q));  // [T x Q]
  matmul::MatMul(ctx.pool, matmul::FromTensor(l.attn_q_a), h, D, n_tok, qa.data(), Q);
  const float* norm = static_cast<const float*>(l.attn_q_a_norm.data);
  for (int64_t t = 0; t < n_tok; ++t) ops::RmsNorm(&qa[t * Q], norm, Q, c.rms_eps, &qa[t * Q]);
  matmul::MatMul(ctx.pool, matmul::FromTensor(l.attn_q_b), qa.data(), Q, n_tok, q, qw);
}

// Latent cache rows at pos0..pos0+T-1: [rmsnorm(kv_a[:L]), rope(kv_a[L:])] with
// kv_a[T x (L+R)] = attn_kv_a_mqa h.
void WriteLatent(const ForwardContext& ctx, const LayerWeights& l, int64_t il, const float* h,
                 int64_t n_tok, int64_t pos0) {
  const ModelConfig& c = ctx.cfg;
  const int64_t D = c.n_embd, L = c.kv_lora_rank, W = L + c.qk_rope;
  std::vector<float> kv(static_cast<size_t>(n_tok * W));  // [T x (L+R)]
  matmul::MatMul(ctx.pool, matmul::FromTensor(l.attn_kv_a_mqa), h, D, n_tok, kv.data(), W);
  const float* norm = static_cast<const float*>(l.attn_kv_a_norm.data);
  std::vector<float> cs(static_cast<size_t>(c.n_rot));  // [R] cos/sin table
  std::vector<float> row(static_cast<size_t>(W));       // [L + R] one cache row
  for (int64_t t = 0; t < n_tok; ++t) {
    ops::RmsNorm(&kv[t * W], norm, L, c.rms_eps, row.data());
    std::copy(&kv[t * W + L], &kv[(t + 1) * W], row.begin() + L);
    ops::RopeCosSin(ctx.rope, pos0 + t, cs.data());
    ops::RopeApply(ctx.rope, cs.data(), row.data() + L);
    ctx.kv.Write(KvCache::kK, il, pos0 + t, row.data());
  }
}

// The per-head key (W_kb, L rows of nope) and value (W_vb, v rows of L) maps, for both layouts.
// Split: attn_k_b [nope, L, H] slice h; attn_v_b [L, v, H] slice h.
// Legacy: attn_kv_b [L, H*(nope+v)]: head h's rows h*(nope+v) .. +nope are k_nope = W c, so
// W_kb[h]^T q = those rows applied transposed; the next v rows are W_vb[h] directly.
struct HeadMaps {
  bool transposed_k;
  matmul::WeightMatrix k;
  matmul::WeightMatrix v;
};
HeadMaps MapsForHead(const ModelConfig& c, const LayerWeights& l, int64_t h) {
  if (c.mla_split) {
    return {false, matmul::FromTensor(l.attn_k_b, h), matmul::FromTensor(l.attn_v_b, h)};
  }
  const matmul::WeightMatrix kvb = matmul::FromTensor(l.attn_kv_b);
  const int64_t stride = c.qk_nope + c.head_dim_v;
  return {true, kvb.Rows(h * stride, c.qk_nope), kvb.Rows(h * stride + c.qk_nope, c.head_dim_v)};
}

}  // namespace

void MlaAttention(const ForwardContext& ctx, int64_t il, const float* h, int64_t n_tok,
                  int64_t pos0, float* out) {
  const ModelConfig& c = ctx.cfg;
  const LayerWeights& l = ctx.w.layers[static_cast<size_t>(il)];
  const int64_t H = c.n_head, L = c.kv_lora_rank, R = c.qk_rope, nope = c.qk_nope;
  const int64_t hk = c.head_dim_k, hv = c.head_dim_v, W = L + R;

  std::vector<float> q(static_cast<size_t>(n_tok * H * hk));  // [T x H x (nope+R)]
  ProjectQ(ctx, l, h, n_tok, q.data());
  WriteLatent(ctx, l, il, h, n_tok, pos0);

  std::vector<float> cs(static_cast<size_t>(R));  // rope q_pe in place: q[t, h, nope:]
  for (int64_t t = 0; t < n_tok; ++t) {
    ops::RopeCosSin(ctx.rope, pos0 + t, cs.data());
    for (int64_t hh = 0; hh < H; ++hh)
      ops::RopeApply(ctx.rope, cs.data(), &q[(t * H + hh) * hk + nope]);
  }

  // q_abs[T x H x L] = per head W_kb[h]^T q_nope.
  const int n_threads = ctx.pool.size();
  const int64_t scratch_w = std::max(nope, L);  // widest row a head map dequantizes
  std::vector<float> scratch(static_cast<size_t>(n_threads * scratch_w));  // [threads x ...]
  std::vector<float> q_abs(static_cast<size_t>(n_tok * H * L));
  ctx.pool.ParallelFor(H, [&](int64_t hh, int worker) {
    const HeadMaps m = MapsForHead(c, l, hh);
    float* s = &scratch[static_cast<size_t>(worker * scratch_w)];
    if (m.transposed_k) {
      matmul::MatMulTransposed(m.k, &q[hh * hk], H * hk, n_tok, &q_abs[hh * L], H * L, s);
    } else {
      matmul::MatMulRowRange(m.k, &q[hh * hk], H * hk, n_tok, &q_abs[hh * L], H * L, 0, L, s);
    }
  });

  // o_lat[T x H x L]: causal attention over the latent cache, one task per (token, head).
  const int64_t n_ctx_max = pos0 + n_tok;
  std::vector<float> scores(static_cast<size_t>(n_threads * n_ctx_max));  // [threads x ctx]
  std::vector<float> o_lat(static_cast<size_t>(n_tok * H * L));
  std::vector<float> f32_rows;  // [ctx x (L+R)] when the cache is f16
  const float* cache0 = ctx.kv.Rows(KvCache::kK, il, n_ctx_max, &f32_rows);
  ctx.pool.ParallelFor(n_tok * H, [&](int64_t task, int worker) {
    const int64_t t = task / H, hh = task % H;
    AttendOne(&q_abs[(t * H + hh) * L], L, &q[(t * H + hh) * hk + nope], R, cache0, W, L, cache0, W,
              L, pos0 + t + 1, c.kq_scale, &scores[static_cast<size_t>(worker * n_ctx_max)],
              &o_lat[(t * H + hh) * L]);
  });

  // o[T x H*v] = per head W_vb[h] o_lat; out[T x D] = attn_output o.
  std::vector<float> o(static_cast<size_t>(n_tok * H * hv));
  ctx.pool.ParallelFor(H, [&](int64_t hh, int worker) {
    const HeadMaps m = MapsForHead(c, l, hh);
    float* s = &scratch[static_cast<size_t>(worker * scratch_w)];
    matmul::MatMulRowRange(m.v, &o_lat[hh * L], H * L, n_tok, &o[hh * hv], H * hv, 0, hv, s);
  });
  matmul::MatMul(ctx.pool, matmul::FromTensor(l.attn_output), o.data(), H * hv, n_tok, out,
                 c.n_embd);
}

}  // namespace moesplit::engine
