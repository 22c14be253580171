// DeepSeek MLA attention. Decode (and short batches late in the context) in the absorbed form
// (llama.cpp's is_mla path, DeepSeek-V2 paper §2.1); prefill in the expanded form when it costs
// fewer multiply-adds (MlaExpandedIsCheaper; ExpandedAttention below). The absorbed form:
// the cache holds per token only the normalised latent c (L floats) and the roped shared key
// k_pe (R floats). Per head h, with W_kb[h] [L x nope] and W_vb[h] [v x L]:
//   q_abs = W_kb[h]^T q_nope                  (nope -> L: the key up-projection moved onto q)
//   score_s = kq_scale * (q_abs . c_s + q_pe . k_pe_s)
//   o_lat = sum_s softmax(score)_s c_s        (L)
//   o_h = W_vb[h] o_lat                        (L -> v)
// which equals attention over the expanded k_s = [W_kb c_s, k_pe_s], v_s = W_vb c_s.
// Per layer: one ParallelFor for the projections of h (q or q_a, kv_a_mqa), [q_b], one over
// (token block, head group) tasks doing q_abs, the attention (two matrix products over the
// latent cache, kernel table's f32 form) and o_h together, and attn_output.
#include <algorithm>
#include <array>
#include <cmath>
#include <optional>
#include <vector>

#include "core/base/int_math.h"
#include "core/engine/forward.h"
#include "cpu_kernels/matmul/matmul.h"
#include "cpu_kernels/quant/quant.h"
#include "cpu_kernels/quant/repack.h"

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

// Latent cache rows of the T rows (each at its own position ws.pos, cache slot ws.slot):
// [rmsnorm(kv_a[:L]), rope(kv_a[L:])] (in place in ws.kv), and RoPE of every head's q_pe (in
// place in ws.q).
void RopeAndCache(const ForwardContext& ctx, const LayerWeights& l, int64_t il, int64_t n_tok) {
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
    ops::RopeCosSin(ctx.rope, ctx.ws.pos[t], cs);
    ops::RopeApply(ctx.rope, cs, row + L);
    for (int64_t hh = 0; hh < H; ++hh) ops::RopeApply(ctx.rope, cs, q + (t * H + hh) * hk + nope);
    ctx.kv.Write(KvCache::kK, il, ctx.ws.slot[t], row);  // disjoint slots: safe in parallel
  });
}

// q_abs[nt x L] (row i at q_abs + i * ldy) = W_kb[h]^T q_nope for nt tokens of head h.
void AbsorbQ(const ForwardContext& ctx, const HeadMaps& m, const float* q_nope, int64_t ldq,
             int64_t nt, WorkerScratch& s, float* q_abs, int64_t ldy) {
  const int64_t L = ctx.cfg.kv_lora_rank;
  if (m.transposed_k) {  // legacy attn_kv_b: the transposed product stays on the reference
    matmul::MatMulTransposed(m.k, q_nope, ldq, nt, q_abs, ldy, Grow(s.deq, m.k.cols));
    return;
  }
  qmatmul::Quantize(ctx.kernels, qmatmul::ActTypeFor(ctx.kernels, m.k.type), q_nope, ldq, nt,
                    m.k.cols, &s.rows);
  qmatmul::MatMulRows(ctx.kernels, m.k, s.rows, q_abs, ldy, 0, L);
}

// qc rows i * ldqc (i < nt) = [W_kb[h]^T q_nope, q_pe] of head h for the nt query rows q [nt x
// H*hk]: the query in the latent cache's space [L + R].
void AbsorbedQuery(const ForwardContext& ctx, const LayerWeights& l, const float* q, int64_t nt,
                   int64_t h, WorkerScratch& s, float* qc, int64_t ldqc) {
  const ModelConfig& c = ctx.cfg;
  const int64_t H = c.n_head, L = c.kv_lora_rank, nope = c.qk_nope, hk = c.head_dim_k;
  const float* qh = q + h * hk;
  AbsorbQ(ctx, MapsForHead(c, l, h), qh, H * hk, nt, s, qc, ldqc);
  for (int64_t i = 0; i < nt; ++i) {
    std::copy(qh + i * H * hk + nope, qh + i * H * hk + hk, qc + i * ldqc + L);
  }
}

