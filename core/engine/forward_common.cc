// Steps shared by all architectures: embeddings, the attention core, FFN / MoE, the output head.
#include <algorithm>
#include <vector>

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

void Embed(const ForwardContext& ctx, const int32_t* tokens, int64_t n_tok, float* x) {
  const matmul::WeightMatrix emb = matmul::FromTensor(ctx.w.token_embd);
  for (int64_t t = 0; t < n_tok; ++t) {
    quant::DequantizeRow(emb.type, emb.Row(tokens[t]), x + t * emb.cols, emb.cols);
  }
}

void AttendOne(const float* q_a, int64_t na, const float* q_b, int64_t nb, const float* k_rows,
               int64_t k_stride, int64_t kb_offset, const float* v_rows, int64_t v_stride,
               int64_t n_out, int64_t n_ctx, float scale, float* scores, float* out) {
  for (int64_t s = 0; s < n_ctx; ++s) {
    const float* k = k_rows + s * k_stride;
    float dot = matmul::Dot(q_a, k, na);
    if (nb > 0) dot += matmul::Dot(q_b, k + kb_offset, nb);
    scores[s] = dot * scale;
  }
  ops::Softmax(scores, n_ctx);
  std::fill(out, out + n_out, 0.0f);
  for (int64_t s = 0; s < n_ctx; ++s) {
    const float p = scores[s];
    const float* v = v_rows + s * v_stride;
    for (int64_t i = 0; i < n_out; ++i) out[i] += p * v[i];
  }
}

namespace {

moe::FfnJob Job(const TensorView& gate, const TensorView& up, const TensorView& down,
                const float* x, int64_t n_tok, float* y) {
  return {matmul::FromTensor(gate), matmul::FromTensor(up), matmul::FromTensor(down), x, n_tok, y};
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

}  // namespace

void FeedForward(const ForwardContext& ctx, int64_t il, const float* h, int64_t n_tok, float* out) {
  const ModelConfig& c = ctx.cfg;
  const LayerWeights& l = ctx.w.layers[static_cast<size_t>(il)];
  const int64_t D = c.n_embd;
  if (!c.IsMoeLayer(il)) {
    const moe::FfnJob job = Job(l.ffn_gate, l.ffn_up, l.ffn_down, h, n_tok, out);
    moe::RunFfnJobs(ctx.pool, {&job, 1});
    return;
  }
  const int64_t E = c.n_expert, k = c.n_expert_used;
  std::vector<float> router(static_cast<size_t>(n_tok * E));  // [T x E] router logits
  matmul::MatMul(ctx.pool, matmul::FromTensor(l.ffn_gate_inp), h, D, n_tok, router.data(), E);
  std::vector<int32_t> ids(static_cast<size_t>(n_tok * k));    // [T x k]
  std::vector<float> weights(static_cast<size_t>(n_tok * k));  // [T x k]
  const float* bias =
      Present(l.exp_probs_b) ? static_cast<const float*>(l.exp_probs_b.data) : nullptr;
  moe::Route(RouterFor(c), router.data(), bias, n_tok, ids.data(), weights.data());
  ctx.experts.Forward({l.ffn_gate_exps, l.ffn_up_exps, l.ffn_down_exps}, h, n_tok, ids.data(),
                      weights.data(), static_cast<int>(k), out);
  if (Present(l.ffn_gate_shexp)) {
    // Shared expert(s): added unweighted.
    std::vector<float> shared(static_cast<size_t>(n_tok * D));  // [T x D]
    const moe::FfnJob job =
        Job(l.ffn_gate_shexp, l.ffn_up_shexp, l.ffn_down_shexp, h, n_tok, shared.data());
    moe::RunFfnJobs(ctx.pool, {&job, 1});
    for (int64_t i = 0; i < n_tok * D; ++i) out[i] += shared[static_cast<size_t>(i)];
  }
}

void Logits(const ForwardContext& ctx, const float* x, int64_t n_tok, int64_t n_out,
            float* logits) {
  const int64_t D = ctx.cfg.n_embd;
  std::vector<float> xn(static_cast<size_t>(n_out * D));  // [n_out x D]
  const float* norm = static_cast<const float*>(ctx.w.output_norm.data);
  for (int64_t i = 0; i < n_out; ++i) {
    ops::RmsNorm(x + (n_tok - n_out + i) * D, norm, D, ctx.cfg.rms_eps, xn.data() + i * D);
  }
  matmul::MatMul(ctx.pool, matmul::FromTensor(ctx.w.output), xn.data(), D, n_out, logits,
                 ctx.cfg.n_vocab);
}

}  // namespace moesplit::engine
