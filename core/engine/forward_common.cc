// Steps shared by all architectures: embeddings, the attention core, FFN / MoE, the output head.
#include <algorithm>
#include <vector>

#include "core/base/int_math.h"
#include "core/engine/forward.h"
#include "cpu_kernels/matmul/matmul.h"
#include "cpu_kernels/quant/quant.h"
#include "moe/routing.h"

namespace moesplit::engine {

ops::RopeParams RopeParamsFor(const ModelConfig& c) {
  ops::RopeParams p;
  p.n_dims = static_cast<int>(c.n_rot);
  // llama.cpp: qwen3moe rotates NEOX half-split pairs; llama and deepseek2 adjacent pairs.
  p.style = c.arch == ModelArch::kQwen3Moe ? ops::RopeStyle::kNeox : ops::RopeStyle::kNormal;
  p.freq_base = c.rope_freq_base;
  p.freq_scale = c.rope_freq_scale;
  p.ext_factor = c.rope_ext_factor;
  p.attn_factor = c.rope_attn_factor_eff;
  p.beta_fast = c.yarn_beta_fast;
  p.beta_slow = c.yarn_beta_slow;
  p.n_ctx_orig = static_cast<int>(c.yarn_orig_ctx);
  return p;
}

void ForTokens(const ForwardContext& ctx, int64_t n_tok, const std::function<void(int64_t)>& fn) {
  const int64_t n_threads = ctx.pool.size();
  if (n_threads == 1 || n_tok < 4) {
    for (int64_t t = 0; t < n_tok; ++t) fn(t);
    return;
  }
  const int64_t per_task = CeilDiv(n_tok, 4 * n_threads);
  ctx.pool.ParallelFor(CeilDiv(n_tok, per_task), [&](int64_t task, int) {
    const int64_t t1 = std::min(n_tok, (task + 1) * per_task);
    for (int64_t t = task * per_task; t < t1; ++t) fn(t);
  });
}

void Project(const ForwardContext& ctx, const float* x, int64_t ldx, int64_t n_tok,
             std::span<const qmatmul::Product> products) {
  // At most three activation types (F32, Q8_K, Q8_0): group the products by type.
  constexpr GgmlType kActs[3] = {GgmlType::kF32, GgmlType::kQ8_K, GgmlType::kQ8_0};
  for (int a = 0; a < 3; ++a) {
    qmatmul::Product group[qmatmul::kMaxProducts];
    int n = 0;
    for (const qmatmul::Product& p : products) {
      if (qmatmul::ActTypeFor(ctx.kernels, p.w.type) != kActs[a]) continue;
      MOESPLIT_CHECK(n < qmatmul::kMaxProducts, "Project: too many products");
      group[n++] = p;
    }
    if (n == 0) continue;
    qmatmul::QuantizedRows& rows = ctx.ws.rows[static_cast<size_t>(a)];
    qmatmul::Quantize(ctx.pool, ctx.kernels, kActs[a], x, ldx, n_tok, group[0].w.cols, &rows);
    qmatmul::MatMulMany(ctx.pool, ctx.kernels, {group, static_cast<size_t>(n)}, rows);
  }
}

void Embed(const ForwardContext& ctx, const int32_t* tokens, int64_t n_tok, float* x) {
  const matmul::WeightMatrix emb = matmul::FromTensor(ctx.w.token_embd);
  PhaseTimer timer(ctx.prof, Phase::kEmbed, static_cast<uint64_t>(n_tok * emb.row_bytes));
  ForTokens(ctx, n_tok, [&](int64_t t) {
    quant::DequantizeRow(emb.type, emb.Row(tokens[t]), x + t * emb.cols, emb.cols);
  });
}

qmatmul::QuantizedRows F32Rows(const float* x, int64_t n, int64_t cols, int64_t stride) {
  qmatmul::QuantizedRows r;
  r.n_tok = n;
  r.cols = cols;
  r.stride = static_cast<size_t>(stride) * sizeof(float);
  r.data = x;
  return r;
}

matmul::WeightMatrix F32Matrix(const float* data, int64_t rows, int64_t cols, int64_t stride) {
  return {GgmlType::kF32, data, cols, rows, stride * static_cast<int64_t>(sizeof(float))};
}

void AttendOne(const float* q_a, int64_t na, const float* q_b, int64_t nb, const float* k_rows,
               int64_t k_stride, int64_t kb_offset, const float* v_rows, int64_t v_stride,
               int64_t n_out, int64_t n_ctx, float scale, gemv::ScaledSoftmaxFn softmax,
               float* scores, float* out) {
  for (int64_t s = 0; s < n_ctx; ++s) {
    const float* k = k_rows + s * k_stride;
    float dot = matmul::Dot(q_a, k, na);
    if (nb > 0) dot += matmul::Dot(q_b, k + kb_offset, nb);
    scores[s] = dot;
  }
  softmax(scores, n_ctx, n_ctx, scale);
  std::fill(out, out + n_out, 0.0f);
  for (int64_t s = 0; s < n_ctx; ++s) {
    const float p = scores[s];
    const float* v = v_rows + s * v_stride;
    for (int64_t i = 0; i < n_out; ++i) out[i] += p * v[i];
  }
}

moe::RouterConfig RouterFor(const ModelConfig& c) {
  moe::RouterConfig r;
  r.n_expert = static_cast<int>(c.n_expert);
  r.n_expert_used = static_cast<int>(c.n_expert_used);
  r.n_group = static_cast<int>(c.n_expert_groups);
  r.n_group_used = static_cast<int>(c.n_group_used);
  r.gating = c.gating == GatingFunc::kSigmoid ? moe::Gating::kSigmoid : moe::Gating::kSoftmax;
  r.norm_weights = c.expert_weights_norm;
  r.weights_scale = c.expert_weights_scale;
  return r;
}

uint64_t RoutedExpertBytes(const ModelConfig& c, const LayerWeights& l, const int32_t* ids,
                           int64_t n) {
  const uint64_t per_expert =
      (BytesOf(l.ffn_gate_exps) + BytesOf(l.ffn_up_exps) + BytesOf(l.ffn_down_exps)) /
      static_cast<uint64_t>(std::max<int64_t>(c.n_expert, 1));
  std::vector<bool> seen(static_cast<size_t>(c.n_expert), false);
  uint64_t distinct = 0;
  for (int64_t i = 0; i < n; ++i) {
    const size_t e = static_cast<size_t>(ids[i]);
    if (e >= seen.size() || seen[e]) continue;
    seen[e] = true;
    ++distinct;
  }
  return distinct * per_expert;
}

void FeedForward(const ForwardContext& ctx, int64_t il, const float* h, int64_t n_tok, float* out) {
  const ModelConfig& c = ctx.cfg;
  const LayerWeights& l = ctx.w.layers[static_cast<size_t>(il)];
  if (!c.IsMoeLayer(il)) {
    PhaseTimer timer(ctx.prof, Phase::kDenseFfn,
                     BytesOf(l.ffn_gate) + BytesOf(l.ffn_up) + BytesOf(l.ffn_down));
    ctx.experts.engine(0).ForwardDense({l.ffn_gate, l.ffn_up, l.ffn_down}, h, n_tok, out);
    return;
  }
  const int64_t E = c.n_expert, k = c.n_expert_used;
  int32_t* ids = Grow(ctx.ws.ids, n_tok * k);        // [T x k]
  float* weights = Grow(ctx.ws.weights, n_tok * k);  // [T x k]
  {
    PhaseTimer timer(ctx.prof, Phase::kRouter, BytesOf(l.ffn_gate_inp));
    float* router = Grow(ctx.ws.router, n_tok * E);  // [T x E] router logits
    const qmatmul::Product p{matmul::FromTensor(l.ffn_gate_inp), router, E};
    Project(ctx, h, c.n_embd, n_tok, {&p, 1});
    const float* bias =
        Present(l.exp_probs_b) ? static_cast<const float*>(l.exp_probs_b.data) : nullptr;
    moe::Route(RouterFor(c), router, bias, n_tok, ids, weights);
  }
  // Routed experts and the shared expert(s) (added with weight 1) in one fused pass.
  // (The expert store holds layer il's tensors as placed: the file mapping, or node copies.)
  PhaseTimer timer(ctx.prof, Phase::kExperts,
                   ctx.prof == nullptr
                       ? 0
                       : RoutedExpertBytes(c, l, ids, n_tok * k) + BytesOf(l.ffn_gate_shexp) +
                             BytesOf(l.ffn_up_shexp) + BytesOf(l.ffn_down_shexp));
  ctx.experts.Forward(il, h, n_tok, ids, weights, static_cast<int>(k), out);
}

void Logits(const ForwardContext& ctx, const float* x, std::span<const int64_t> rows,
            float* logits) {
  PhaseTimer timer(ctx.prof, Phase::kOutput, BytesOf(ctx.w.output));
  const int64_t D = ctx.cfg.n_embd, n_out = static_cast<int64_t>(rows.size());
  float* xn = Grow(ctx.ws.xn, n_out * D);  // [n_out x D]
  const float* norm = static_cast<const float*>(ctx.w.output_norm.data);
  ForTokens(ctx, n_out, [&](int64_t i) {
    ops::RmsNorm(x + rows[static_cast<size_t>(i)] * D, norm, D, ctx.cfg.rms_eps, xn + i * D);
  });
  const qmatmul::Product p{matmul::FromTensor(ctx.w.output), logits, ctx.cfg.n_vocab};
  Project(ctx, xn, D, n_out, {&p, 1});
}

std::vector<int32_t> IdentityBlocks(int64_t n_blocks) {
  std::vector<int32_t> blocks(static_cast<size_t>(n_blocks));
  for (size_t b = 0; b < blocks.size(); ++b) blocks[b] = static_cast<int32_t>(b);
  return blocks;
}

void RowSlots(const ForwardContext& ctx, int64_t n_tok) {
  int64_t* slot = Grow(ctx.ws.slot, n_tok);
  int64_t* pos = Grow(ctx.ws.pos, n_tok);
  int64_t covered = 0;
  for (const SeqRows& s : ctx.seqs) {
    MOESPLIT_CHECK(s.row0 == covered && s.row0 + s.n_tok <= n_tok, "RowSlots: sequence rows [",
                   s.row0, ", ", s.row0 + s.n_tok, ") after ", covered, " of ", n_tok);
    for (int64_t t = 0; t < s.n_tok; ++t) {
      slot[s.row0 + t] = ctx.kv.Slot(s.blocks, s.pos0 + t);
      pos[s.row0 + t] = s.pos0 + t;
    }
    covered += s.n_tok;
  }
  MOESPLIT_CHECK(covered == n_tok, "RowSlots: the sequences cover ", covered, " of ", n_tok,
                 " rows");
  if (ctx.ws.seq_rows.size() < ctx.seqs.size()) {
    ctx.ws.seq_rows.resize(ctx.seqs.size());
    ctx.ws.seq_rows_t.resize(ctx.seqs.size());
  }
}

}  // namespace moesplit::engine