// Latent cache of one layer for positions [0, n_ctx): rows [n_ctx x (L+R)], c_s the first L
// values of row s.
struct LatentCache {
  const float* rows;  // [n_ctx x W]
  int64_t n_ctx;
};

// o[t0 + i, h0 + j] = W_vb[h0 + j] o_lat[i * nh + j] for nt tokens x nh heads: o_lat rows
// [(i, j) x L], o rows [.. x H*v] from the sequence's first row.
void ProjectValues(const ForwardContext& ctx, const LayerWeights& l, const float* o_lat, int64_t t0,
                   int64_t nt, int64_t h0, int64_t nh, WorkerScratch& s, float* o) {
  const ModelConfig& c = ctx.cfg;
  const int64_t H = c.n_head, L = c.kv_lora_rank, hv = c.head_dim_v;
  for (int64_t j = 0; j < nh; ++j) {
    const matmul::WeightMatrix vb = MapsForHead(c, l, h0 + j).v;
    qmatmul::Quantize(ctx.kernels, qmatmul::ActTypeFor(ctx.kernels, vb.type), o_lat + j * L, nh * L,
                      nt, L, &s.rows);
    qmatmul::MatMulRows(ctx.kernels, vb, s.rows, o + t0 * H * hv + (h0 + j) * hv, H * hv, 0, hv);
  }
}

// Attention of one sequence's tokens [t0, t0+nt) (positions pos0 + t; query rows q [.. x
// H*hk], output rows o [.. x H*v], both from the sequence's first row) x heads [h0, h0+nh), all
// as matrix
// products over the cache so that a task reads the cache once for all its (token, head) rows:
//   qc[(i, j)]  = [W_kb[h]^T q_nope, q_pe]                      [nt*nh x (L+R)]
//   s           = qc rows^T: scores against positions < the block's end  [nt*nh x n]
//   p           = softmax(kq_scale * s) over positions <= the token's (causal)
//   o_lat       = p C, straight from the cache rows (row_mix)      [nt*nh x L]
//   o[t, h]     = W_vb[h] o_lat                                   [v]
void AttendBlock(const ForwardContext& ctx, const LayerWeights& l, const LatentCache& cache,
                 const float* q, int64_t pos0, int64_t t0, int64_t nt, int64_t h0, int64_t nh,
                 WorkerScratch& s, float* o) {
  const ModelConfig& c = ctx.cfg;
  const int64_t H = c.n_head, L = c.kv_lora_rank, W = L + c.qk_rope, hk = c.head_dim_k;
  const int64_t n = pos0 + t0 + nt;  // positions any token of the block sees
  const int64_t rows = nt * nh;
  float* qc = Grow(s.a, rows * W);           // [(i, j) x W]
  float* scores = Grow(s.scores, rows * n);  // [(i, j) x n]
  float* o_lat = Grow(s.b, rows * L);        // [(i, j) x L]
  for (int64_t j = 0; j < nh; ++j) {
    AbsorbedQuery(ctx, l, q + t0 * H * hk, nt, h0 + j, s, qc + j * W, nh * W);
  }
  qmatmul::MatMulRows(ctx.kernels, F32Matrix(cache.rows, n, W, W), F32Rows(qc, rows, W, W), scores,
                      n, 0, n);
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t valid = pos0 + t0 + r / nh + 1;  // causal: positions 0 .. own
    ctx.kernels.scaled_softmax(scores + r * n, valid, n, c.kq_scale);
  }
  // o_lat = p C from the cache rows as they lie (their first L values are c_s).
  ctx.kernels.row_mix(scores, n, rows, cache.rows, W, n, L, o_lat, L);
  ProjectValues(ctx, l, o_lat, t0, nt, h0, nh, s, o);
}

// ---- the expanded form (prefill) ---------------------------------------------------------------

// Rows [0, n) of w as f32, row r at out + r * ld: a file layout row by row, a 16-row group
// layout (split attn_k_b / attn_v_b repacked at load, weight_repack.h) one group at a time,
// unpacked to its file type first (n is a multiple of 16 there: the repack requires it).
void DequantizeRows(const matmul::WeightMatrix& w, int64_t n, float* out, int64_t ld) {
  const int64_t group = RowGroup(w.type);
  if (group == 1) {
    for (int64_t r = 0; r < n; ++r) quant::DequantizeRow(w.type, w.Row(r), out + r * ld, w.cols);
    return;
  }
  const GgmlType file = quant::UnpackedType(w.type);
  const size_t row = static_cast<size_t>(RowBytes(file, w.cols));
  std::vector<uint8_t> buf(row * static_cast<size_t>(group));  // [16 x row] one group, unpacked
  for (int64_t g = 0; g < n; g += group) {
    quant::UnpackRows16(w.type, w.Row(g), w.cols, buf.data(), row);
    for (int64_t i = 0; i < group; ++i) {
      quant::DequantizeRow(file, buf.data() + i * row, out + (g + i) * ld, w.cols);
    }
  }
}

