// Grouped-query attention (qwen3moe, llama/Mixtral): H query heads share Hk kv heads
// (head h reads kv head h / (H / Hk)); qwen3moe RMS-normalises q and k per head before RoPE.
//   q = Wq h, k = Wk h, v = Wv h;  score_s = kq_scale * q . k_s;  o = sum_s softmax_s v_s
#include <algorithm>
#include <optional>
#include <utility>
#include <vector>

#include "core/base/int_math.h"
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

// Prompts of at least this many tokens attend in blocks of kTokBlock tokens (BatchedCore);
// shorter batches and decode one (token, head) at a time (AttendOne). Both are exact f32 and
// give the same values up to summation order.
constexpr int64_t kBatchedMinTokens = 32;

// o[T x H*hv] = causal attention of q[T x H*hd] over the cached rows kc [n_ctx x Hk*hd] and
// vc [n_ctx x Hk*hv] (n_ctx = pos0 + T), as two f32 GEMMs per (token block, head) instead of a
// dot product and a row sum per (token, head, position): the values of each KV group are
// transposed once (V^T [hv x n_ctx]), then per task
//   scores [nt x n] = q_block K^T (n = pos0 + t0 + nt positions), causal softmax per row,
//   o_block [nt x hv] = scores V.
// Each K / V row is then read from cache once per block of 16 tokens instead of per token, and
// the products run on the tier's F32 GEMM tiles. make-model --preset qwen3moe-tiny --layers 24,
// `moesplit bench -p 512,4096 -n 0 -t 2 -r 1`, 2 alternating rounds (2026-11-24 (k)): pp512
// 6786 / 6728 t/s against 2913 / 2953 one (token, head) at a time, pp4096 2469 / 2481 against
// 316 / 342 (llama.cpp on the same file in the same minutes: 2470 / 1039).
void BatchedCore(const ForwardContext& ctx, const float* q, const float* kc, const float* vc,
                 int64_t n_tok, int64_t pos0, float* o) {
  const ModelConfig& c = ctx.cfg;
  const int64_t H = c.n_head, Hk = c.n_head_kv, hd = c.head_dim_k, hv = c.head_dim_v;
  const int64_t n_ctx = pos0 + n_tok, group = H / Hk;
  constexpr int64_t kPosBlock = 64, kTokBlock = 16;
  float* vt = Grow(ctx.ws.gqa_vt, Hk * hv * n_ctx);  // [Hk x hv x n_ctx]
  const int64_t n_pos_blocks = CeilDiv(n_ctx, kPosBlock);
  ctx.pool.ParallelFor(Hk * n_pos_blocks, [&](int64_t task, int) {
    const int64_t g = task / n_pos_blocks, s0 = (task % n_pos_blocks) * kPosBlock;
    const int64_t s1 = std::min(n_ctx, s0 + kPosBlock);
    float* vg = vt + g * hv * n_ctx;
    for (int64_t s = s0; s < s1; ++s) {
      const float* row = vc + s * Hk * hv + g * hv;
      for (int64_t d = 0; d < hv; ++d) vg[d * n_ctx + s] = row[d];
    }
  });
  const int64_t n_tok_blocks = CeilDiv(n_tok, kTokBlock);
  // Latest token blocks (longest causal rows) first.
  ctx.pool.ParallelFor(H * n_tok_blocks, [&](int64_t task, int worker) {
    const int64_t hh = task % H, t0 = (n_tok_blocks - 1 - task / H) * kTokBlock, g = hh / group;
    const int64_t nt = std::min(kTokBlock, n_tok - t0), n = pos0 + t0 + nt;
    WorkerScratch& sw = ctx.ws.workers[static_cast<size_t>(worker)];
    float* scores = Grow(sw.scores, nt * n);  // [nt x n]
    qmatmul::MatMulRows(ctx.kernels, F32Matrix(kc + g * hd, n, hd, Hk * hd),
                        F32Rows(q + (t0 * H + hh) * hd, nt, hd, H * hd), scores, n, 0, n);
    for (int64_t i = 0; i < nt; ++i) {
      const int64_t valid = pos0 + t0 + i + 1;  // causal: positions 0 .. own
      ctx.kernels.scaled_softmax(scores + i * n, valid, n, c.kq_scale);
    }
    qmatmul::MatMulRows(ctx.kernels, F32Matrix(vt + g * hv * n_ctx, hv, n, n_ctx),
                        F32Rows(scores, nt, n, n), o + t0 * H * hv + hh * hv, H * hv, 0, hv);
  });
}

}  // namespace

void GqaAttention(const ForwardContext& ctx, int64_t il, const float* h, int64_t n_tok,
                  int64_t pos0, float* out) {
  const std::vector<int32_t> blocks = IdentityBlocks(ctx.kv.n_blocks());
  const SeqRows seq{blocks, 0, n_tok, pos0};
  ForwardContext one = ctx;
  one.seqs = {&seq, 1};
  GqaAttention(one, il, h, n_tok, out);
}

