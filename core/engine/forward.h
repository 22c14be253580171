// Internal to core/engine: the per-layer steps of the forward pass. Every function reads T
// token rows at positions pos0 .. pos0 + T - 1 and writes T rows; shapes are in the comments
// (D = n_embd, H = n_head, L = kv_lora, V = n_vocab).
#pragma once

#include <cstdint>

#include "core/engine/kv_cache.h"
#include "core/model/model_config.h"
#include "core/model/model_weights.h"
#include "cpu_kernels/ops/ops.h"
#include "moe/expert_engine.h"
#include "numa/thread_pool.h"

namespace moesplit::engine {

struct ForwardContext {
  const ModelConfig& cfg;
  const ModelWeights& w;
  numa::ThreadPool& pool;
  KvCache& kv;
  moe::ExpertEngine& experts;
  ops::RopeParams rope;  // from cfg (RopeParamsFor)
};

ops::RopeParams RopeParamsFor(const ModelConfig& cfg);

// x[T x D] = token_embd rows of tokens[T].
void Embed(const ForwardContext& ctx, const int32_t* tokens, int64_t n_tok, float* x);

// out[T x D] = MLA attention of h[T x D] (already attn_norm'ed); writes the latent cache rows.
void MlaAttention(const ForwardContext& ctx, int64_t il, const float* h, int64_t n_tok,
                  int64_t pos0, float* out);

// out[T x D] = GQA attention of h[T x D] (qwen3moe / llama); writes K/V cache rows.
void GqaAttention(const ForwardContext& ctx, int64_t il, const float* h, int64_t n_tok,
                  int64_t pos0, float* out);

// out[T x D] = dense FFN or MoE (routed + shared experts) of h[T x D] (already ffn_norm'ed).
void FeedForward(const ForwardContext& ctx, int64_t il, const float* h, int64_t n_tok, float* out);

// logits[n_out x V] = output(output_norm(x[rows]))   for the last n_out rows of x[T x D].
void Logits(const ForwardContext& ctx, const float* x, int64_t n_tok, int64_t n_out, float* logits);

// Causal softmax attention of one query against cached rows 0..n_ctx-1 (the shared core of MLA
// and GQA): scores[s] = scale * (dot(q_a, ka_s) + dot(q_b, kb_s)); p = softmax(scores);
// out[0..n_out) = sum_s p_s * v_s. ka_s = k_rows + s*k_stride (width na), kb_s = ka_s + kb_offset
// (width nb, may be 0), v_s = v_rows + s*v_stride. scores: [n_ctx] scratch.
void AttendOne(const float* q_a, int64_t na, const float* q_b, int64_t nb, const float* k_rows,
               int64_t k_stride, int64_t kb_offset, const float* v_rows, int64_t v_stride,
               int64_t n_out, int64_t n_ctx, float scale, float* scores, float* out);

}  // namespace moesplit::engine