// W_kb[h] as [nope x L] and W_vb[h] as [v x L] f32 rows, for both layouts (split attn_k_b is
// stored [L x nope] per head: transposed here).
void DequantizeHeadMaps(const ModelConfig& c, const LayerWeights& l, int64_t h, float* wkb,
                        float* wvb) {
  const int64_t L = c.kv_lora_rank, nope = c.qk_nope, hv = c.head_dim_v;
  const HeadMaps m = MapsForHead(c, l, h);
  if (m.transposed_k) {  // legacy: rows of W_kb[h] directly
    DequantizeRows(m.k, nope, wkb, L);
  } else {
    std::vector<float> kt(static_cast<size_t>(L * nope));  // [L x nope] W_kb[h]^T
    DequantizeRows(m.k, L, kt.data(), nope);
    for (int64_t li = 0; li < L; ++li) {
      for (int64_t i = 0; i < nope; ++i) wkb[i * L + li] = kt[static_cast<size_t>(li * nope + i)];
    }
  }
  DequantizeRows(m.v, hv, wvb, L);
}

// Heads per expanded group: their keys and values for n_ctx positions stay within ~64 MB
// ((nope+R) + v floats per position and head: 320 x 4 B x 4096 positions = 5 MB per head).
int64_t ExpandedGroupHeads(const ModelConfig& c, int64_t n_ctx) {
  const int64_t per_head = n_ctx * (c.head_dim_k + c.head_dim_v) * 4;
  return std::clamp<int64_t>((int64_t{64} << 20) / std::max<int64_t>(per_head, 1), 1, c.n_head);
}

