// The arithmetic of the GPU MLA attention (mla_attention.cu) that the host can check: the online
// softmax (running max and sum, rescale), the merge of partial results of position splits
// (flash-decoding), the split plan, and the bf16 pair decode. Plain C++ with MOESPLIT_HD, and
// C++17 (nvcc compiles it too).
//
// Online softmax over the scaled scores s_0..s_{n-1} of one (token, head) and values v_s:
//   state (m, l) and acc[]: m = max of the scores seen (-inf: none yet), l = sum exp(s - m),
//   acc = sum exp(s - m) v_s. A tile of scores with max t: m' = max(m, t), alpha = exp(m - m'),
//   l' = alpha l + sum exp(s - m'), acc' = alpha acc + sum exp(s - m') v_s. The result is acc / l.
// Partials of disjoint position ranges (m_i, l_i, acc_i) merge as M = max m_i,
//   w_i = exp(m_i - M) / sum_j exp(m_j - M) l_j,  out = sum_i w_i acc_i.
// An empty partial (no positions: m = -inf, l = 0, acc = 0) gets weight 0.
#pragma once

#include <math.h>
#include <string.h>

#include <cstdint>

#include "gpu_kernels/hd.h"

namespace moesplit::gpu {

// Latent cache row: kv_lora_rank (512) normalised latent c, then qk_rope (64) roped k_pe.
inline constexpr int kMlaLatentDim = 512;
inline constexpr int kMlaRopeDim = 64;
inline constexpr int kMlaRowDim = kMlaLatentDim + kMlaRopeDim;  // 576 values per position

// Kernel tiling (mla_attention.cu explains the numbers): heads per block, positions per tile.
inline constexpr int kMlaHeadsPerBlock = 16;
inline constexpr int kMlaTile = 32;
// Flash-decoding: at most this many position splits; a split covers >= kMlaMinChunk positions;
// split only while (tokens x head groups) blocks are fewer than kMlaTargetBlocks (~2 per SM on
// an H100's 132 SMs).
inline constexpr int64_t kMlaMaxSplits = 64;
inline constexpr int64_t kMlaMinChunk = 256;
inline constexpr int64_t kMlaTargetBlocks = 256;

struct MlaSoftmaxState {
  float m;  // running max of the scaled scores; -inf before the first position
  float l;  // running sum of exp(s - m)
};

MOESPLIT_HD MlaSoftmaxState MlaEmptyState() { return {-INFINITY, 0.0f}; }

// exp(s - m) for s <= m; 0 when s is -inf (a masked position or an empty partial's max), which
// also covers m = -inf (exp(-inf - -inf) would be NaN).
MOESPLIT_HD float MlaExpShift(float s, float m) { return s == -INFINITY ? 0.0f : expf(s - m); }

// Folds in a tile whose largest scaled score is tile_max (-inf: every position masked): raises
// st->m, scales st->l, and returns alpha, the factor the accumulator must be multiplied by. The
// caller then adds the tile's sum of MlaExpShift(s, st->m) to st->l.
MOESPLIT_HD float MlaOnlineRescale(MlaSoftmaxState* st, float tile_max) {
  const float m_new = fmaxf(st->m, tile_max);
  const float alpha = MlaExpShift(st->m, m_new);
  st->m = m_new;
  st->l *= alpha;
  return alpha;
}

// 1 / l, or 0 for l = 0 (nothing attended: the output stays 0 instead of NaN).
MOESPLIT_HD float MlaSafeInverse(float l) { return l > 0.0f ? 1.0f / l : 0.0f; }

// Merge weights of n partials of one (token, head): ml[2 i] = m_i, ml[2 i + 1] = l_i (the
// workspace layout, [n x 2]); w[i] = exp(m_i - M) / L with M = max m_i, L = sum exp(m_i - M) l_i.
// out = sum_i w[i] acc_i then. All weights are 0 when every partial is empty.
MOESPLIT_HD void MlaMergeWeights(const float* ml, int n, float* w) {
  float m_max = -INFINITY;
  for (int i = 0; i < n; ++i) m_max = fmaxf(m_max, ml[2 * i]);
  float l_sum = 0.0f;
  for (int i = 0; i < n; ++i) {
    w[i] = MlaExpShift(ml[2 * i], m_max);
    l_sum += w[i] * ml[2 * i + 1];
  }
  const float inv = MlaSafeInverse(l_sum);
  for (int i = 0; i < n; ++i) w[i] *= inv;
}

// Two bf16 values packed in a 32-bit word (low half first in memory) as floats: a bf16 is the
// top half of an f32, so the decode is exact.
struct MlaFloatPair {
  float x, y;
};
MOESPLIT_HD MlaFloatPair MlaBf16PairToFloats(uint32_t w) {
  const uint32_t lo = w << 16, hi = w & 0xffff0000u;
  MlaFloatPair r;
  memcpy(&r.x, &lo, 4);
  memcpy(&r.y, &hi, 4);
  return r;
}

// How the positions of one call are split over blocks. Query token t (position pos0 + t) sees
// positions [0, pos0 + t + 1); split i covers [i chunk, min((i + 1) chunk, pos0 + t + 1)), which
// may be empty for early tokens of a batch. chunk is a multiple of kMlaTile, and the longest row
// (pos0 + n_tok positions) ends in the last split, which is never empty for it.
struct MlaSplitPlan {
  int64_t n_split;
  int64_t chunk;  // positions per split
};

// forced_splits > 0 asks for that many splits (tests), else the plan picks them; either way
// capped at kMlaMaxSplits and at one per tile. Arguments must be valid (n_tok, n_head >= 1,
// pos0 >= 0).
MOESPLIT_HD MlaSplitPlan MlaPlanSplits(int64_t n_tok, int64_t n_head, int64_t pos0,
                                       int64_t forced_splits) {
  const int64_t n_max = pos0 + n_tok;  // positions of the longest causal row
  const int64_t groups = (n_head + kMlaHeadsPerBlock - 1) / kMlaHeadsPerBlock;
  int64_t want = forced_splits;
  if (want <= 0) {
    const int64_t base = n_tok * groups;  // blocks without splitting
    const int64_t by_blocks = (kMlaTargetBlocks + base - 1) / base;
    const int64_t by_chunk = (n_max + kMlaMinChunk - 1) / kMlaMinChunk;
    want = by_blocks < by_chunk ? by_blocks : by_chunk;
  }
  if (want > kMlaMaxSplits) want = kMlaMaxSplits;
  if (want < 1) want = 1;
  const int64_t per = (n_max + want - 1) / want;
  MlaSplitPlan p;
  p.chunk = (per + kMlaTile - 1) / kMlaTile * kMlaTile;
  p.n_split = (n_max + p.chunk - 1) / p.chunk;  // no trailing split that every row misses
  return p;
}

}  // namespace moesplit::gpu
