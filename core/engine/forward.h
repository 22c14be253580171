// Internal to core/engine: the per-layer steps of the forward pass. Every function reads the T
// token rows of a step and writes T rows; the rows belong to one or more sequences (SeqRows:
// consecutive rows of one sequence at consecutive positions, with the sequence's KV block
// table). Only attention looks at sequences; everything else treats rows alike. Shapes are in
// the comments
// (D = n_embd, H = n_head, L = kv_lora, V = n_vocab). All matrix products go through
// cpu_kernels/qmatmul on the session's kernel table; buffers live in the session's Workspace so
// that a decode step allocates nothing.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "core/engine/kv_cache.h"
#include "core/engine/profile.h"
#include "core/model/model_config.h"
#include "core/model/model_weights.h"
#include "cpu_kernels/gemv/gemv.h"
#include "cpu_kernels/ops/ops.h"
#include "cpu_kernels/qmatmul/qmatmul.h"
#include "moe/expert_engine.h"
#include "moe/grouped_experts.h"
#include "moe/routing.h"
#include "core/base/executor.h"

namespace moesplit::engine {

// Per-thread scratch of the attention tasks.
struct WorkerScratch {
  std::vector<float> a;         // MLA: [rows x (L+R)] absorbed queries of a (token, head) block
  std::vector<float> b;         // MLA: [rows x L] latent outputs of the block
  std::vector<float> scores;    // [rows x n_ctx] attention scores / probabilities
  std::vector<float> cache_rows;  // MLA split decode: [chunk x (L+R)] a chunk's rows, gathered
  std::vector<float> deq;       // [max row width] reference dequantization of one row
  qmatmul::QuantizedRows rows;  // a head's activation slice, quantized
};

// Buffers reused across Eval calls (they grow to the largest batch seen, never shrink).
struct Workspace {
  std::vector<float> x, h, out;    // [T x D] residual stream, normed input, block output
  std::vector<float> q;            // [T x H*head_dim_k]
  std::vector<float> qa;           // [T x Q] MLA compressed q
  std::vector<float> kv;           // [T x (L+R)] MLA kv_a / [T x Hk*hd] GQA k
  std::vector<float> v;            // [T x Hk*hv] GQA v
  std::vector<float> o;            // [T x H*hv] attention output before attn_output
  std::vector<float> cs;           // [T x R] RoPE cos/sin rows
  std::vector<float> cache_f32;    // [ctx x width] f16 K / latent cache rows as f32
  std::vector<float> router;       // [T x E] router logits
  std::vector<int32_t> ids;        // [T x k] routed experts
  std::vector<float> weights;      // [T x k] their weights
  std::vector<float> xn;           // [n_out x D] output_norm'ed rows for the head
  // MLA prefill in the expanded form, for a group of G heads (see forward_mla.cc):
  std::vector<float> mla_wkb;  // [G x nope x L] W_kb of each head, f32
  std::vector<float> mla_wvb;  // [G x v x L] W_vb of each head, f32
  std::vector<float> mla_k;    // [G x ctx x (nope+R)] expanded keys [W_kb c_s, k_pe_s]
  std::vector<float> mla_vt;   // [G x v x ctx] expanded values, transposed
  // MLA decode split over positions (forward_mla.cc), rows of the sequences it takes:
  std::vector<float> mla_qc;    // [T x H x (L+R)] absorbed queries
  // (rows of a chunk past a token's position are not written: phase 3 reads the ones it sees)
  std::vector<float> mla_part;  // [chunks x tokens x H x L] each chunk's p C, p its softmax
  std::vector<float> mla_lse;   // [chunks x tokens x H] each chunk's log-sum-exp of the scores
  std::vector<float> gqa_vt;   // [Hk x v x ctx] GQA prefill: cached values, transposed
  std::vector<int64_t> slot;   // [T] the KV cache slot of each row (RowSlots)
  std::vector<int64_t> pos;    // [T] the position of each row in its sequence (RowSlots)
  // Per sequence of the step (gathered when its blocks are not consecutive): [n_seq] buffers.
  std::vector<std::vector<float>> seq_rows, seq_rows_t;
  std::array<qmatmul::QuantizedRows, 3> rows;  // an input in F32 / Q8_K / Q8_0 (Project)
  std::vector<WorkerScratch> workers;          // [threads]
};

// The rows of one sequence in a step: rows [row0, row0 + n_tok) at positions pos0 .. pos0 +
// n_tok - 1; its KV cache blocks cover positions [0, pos0 + n_tok).
struct SeqRows {
  std::span<const int32_t> blocks;  // [>= ceil((pos0 + n_tok) / B)] block table
  int64_t row0 = 0;
  int64_t n_tok = 0;
  int64_t pos0 = 0;
};

struct ForwardContext {
  const ModelConfig& cfg;
  const ModelWeights& w;
  moesplit::Executor& pool;  // attention, dense layers, head (node 0's pool when placed)
  KvCache& kv;
  moe::GroupedExperts& experts;  // routed experts over the placement's groups
  ops::RopeParams rope;          // from cfg (RopeParamsFor)
  const gemv::GemvKernels& kernels;
  Workspace& ws;
  Profile* prof = nullptr;  // time and bytes per phase (bench --verbose); null: not measured
  // The step's sequences, in row order, covering rows [0, T). Empty: the single-sequence
  // overloads below supply one.
  std::span<const SeqRows> seqs = {};
};

// Block table 0, 1, ..., n_blocks - 1: a lone sequence reading a pool (CPU or device) from block 0
// (Session, tests, one-sequence helpers).
std::vector<int32_t> IdentityBlocks(int64_t n_blocks);

// ws.slot[t] / ws.pos[t] = the cache slot / position of row t of ctx.seqs (T rows); one
// ws.seq_rows / seq_rows_t buffer per sequence.
void RowSlots(const ForwardContext& ctx, int64_t n_tok);

// nbytes of a tensor the model has, 0 for an absent one (the profile's byte counts).
inline uint64_t BytesOf(const TensorView& t) { return Present(t) ? t.nbytes : 0; }

ops::RopeParams RopeParamsFor(const ModelConfig& cfg);
moe::RouterConfig RouterFor(const ModelConfig& cfg);

// Bytes of the distinct routed experts among ids[n] of layer l (each is read once per layer
// whatever its token count): what a MoE layer's routed experts read.
uint64_t RoutedExpertBytes(const ModelConfig& c, const LayerWeights& l, const int32_t* ids,
                           int64_t n);

// Grows v to at least n elements (never shrinks: no reallocation once warm); returns data().
template <typename T>
T* Grow(std::vector<T>& v, int64_t n) {
  if (v.size() < static_cast<size_t>(n)) v.resize(static_cast<size_t>(n));
  return v.data();
}

// fn(t) for every token t < n_tok: inline for a few tokens (decode), else in token blocks over
// the pool (prefill), for the element-wise steps (norms, RoPE, residual adds).
void ForTokens(const ForwardContext& ctx, int64_t n_tok, const std::function<void(int64_t)>& fn);

// products[i].y = x W_i^T for x[n_tok x cols] (row stride ldx): x is quantized once per distinct
// activation type and all products of that type run in one ParallelFor.
void Project(const ForwardContext& ctx, const float* x, int64_t ldx, int64_t n_tok,
             std::span<const qmatmul::Product> products);

// x[T x D] = token_embd rows of tokens[T].
void Embed(const ForwardContext& ctx, const int32_t* tokens, int64_t n_tok, float* x);

// How MLA attention is computed (the same values either way, up to rounding):
//   kAbsorbed  queries absorbed into the latent space: (L+R) + L multiply-adds per (token,
//              head, position); the only sensible form for decode;
//   kExpanded  keys and values of every position expanded per head first ((nope + v) x L per
//              position and head), then (nope+R) + v per (token, head, position): fewer
//              multiply-adds once a batch attends to about as many positions as it has tokens;
//   kAuto      whichever costs fewer multiply-adds (MlaExpandedIsCheaper); the absorbed form
//              split over positions (MlaSplitChunk) for batches of <= 16 tokens past 512 KB
//              of cache rows per layer;
//   kAbsorbedSplit  (tests) the absorbed form split over 16-position chunks for batches of
//              <= 16 tokens, the absorbed form for longer ones.
enum class MlaForm { kAuto, kAbsorbed, kExpanded, kAbsorbedSplit };

// Positions per task when the absorbed form of a sequence's n_tok tokens over n_ctx positions
// runs split over positions (long-context decode, forward_mla.cc); 0: not split.
int64_t MlaSplitChunk(const ModelConfig& c, int n_threads, int64_t n_tok, int64_t n_ctx,
                      MlaForm form);

bool MlaExpandedIsCheaper(const ModelConfig& c, int64_t n_tok, int64_t pos0);

// out[T x D] = MLA attention of h[T x D] (already attn_norm'ed) for the sequences ctx.seqs;
// writes the latent cache rows.
void MlaAttention(const ForwardContext& ctx, int64_t il, const float* h, int64_t n_tok,
                  float* out, MlaForm form = MlaForm::kAuto);
// One sequence at pos0 reading the pool from block 0 (ctx.seqs ignored).
void MlaAttention(const ForwardContext& ctx, int64_t il, const float* h, int64_t n_tok,
                  int64_t pos0, float* out, MlaForm form = MlaForm::kAuto);

// out[T x D] = GQA attention of h[T x D] (qwen3moe / llama); writes K/V cache rows.
void GqaAttention(const ForwardContext& ctx, int64_t il, const float* h, int64_t n_tok,
                  float* out);
void GqaAttention(const ForwardContext& ctx, int64_t il, const float* h, int64_t n_tok,
                  int64_t pos0, float* out);

// out[T x D] = dense FFN or MoE (routed + shared experts) of h[T x D] (already ffn_norm'ed).
void FeedForward(const ForwardContext& ctx, int64_t il, const float* h, int64_t n_tok, float* out);

// logits[n_out x V] = output(output_norm(x[rows[i]]))   for the rows asked for, of x[T x D].
void Logits(const ForwardContext& ctx, const float* x, std::span<const int64_t> rows,
            float* logits);

// n f32 rows of `cols` values, `stride` floats apart, as activation rows for qmatmul.
qmatmul::QuantizedRows F32Rows(const float* x, int64_t n, int64_t cols, int64_t stride);

// rows x cols f32 values, row r at data + r * stride floats, as a weight matrix.
matmul::WeightMatrix F32Matrix(const float* data, int64_t rows, int64_t cols, int64_t stride);

// Causal softmax attention of one query against cached rows 0..n_ctx-1 (GQA's core for decode
// and batches under 32 tokens; longer prompts take forward_gqa.cc's batched core):
// scores[s] = scale * (dot(q_a, ka_s) + dot(q_b, kb_s)); p = softmax(scores) by `softmax` (the
// tier's GemvKernels::scaled_softmax, as in both MLA forms: 4096 positions x 32 heads = 131k
// exps per layer and token); out[0..n_out) = sum_s p_s * v_s. ka_s = k_rows + s*k_stride (width
// na), kb_s = ka_s + kb_offset (width nb, may be 0), v_s = v_rows + s*v_stride. scores: [n_ctx]
// scratch.
void AttendOne(const float* q_a, int64_t na, const float* q_b, int64_t nb, const float* k_rows,
               int64_t k_stride, int64_t kb_offset, const float* v_rows, int64_t v_stride,
               int64_t n_out, int64_t n_ctx, float scale, gemv::ScaledSoftmaxFn softmax,
               float* scores, float* out);

}  // namespace moesplit::engine