// Attention of all n_tok tokens over positions [0, pos0 + n_tok) in the expanded form, head
// group by head group: one ParallelFor expands keys K_h [ctx x (nope+R)] = [C W_kb[h]^T, k_pe]
// and transposed values V_h^T [v x ctx] = W_vb[h] C^T over position blocks, a second one runs
// (token block, head) tasks: s = K_h q (causal), p = softmax, o = V_h^T p.
void ExpandedAttention(const ForwardContext& ctx, const LayerWeights& l, const LatentCache& cache,
                       const float* q, int64_t n_tok, int64_t pos0, float* o) {
  const ModelConfig& c = ctx.cfg;
  const int64_t H = c.n_head, L = c.kv_lora_rank, R = c.qk_rope, W = L + R;
  const int64_t nope = c.qk_nope, hk = c.head_dim_k, hv = c.head_dim_v;
  const int64_t n_ctx = cache.n_ctx, G = ExpandedGroupHeads(c, n_ctx);
  float* wkb = Grow(ctx.ws.mla_wkb, G * nope * L);
  float* wvb = Grow(ctx.ws.mla_wvb, G * hv * L);
  float* kx = Grow(ctx.ws.mla_k, G * n_ctx * hk);
  float* vt = Grow(ctx.ws.mla_vt, G * hv * n_ctx);
  // F32 products on AMX-BF16 tiles where the tier has them (~1.5e-5 of sum |w a|; see gemv.h).
  const gemv::GemmFn f32 = ctx.kernels.f32_gemm_bf16x3;
  constexpr int64_t kPosBlock = 64, kTokBlock = 16;
  const int64_t n_pos_blocks = CeilDiv(n_ctx, kPosBlock), n_tok_blocks = CeilDiv(n_tok, kTokBlock);
  for (int64_t h0 = 0; h0 < H; h0 += G) {
    const int64_t g_n = std::min(G, H - h0);
    ctx.pool.ParallelFor(g_n, [&](int64_t j, int) {
      DequantizeHeadMaps(c, l, h0 + j, wkb + j * nope * L, wvb + j * hv * L);
    });
    ctx.pool.ParallelFor(g_n * n_pos_blocks, [&](int64_t task, int) {
      const int64_t j = task / n_pos_blocks, s0 = (task % n_pos_blocks) * kPosBlock;
      const int64_t ns = std::min(kPosBlock, n_ctx - s0);
      float* kj = kx + j * n_ctx * hk;
      // K rows s0.. : [W_kb c_s] (nope) then k_pe_s (R).
      qmatmul::MatMulRows(ctx.kernels, F32Matrix(wkb + j * nope * L, nope, L, L),
                          F32Rows(cache.rows + s0 * W, ns, L, W), kj + s0 * hk, hk, 0, nope, f32);
      for (int64_t s = s0; s < s0 + ns; ++s) {
        std::copy(cache.rows + s * W + L, cache.rows + s * W + W, kj + s * hk + nope);
      }
      // V^T columns s0.. : row d = W_vb[d] . c_s for s in the block.
      qmatmul::MatMulRows(ctx.kernels, F32Matrix(cache.rows + s0 * W, ns, L, W),
                          F32Rows(wvb + j * hv * L, hv, L, L), vt + j * hv * n_ctx + s0, n_ctx, 0,
                          ns, f32);
    });
    // Latest token blocks (longest causal rows) first.
    ctx.pool.ParallelFor(g_n * n_tok_blocks, [&](int64_t task, int worker) {
      const int64_t j = task % g_n, t0 = (n_tok_blocks - 1 - task / g_n) * kTokBlock;
      const int64_t nt = std::min(kTokBlock, n_tok - t0), n = pos0 + t0 + nt;
      WorkerScratch& sw = ctx.ws.workers[static_cast<size_t>(worker)];
      float* scores = Grow(sw.scores, nt * n);  // [nt x n]
      qmatmul::MatMulRows(ctx.kernels, F32Matrix(kx + j * n_ctx * hk, n, hk, hk),
                          F32Rows(q + (t0 * H + h0 + j) * hk, nt, hk, H * hk), scores, n, 0, n,
                          f32);
      for (int64_t i = 0; i < nt; ++i) {
        const int64_t valid = pos0 + t0 + i + 1;  // causal: positions 0 .. own
        ctx.kernels.scaled_softmax(scores + i * n, valid, n, c.kq_scale);
      }
      qmatmul::MatMulRows(ctx.kernels, F32Matrix(vt + j * hv * n_ctx, hv, n, n_ctx),
                          F32Rows(scores, nt, n, n), o + t0 * H * hv + (h0 + j) * hv, H * hv, 0, hv,
                          f32);
    });
  }
}

}  // namespace

// Multiply-adds of the two forms for n_tok tokens at positions pos0.. (causal: a token at
// position p attends to p + 1 positions, n_tok (pos0 + (n_tok + 1) / 2) pairs in all):
//   absorbed  pairs H ((L+R) + L) + n_tok H (nope L + L v)     (q absorption, output map)
//   expanded  pairs H ((nope+R) + v) + n_ctx H (nope + v) L    (keys and values expanded)
// With DeepSeek's shapes (L 512, R 64, nope 128, v 128) the expanded form wins for prefill from
// position 0 at any length and loses for decode and short batches deep in the context.
bool MlaExpandedIsCheaper(const ModelConfig& c, int64_t n_tok, int64_t pos0) {
  // Below 32 tokens attention is a small part of the work either way, and decode must stay in
  // the absorbed form: the two forms round differently (f32 expanded keys vs Q8_0-quantized
  // absorbed queries, as llama.cpp), which on a small random model flips MoE routing near-ties
  // between a prompt's batch and its token-by-token decode (oracle tests: 10/16 positions).
  if (n_tok < 32) return false;
  const int64_t H = c.n_head, L = c.kv_lora_rank, R = c.qk_rope, nope = c.qk_nope;
  const int64_t hv = c.head_dim_v;
  const double pairs = static_cast<double>(n_tok) * static_cast<double>(pos0 + (n_tok + 1) / 2);
  const double absorbed =
      pairs * H * (2 * L + R) + static_cast<double>(n_tok) * H * (nope + hv) * L;
  const double expanded =
      pairs * H * (nope + R + hv) + static_cast<double>(pos0 + n_tok) * H * (nope + hv) * L;
  return expanded < absorbed;
}