void GqaAttention(const ForwardContext& ctx, int64_t il, const float* h, int64_t n_tok,
                  float* out) {
  const ModelConfig& c = ctx.cfg;
  const LayerWeights& l = ctx.w.layers[static_cast<size_t>(il)];
  const int64_t D = c.n_embd, H = c.n_head, Hk = c.n_head_kv;
  const int64_t hd = c.head_dim_k, hv = c.head_dim_v;

  float* q = Grow(ctx.ws.q, n_tok * H * hd);    // [T x H*hd]
  float* k = Grow(ctx.ws.kv, n_tok * Hk * hd);  // [T x Hk*hd]
  float* v = Grow(ctx.ws.v, n_tok * Hk * hv);   // [T x Hk*hv]
  const qmatmul::Product p[3] = {{matmul::FromTensor(l.attn_q), q, H * hd},
                                 {matmul::FromTensor(l.attn_k), k, Hk * hd},
                                 {matmul::FromTensor(l.attn_v), v, Hk * hv}};
  {
    PhaseTimer timer(ctx.prof, Phase::kAttnProj,
                     BytesOf(l.attn_q) + BytesOf(l.attn_k) + BytesOf(l.attn_v));
    Project(ctx, h, D, n_tok, p);  // q, k, v share one quantization of h
  }
  // The core reads a K and a V row per position.
  uint64_t positions = 0;
  for (const SeqRows& s : ctx.seqs) positions += static_cast<uint64_t>(s.pos0 + s.n_tok);
  std::optional<PhaseTimer> core_timer(std::in_place, ctx.prof, Phase::kAttnCore,
                                       positions * Hk * (hd + hv) * ctx.kv.element_bytes());
  RowSlots(ctx, n_tok);
  float* cs_all = Grow(ctx.ws.cs, n_tok * c.n_rot);  // [T x n_rot]
  ForTokens(ctx, n_tok, [&](int64_t t) {
    float* cs = cs_all + t * c.n_rot;
    ops::RopeCosSin(ctx.rope, ctx.ws.pos[t], cs);
    NormRopeHeads(ctx, l.attn_q_norm, q + t * H * hd, H, hd, cs);
    NormRopeHeads(ctx, l.attn_k_norm, k + t * Hk * hd, Hk, hd, cs);
    ctx.kv.Write(KvCache::kK, il, ctx.ws.slot[t], k + t * Hk * hd);  // disjoint slots
    ctx.kv.Write(KvCache::kV, il, ctx.ws.slot[t], v + t * Hk * hv);
  });

  const int64_t group = H / Hk;
  const int n_threads = ctx.pool.size();
  if (ctx.ws.workers.size() < static_cast<size_t>(n_threads)) ctx.ws.workers.resize(n_threads);
  const size_t n_seq = ctx.seqs.size();
  float* o = Grow(ctx.ws.o, n_tok * H * hv);  // [T x H*hv]
  // Per sequence: its K / V rows (in place or gathered); long prompts in the batched core, the
  // rest one (token, head) at a time in one parallel loop over every sequence's rows.
  std::vector<const float*> kc(n_seq), vc(n_seq);
  std::vector<std::pair<int64_t, size_t>> one_rows;  // (row, sequence) for AttendOne
  for (size_t i = 0; i < n_seq; ++i) {
    const SeqRows& s = ctx.seqs[i];
    const int64_t n_ctx = s.pos0 + s.n_tok;
    for (WorkerScratch& w : ctx.ws.workers) Grow(w.scores, n_ctx);
    kc[i] = ctx.kv.Rows(KvCache::kK, il, s.blocks, n_ctx, &ctx.ws.seq_rows[i]);
    vc[i] = ctx.kv.Rows(KvCache::kV, il, s.blocks, n_ctx, &ctx.ws.seq_rows_t[i]);
    const bool batched = s.n_tok >= kBatchedMinTokens;
    if (batched) {
      BatchedCore(ctx, q + s.row0 * H * hd, kc[i], vc[i], s.n_tok, s.pos0, o + s.row0 * H * hv);
    } else {
      for (int64_t t = 0; t < s.n_tok; ++t) one_rows.emplace_back(s.row0 + t, i);
    }
  }
  const int64_t n_one = static_cast<int64_t>(one_rows.size());
  ctx.pool.ParallelFor(n_one * H, [&](int64_t task, int worker) {
    const auto [t, i] = one_rows[static_cast<size_t>(task / H)];
    const int64_t hh = task % H, g = hh / group;
    AttendOne(q + (t * H + hh) * hd, hd, nullptr, 0, kc[i] + g * hd, Hk * hd, 0, vc[i] + g * hv,
              Hk * hv, hv, ctx.ws.pos[t] + 1, c.kq_scale, ctx.kernels.scaled_softmax,
              ctx.ws.workers[static_cast<size_t>(worker)].scores.data(), o + (t * H + hh) * hv);
  });
  core_timer.reset();
  PhaseTimer timer(ctx.prof, Phase::kAttnOut, BytesOf(l.attn_output));
  const qmatmul::Product po{matmul::FromTensor(l.attn_output), out, D};
  Project(ctx, o, H * hv, n_tok, {&po, 1});
}

}  // namespace moesplit::engine
