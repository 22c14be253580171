// DeepSeek MLA attention in the absorbed form (llama.cpp's is_mla path, DeepSeek-V2 paper §2.1):
// the cache holds per token only the normalised latent c (L floats) and the roped shared key
// k_pe (R floats). Per head h, with W_kb[h] [L x nope] and W_vb[h] [v x L]:
//   q_abs = W_kb[h]^T q_nope                  (nope -> L: the key up-projection moved onto q)
//   score_s = kq_scale * (q_abs . c_s + q_pe . k_pe_s)
//   o_lat = sum_s softmax(score)_s c_s        (L)
//   o_h = W_vb[h] o_lat                        (L -> v)
// which equals attention over the expanded k_s = [W_kb c_s, k_pe_s], v_s = W_vb c_s.
// Per layer: one ParallelFor for the projections of h (q or q_a, kv_a_mqa), [q_b], one over
// (head, token block) tasks doing q_abs, the attention and o_h together, and attn_output.
#include <algorithm>
#include <vector>

#include "core/engine/forward.h"
#include "cpu_kernels/matmul/matmul.h"

namespace moesplit::engine {

namespace {

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

// ws.q[T x H*(nope+R)] = attn_q_b(rmsnorm(attn_q_a h)) or attn_q h, and ws.kv[T x (L+R)] =
// attn_kv_a_mqa h: the products of h share one quantization of it.
void Project(const ForwardContext& ctx, const LayerWeights& l, const float* h, int64_t n_tok) {
  const ModelConfig& c = ctx.cfg;
  const int64_t D = c.n_embd, Q = c.q_lora_rank, qw = c.n_head * c.head_dim_k;
  const int64_t W = c.kv_lora_rank + c.qk_rope;
  float* q = Grow(ctx.ws.q, n_tok * qw);
  float* kv = Grow(ctx.ws.kv, n_tok * W);
  const qmatmul::Product kv_a{matmul::FromTensor(l.attn_kv_a_mqa), kv, W};
  if (Q == 0) {
    const qmatmul::Product p[2] = {{matmul::FromTensor(l.attn_q), q, qw}, kv_a};
    engine::Project(ctx, h, D, n_tok, p);
    return;
  }
  float* qa = Grow(ctx.ws.qa, n_tok * Q);  // [T x Q]
  const qmatmul::Product p[2] = {{matmul::FromTensor(l.attn_q_a), qa, Q}, kv_a};
  engine::Project(ctx, h, D, n_tok, p);
  const float* norm = static_cast<const float*>(l.attn_q_a_norm.data);
  ForTokens(ctx, n_tok,
            [&](int64_t t) { ops::RmsNorm(qa + t * Q, norm, Q, c.rms_eps, qa + t * Q); });
  const qmatmul::Product qb{matmul::FromTensor(l.attn_q_b), q, qw};
  engine::Project(ctx, qa, Q, n_tok, {&qb, 1});
}

// Latent cache rows at pos0..pos0+T-1: [rmsnorm(kv_a[:L]), rope(kv_a[L:])] (in place in ws.kv),
// and RoPE of every head's q_pe (in place in ws.q).
void RopeAndCache(const ForwardContext& ctx, const LayerWeights& l, int64_t il, int64_t n_tok,
                  int64_t pos0) {
  const ModelConfig& c = ctx.cfg;
  const int64_t H = c.n_head, L = c.kv_lora_rank, R = c.qk_rope, W = L + R;
  const int64_t hk = c.head_dim_k, nope = c.qk_nope;
  const float* norm = static_cast<const float*>(l.attn_kv_a_norm.data);
  float* cs_all = Grow(ctx.ws.cs, n_tok * R);  // [T x R] cos/sin per token
  float* kv = ctx.ws.kv.data();
  float* q = ctx.ws.q.data();
  ForTokens(ctx, n_tok, [&](int64_t t) {
    float* row = kv + t * W;  // [L + R] becomes the cache row
    float* cs = cs_all + t * R;
    ops::RmsNorm(row, norm, L, c.rms_eps, row);
    ops::RopeCosSin(ctx.rope, pos0 + t, cs);
    ops::RopeApply(ctx.rope, cs, row + L);
    for (int64_t hh = 0; hh < H; ++hh) ops::RopeApply(ctx.rope, cs, q + (t * H + hh) * hk + nope);
    ctx.kv.Write(KvCache::kK, il, pos0 + t, row);  // disjoint rows: safe in parallel
  });
}

// q_abs[nt x L] = W_kb[h]^T q_nope for tokens t0 .. t0+nt of head h.
void AbsorbQ(const ForwardContext& ctx, const HeadMaps& m, const float* q_nope, int64_t ldq,
             int64_t nt, WorkerScratch& s, float* q_abs) {
  const int64_t L = ctx.cfg.kv_lora_rank;
  if (m.transposed_k) {  // legacy attn_kv_b: the transposed product stays on the reference
    matmul::MatMulTransposed(m.k, q_nope, ldq, nt, q_abs, L, Grow(s.deq, m.k.cols));
    return;
  }
  qmatmul::Quantize(ctx.kernels, qmatmul::ActTypeFor(ctx.kernels, m.k.type), q_nope, ldq, nt,
                    m.k.cols, &s.rows);
  qmatmul::MatMulRows(ctx.kernels, m.k, s.rows, q_abs, L, 0, L);
}

}  // namespace

void MlaAttention(const ForwardContext& ctx, int64_t il, const float* h, int64_t n_tok,
                  int64_t pos0, float* out) {
  const ModelConfig& c = ctx.cfg;
  const LayerWeights& l = ctx.w.layers[static_cast<size_t>(il)];
  const int64_t H = c.n_head, L = c.kv_lora_rank, R = c.qk_rope, nope = c.qk_nope;
  const int64_t hk = c.head_dim_k, hv = c.head_dim_v, W = L + R;
  Project(ctx, l, h, n_tok);
  RopeAndCache(ctx, l, il, n_tok, pos0);

  // Tasks: (head, block of tokens): q_abs, causal attention over the latent cache, o_h.
  const int n_threads = ctx.pool.size();
  const int64_t blocks_wanted = std::max<int64_t>(1, (8 * n_threads + H - 1) / H);
  const int64_t tb = std::clamp<int64_t>((n_tok + blocks_wanted - 1) / blocks_wanted, 1, 64);
  const int64_t n_blocks = (n_tok + tb - 1) / tb;
  const int64_t n_ctx_max = pos0 + n_tok;
  if (ctx.ws.workers.size() < static_cast<size_t>(n_threads)) ctx.ws.workers.resize(n_threads);
  for (WorkerScratch& s : ctx.ws.workers) {
    Grow(s.a, tb * L), Grow(s.b, tb * L), Grow(s.scores, n_ctx_max), Grow(s.deq, L);
  }
  const float* q = ctx.ws.q.data();
  float* o = Grow(ctx.ws.o, n_tok * H * hv);                                        // [T x H*v]
  const float* cache = ctx.kv.Rows(KvCache::kK, il, n_ctx_max, &ctx.ws.cache_f32);  // [ctx x W]
  ctx.pool.ParallelFor(H * n_blocks, [&](int64_t task, int worker) {
    const int64_t hh = task % H, t0 = (task / H) * tb, nt = std::min(tb, n_tok - t0);
    WorkerScratch& s = ctx.ws.workers[static_cast<size_t>(worker)];
    const HeadMaps m = MapsForHead(c, l, hh);
    float* q_abs = s.a.data();  // [nt x L]
    float* o_lat = s.b.data();  // [nt x L]
    AbsorbQ(ctx, m, q + (t0 * H + hh) * hk, H * hk, nt, s, q_abs);
    for (int64_t i = 0; i < nt; ++i) {
      AttendOne(q_abs + i * L, L, q + ((t0 + i) * H + hh) * hk + nope, R, cache, W, L, cache, W, L,
                pos0 + t0 + i + 1, c.kq_scale, s.scores.data(), o_lat + i * L);
    }
    // o_h[nt x v] = W_vb[h] o_lat, written into o[t, h*v ..].
    qmatmul::Quantize(ctx.kernels, qmatmul::ActTypeFor(ctx.kernels, m.v.type), o_lat, L, nt, L,
                      &s.rows);
    qmatmul::MatMulRows(ctx.kernels, m.v, s.rows, o + t0 * H * hv + hh * hv, H * hv, 0, hv);
  });
  const qmatmul::Product p{matmul::FromTensor(l.attn_output), out, c.n_embd};
  engine::Project(ctx, o, H * hv, n_tok, {&p, 1});
}

}  // namespace moesplit::engine