namespace {

// One sequence's absorbed-form tasks: (block of <= 16 tokens, group of heads), >= 4 per thread
// where the heads allow; the latest token blocks (longest causal rows) first. Every task reads
// the layer's cache rows ((L+R) floats per position, twice): past ~2 MB (long-context decode) one
// head group per thread, so that the cache streams from DRAM/L3 once per thread, not 4x.
struct AbsorbedTask {
  int64_t seq, t0, nt, h0, nh;
  bool query_only = false;  // a split sequence's head h0: its absorbed queries (SplitSeq)
};
void AddAbsorbedTasks(const ModelConfig& c, int n_threads, int64_t seq, const SeqRows& s,
                      std::vector<AbsorbedTask>* tasks) {
  const int64_t H = c.n_head;
  const int64_t tb = std::min<int64_t>(s.n_tok, 16);
  const int64_t n_blocks = CeilDiv(s.n_tok, tb);
  const int64_t n_ctx_max = s.pos0 + s.n_tok;
  const bool big_cache = n_ctx_max * (c.kv_lora_rank + c.qk_rope) * 4 > (int64_t{2} << 20);
  const int64_t tasks_wanted = (big_cache ? 1 : 4) * static_cast<int64_t>(n_threads);
  const int64_t groups_wanted = std::clamp<int64_t>(CeilDiv(tasks_wanted, n_blocks), 1, H);
  const int64_t hg = CeilDiv(H, groups_wanted);  // heads per task
  const int64_t n_groups = CeilDiv(H, hg);
  for (int64_t task = 0; task < n_blocks * n_groups; ++task) {
    const int64_t t0 = (n_blocks - 1 - task / n_groups) * tb, h0 = (task % n_groups) * hg;
    tasks->push_back({seq, t0, std::min(tb, s.n_tok - t0), h0, std::min(hg, H - h0)});
  }
}

// ---- long-context decode: the absorbed form split over positions ------------------------------
//
// AddAbsorbedTasks gives each thread a group of heads and every position: at 2048 positions
// (ds-v2-lite: 2048 x 576 x 4 B = 4.7 MB per layer) two threads read the layer's rows four times
// (scores, then p C, per thread) from L3 / DRAM, and decode spent 26-30 of 56-58 ms per token
// there (bench tg64 @ d2048, 2 threads). Split (as flash-decoding): every task takes a chunk of
// positions and up to kSplitHeads heads, so that the rows are read once from memory and again
// from L2 / L3 for p C, with all the heads of a group per row:
//   phase 1  (with the unsplit tasks) qc = the absorbed queries of every head
//   phase 2  (chunk k, head group) s = qc rows^T (the chunk's positions; row_scores from 16
//            heads), p_k = softmax (causal), lse_k = log sum e^(scaled s), part_k = p_k C_k
//            (row_mix)
//   phase 3  (head group) o_lat = sum_k e^(lse_k - LSE) part_k, LSE = log sum_k e^lse_k; then
//            o = W_vb o_lat (ProjectValues)
// which equals softmax over all positions, up to rounding.
// Cache rows per layer past which to split: 228 DeepSeek positions. Timed on ds-v2-lite, 2
// threads: the split form's phase took 3.7-4.0 ms per token at d256 and 5.3-5.6 at d512, the
// unsplit one 4.3-4.4 and 7.9-8.5 (tg64 @ d128 the same either way).
constexpr int64_t kSplitBytes = int64_t{512} << 10;
constexpr int64_t kSplitHeads = 32;  // heads per phase-2 task: scores [32 x 512] f32 = 64 KB

struct SplitSeq {
  int64_t seq;       // index in ctx.seqs
  int64_t chunk;     // positions per chunk
  int64_t n_chunks;  // ceil(n_ctx / chunk)
  int64_t part0;     // its first row in ws.mla_part / ws.mla_lse: row (k, i, h) at part0 +
                     // (k * n_tok + i) * H + h
};

// Phase 2 of one chunk k and heads [h0, h0 + nh) of a split sequence over n_ctx positions of
// layer il: the chunk's cache rows are read in place, or gathered / converted into the worker's
// buffer (a fragmented block table, an f16 cache) by the task itself.
void AttendChunk(const ForwardContext& ctx, int64_t il, int64_t n_ctx, const SeqRows& s,
                 const SplitSeq& sp, int64_t k, int64_t h0, int64_t nh, WorkerScratch& w) {
  const ModelConfig& c = ctx.cfg;
  const int64_t H = c.n_head, L = c.kv_lora_rank, W = L + c.qk_rope;
  const int64_t p0 = k * sp.chunk, np = std::min(sp.chunk, n_ctx - p0);
  // [np x W] the chunk's rows
  const float* rows = ctx.kv.RowRange(KvCache::kK, il, s.blocks, p0, np, &w.cache_rows);
  float* scores = Grow(w.scores, nh * np);  // [nh x np]
  for (int64_t i = 0; i < s.n_tok; ++i) {
    const int64_t valid = std::clamp<int64_t>(s.pos0 + i + 1 - p0, 0, np);  // causal
    const int64_t row = sp.part0 + (k * s.n_tok + i) * H + h0;
    // The chunk is past this token: phase 3 reads only the chunks a token sees (n_vis).
    if (valid == 0) continue;
    float* lse = ctx.ws.mla_lse.data() + row;
    const float* qc = ctx.ws.mla_qc.data() + ((s.row0 + i) * H + h0) * W;
    if (nh >= 16) {  // row_scores' panels are 16 (AVX-512) or 8 (AVX2) heads wide
      ctx.kernels.row_scores(qc, W, nh, rows, W, valid, W, scores, np);
    } else {
      qmatmul::MatMulRows(ctx.kernels, F32Matrix(rows, valid, W, W), F32Rows(qc, nh, W, W), scores,
                          np, 0, valid);
    }
    for (int64_t j = 0; j < nh; ++j) {
      lse[j] = ctx.kernels.scaled_softmax(scores + j * np, valid, np, c.kq_scale);
    }
    ctx.kernels.row_mix(scores, np, nh, rows, W, valid, L, ctx.ws.mla_part.data() + row * L, L);
  }
}

// Phase 3 for heads [h0, h0 + nh) of a split sequence: the chunks' sums combined, then W_vb.
void CombineChunks(const ForwardContext& ctx, const LayerWeights& l, const SeqRows& s,
                   const SplitSeq& sp, int64_t h0, int64_t nh, WorkerScratch& w, float* o) {
  const int64_t H = ctx.cfg.n_head, L = ctx.cfg.kv_lora_rank;
  float* o_lat = Grow(w.b, s.n_tok * nh * L);  // [(i, j) x L]
  float* wk = Grow(w.scores, sp.n_chunks);     // [chunks] the combination weights
  const int64_t ld_part = s.n_tok * H * L;     // chunk k + 1's row of (i, j) after chunk k's
  for (int64_t i = 0; i < s.n_tok; ++i) {
    // Chunks past the token's position (only ever the last ones) have no part: not read.
    const int64_t n_vis = CeilDiv(s.pos0 + i + 1, sp.chunk);
    for (int64_t j = 0; j < nh; ++j) {
      const int64_t row0 = sp.part0 + i * H + h0 + j;   // chunk 0's row of (i, j)
      const float* lse = ctx.ws.mla_lse.data() + row0;  // chunk k's at lse[k * n_tok * H]
      float max = -INFINITY;
      for (int64_t k = 0; k < n_vis; ++k) max = std::max(max, lse[k * s.n_tok * H]);
      float total = 0;  // >= 1: the chunk holding the maximum adds e^0
      for (int64_t k = 0; k < n_vis; ++k) total += wk[k] = std::exp(lse[k * s.n_tok * H] - max);
      for (int64_t k = 0; k < n_vis; ++k) wk[k] /= total;
      // o_lat = sum_k wk part_k: the weighted sum of n_vis rows, as p C is.
      ctx.kernels.row_mix(wk, n_vis, 1, ctx.ws.mla_part.data() + row0 * L, ld_part, n_vis, L,
                          o_lat + (i * nh + j) * L, L);
    }
  }
  ProjectValues(ctx, l, o_lat, 0, s.n_tok, h0, nh, w, o + s.row0 * H * ctx.cfg.head_dim_v);
}

// Phases 2 and 3 of the split sequences (phase 1 ran with the unsplit tasks).
void RunSplitPhases(const ForwardContext& ctx, int64_t il, std::span<const SplitSeq> splits,
                    std::span<const LatentCache> caches, float* o) {
  const LayerWeights& l = ctx.w.layers[static_cast<size_t>(il)];
  const int64_t H = ctx.cfg.n_head, groups = CeilDiv(H, kSplitHeads);
  const int64_t hg = CeilDiv(H, groups);
  std::vector<std::array<int64_t, 3>> tasks;  // (split, chunk, h0): chunk-major per sequence
  for (size_t i = 0; i < splits.size(); ++i) {
    for (int64_t k = 0; k < splits[i].n_chunks; ++k) {
      for (int64_t h0 = 0; h0 < H; h0 += hg) tasks.push_back({static_cast<int64_t>(i), k, h0});
    }
  }
  ctx.pool.ParallelFor(static_cast<int64_t>(tasks.size()), [&](int64_t t, int worker) {
    const auto [i, k, h0] = tasks[static_cast<size_t>(t)];
    const SplitSeq& sp = splits[static_cast<size_t>(i)];
    AttendChunk(ctx, il, caches[static_cast<size_t>(sp.seq)].n_ctx,
                ctx.seqs[static_cast<size_t>(sp.seq)], sp, k, h0, std::min(hg, H - h0),
                ctx.ws.workers[static_cast<size_t>(worker)]);
  });
  // Phase 3: ~4 tasks per thread over (sequence, head group).
  const int64_t per_seq =
      std::clamp<int64_t>(CeilDiv(4 * ctx.pool.size(), static_cast<int64_t>(splits.size())), 1, H);
  const int64_t hg3 = CeilDiv(H, per_seq), n3 = CeilDiv(H, hg3);
  ctx.pool.ParallelFor(static_cast<int64_t>(splits.size()) * n3, [&](int64_t t, int worker) {
    const SplitSeq& sp = splits[static_cast<size_t>(t / n3)];
    const int64_t h0 = (t % n3) * hg3;
    CombineChunks(ctx, l, ctx.seqs[static_cast<size_t>(sp.seq)], sp, h0, std::min(hg3, H - h0),
                  ctx.ws.workers[static_cast<size_t>(worker)], o);
  });
}

}  // namespace

// Chunks of 128-512 positions (a multiple of 16), as long as there are >= 2 (chunk, head group)
// tasks per thread: ds-v2-lite at 2048 positions on 2 threads: 4 chunks of 512 (1.2 MB of rows
// each); DeepSeek-V3 (4 head groups) on 32 threads: 16 chunks of 128.
int64_t MlaSplitChunk(const ModelConfig& c, int n_threads, int64_t n_tok, int64_t n_ctx,
                      MlaForm form) {
  if (n_tok > 16) return 0;
  if (form == MlaForm::kAbsorbedSplit) return 16;
  const int64_t W = c.kv_lora_rank + c.qk_rope;
  if (form != MlaForm::kAuto || n_ctx * W * 4 <= kSplitBytes) return 0;
  const int64_t groups = CeilDiv(c.n_head, kSplitHeads);
  const int64_t chunk = RoundUp(CeilDiv(n_ctx * groups, 2 * int64_t{n_threads}), 16);
  return std::clamp<int64_t>(chunk, 128, 512);
}

void MlaAttention(const ForwardContext& ctx, int64_t il, const float* h, int64_t n_tok,
                  int64_t pos0, float* out, MlaForm form) {
  const std::vector<int32_t> blocks = IdentityBlocks(ctx.kv.n_blocks());
  const SeqRows seq{blocks, 0, n_tok, pos0};
  ForwardContext one = ctx;
  one.seqs = {&seq, 1};
  MlaAttention(one, il, h, n_tok, out, form);
}

void MlaAttention(const ForwardContext& ctx, int64_t il, const float* h, int64_t n_tok,
                  float* out, MlaForm form) {
  const ModelConfig& c = ctx.cfg;
  const LayerWeights& l = ctx.w.layers[static_cast<size_t>(il)];
  const int64_t H = c.n_head, hv = c.head_dim_v, hk = c.head_dim_k;
  {
    PhaseTimer timer(
        ctx.prof, Phase::kAttnProj,
        BytesOf(l.attn_q) + BytesOf(l.attn_q_a) + BytesOf(l.attn_q_b) + BytesOf(l.attn_kv_a_mqa));
    Project(ctx, l, h, n_tok);
  }
  // The core reads the head maps and, per position, a cache row (L+R).
  uint64_t positions = 0;
  for (const SeqRows& s : ctx.seqs) positions += static_cast<uint64_t>(s.pos0 + s.n_tok);
  const uint64_t core_bytes = BytesOf(l.attn_k_b) + BytesOf(l.attn_v_b) + BytesOf(l.attn_kv_b) +
                              positions * (c.kv_lora_rank + c.qk_rope) * ctx.kv.element_bytes();
  std::optional<PhaseTimer> core_timer(std::in_place, ctx.prof, Phase::kAttnCore, core_bytes);
  RowSlots(ctx, n_tok);
  RopeAndCache(ctx, l, il, n_tok);

  const int n_threads = ctx.pool.size();
  if (ctx.ws.workers.size() < static_cast<size_t>(n_threads)) ctx.ws.workers.resize(n_threads);
  const size_t n_seq = ctx.seqs.size();
  float* o = Grow(ctx.ws.o, n_tok * H * hv);  // [T x H*v]
  const float* q = ctx.ws.q.data();           // [T x H*hk]
  std::vector<LatentCache> caches(n_seq);
  std::vector<AbsorbedTask> tasks;
  std::vector<SplitSeq> splits;  // the sequences split over positions
  int64_t part_rows = 0;         // their rows of ws.mla_part / ws.mla_lse
  for (size_t i = 0; i < n_seq; ++i) {
    const SeqRows& s = ctx.seqs[i];
    const bool expanded = form == MlaForm::kExpanded ||
                          (form == MlaForm::kAuto && MlaExpandedIsCheaper(c, s.n_tok, s.pos0));
    LatentCache& cache = caches[i];
    cache.n_ctx = s.pos0 + s.n_tok;
    const int64_t chunk = expanded ? 0 : MlaSplitChunk(c, n_threads, s.n_tok, cache.n_ctx, form);
    if (chunk == 0) {  // the rows in one piece (gathered here when the blocks are not in order)
      cache.rows = ctx.kv.Rows(KvCache::kK, il, s.blocks, cache.n_ctx, &ctx.ws.seq_rows[i]);
    }
    if (expanded) {  // its own parallel loops, one sequence at a time
      ExpandedAttention(ctx, l, cache, q + s.row0 * H * hk, s.n_tok, s.pos0, o + s.row0 * H * hv);
      continue;
    }
    if (chunk == 0) {
      AddAbsorbedTasks(c, n_threads, static_cast<int64_t>(i), s, &tasks);
      continue;
    }
    const int64_t n_chunks = CeilDiv(cache.n_ctx, chunk);
    splits.push_back({static_cast<int64_t>(i), chunk, n_chunks, part_rows});
    part_rows += n_chunks * s.n_tok * H;
    for (int64_t hh = 0; hh < H; ++hh) {
      tasks.push_back({static_cast<int64_t>(i), 0, s.n_tok, hh, 1, /*query_only=*/true});
    }
  }
  if (!splits.empty()) {
    Grow(ctx.ws.mla_qc, n_tok * H * (c.kv_lora_rank + c.qk_rope));
    Grow(ctx.ws.mla_part, part_rows * c.kv_lora_rank);
    Grow(ctx.ws.mla_lse, part_rows);
  }
  // Every absorbed sequence's tasks in one parallel loop (decode of many sequences: one barrier),
  // with the split sequences' absorbed queries.
  ctx.pool.ParallelFor(static_cast<int64_t>(tasks.size()), [&](int64_t k, int worker) {
    const AbsorbedTask& t = tasks[static_cast<size_t>(k)];
    const SeqRows& s = ctx.seqs[static_cast<size_t>(t.seq)];
    WorkerScratch& w = ctx.ws.workers[static_cast<size_t>(worker)];
    if (t.query_only) {
      const int64_t W = c.kv_lora_rank + c.qk_rope;
      AbsorbedQuery(ctx, l, q + s.row0 * H * hk, s.n_tok, t.h0, w,
                    ctx.ws.mla_qc.data() + (s.row0 * H + t.h0) * W, H * W);
      return;
    }
    AttendBlock(ctx, l, caches[static_cast<size_t>(t.seq)], q + s.row0 * H * hk, s.pos0, t.t0, t.nt,
                t.h0, t.nh, w, o + s.row0 * H * hv);
  });
  if (!splits.empty()) RunSplitPhases(ctx, il, splits, caches, o);
  core_timer.reset();
  PhaseTimer timer(ctx.prof, Phase::kAttnOut, BytesOf(l.attn_output));
  const qmatmul::Product p{matmul::FromTensor(l.attn_output), out, c.n_embd};
  engine::Project(ctx, o, H * hv, n_tok, {&p, 1});
}

}  // namespace moesplit::engine
