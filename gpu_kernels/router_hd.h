// MoE routing of one token, the arithmetic shared by the GPU router (gpu_kernels/router.cu) and
// the host tests. Same steps, precision and tie-breaking as moe::Route (moe/routing.cc):
//   scores  = softmax(logits) (double sum) or sigmoid(logits)               [E]
//   select  = scores + bias                                                [E]
//   groups  (n_group > 1): group g = experts [g*E/G, (g+1)*E/G), its score = sum of its two best
//           select values; experts outside the n_group_used best groups get select = -inf
//   ids     = the k best select values, descending                         [k]
//   weights = scores[ids]; / max(sum, 2^-14) if norm_weights; * weights_scale (if != 0)  [k]
// Ranking is a total order on (value, index): a ranks before b iff v[a] > v[b], or v[a] == v[b]
// and a < b (std::partial_sort with moe::Route's comparator gives the same order). Top-k needs no
// "taken" flags: pick j is the best entry ranking strictly after pick j - 1. NaN scores make the
// order unspecified, as in moe::Route, but ids stay in [0, E).
#pragma once

#include <cmath>
#include <cstdint>

#include "gpu_kernels/hd.h"

namespace moesplit::gpu {

inline constexpr int kRouterMaxExperts = 512;  // E limit of gpu::Route (shared memory per token)
inline constexpr int kRouterMaxUsed = 16;      // k limit

enum class RouterGating : int32_t { kSoftmax, kSigmoid };

// Mirrors moe::RouterConfig field by field (gpu_kernels does not link moesplit_moe).
struct RouterConfig {
  int n_expert = 0;       // E
  int n_expert_used = 0;  // k
  int n_group = 0;        // G; 0 or 1 = no group limit
  int n_group_used = 0;
  RouterGating gating = RouterGating::kSoftmax;
  bool norm_weights = false;   // renormalise the k weights to sum 1
  float weights_scale = 0.0f;  // 0 or 1 = no scaling
};

// True if (va, ia) ranks before (vb, ib).
MOESPLIT_HD bool RouterBetter(float va, int ia, float vb, int ib) {
  return va > vb || (va == vb && ia < ib);
}

// Among v[first], v[first + step], ... (indices < end): the best entry that ranks strictly after
// (prev_v, prev_i), or any entry when prev_i < 0. Returns its index (-1: none) and *best_v.
MOESPLIT_HD int RouterBestAfter(const float* v, int first, int end, int step, float prev_v,
                                int prev_i, float* best_v) {
  int best = -1;
  float bv = 0.0f;
  for (int e = first; e < end; e += step) {
    if (prev_i >= 0 && !RouterBetter(prev_v, prev_i, v[e], e)) continue;
    if (best < 0 || RouterBetter(v[e], e, bv, best)) {
      best = e;
      bv = v[e];
    }
  }
  *best_v = bv;
  return best;
}

// The pick after (prev_v, prev_i) over v[0..n); none left (only with NaN in v): prev again
// (or 0 for the first pick), so that ids stay in range.
MOESPLIT_HD int RouterNext(const float* v, int n, float prev_v, int prev_i) {
  float bv = 0.0f;
  const int b = RouterBestAfter(v, 0, n, 1, prev_v, prev_i, &bv);
  if (b >= 0) return b;
  return prev_i < 0 ? 0 : prev_i;
}

// out[0..k) = indices of the k best of v[0..n), best first.
MOESPLIT_HD void RouterTopK(const float* v, int n, int k, int32_t* out) {
  int prev = -1;
  for (int j = 0; j < k; ++j) {
    prev = RouterNext(v, n, prev < 0 ? 0.0f : v[prev], prev);
    out[j] = prev;
  }
}

// sigmoid(x) = 1 / (1 + exp(-x))   (ops::Sigmoid)
MOESPLIT_HD float RouterSigmoid(float x) { return 1.0f / (1.0f + expf(-x)); }

// ops::Softmax over x[0..n) in place: max, exp(x - max), sum in double, x * float(1 / sum).
MOESPLIT_HD void RouterSoftmax(float* x, int n) {
  float max = -INFINITY;
  for (int i = 0; i < n; ++i) max = (max < x[i]) ? x[i] : max;  // std::max(max, x[i])
  double sum = 0.0;
  for (int i = 0; i < n; ++i) {
    x[i] = expf(x[i] - max);
    sum += x[i];
  }
  const float inv = static_cast<float>(1.0 / sum);
  for (int i = 0; i < n; ++i) x[i] *= inv;
}

// A group's score: the sum of its (up to) two best select values s[0..per_group), best first.
MOESPLIT_HD float RouterGroupScore(const float* s, int per_group) {
  int32_t best[2] = {0, 0};
  const int n_best = per_group < 2 ? per_group : 2;
  RouterTopK(s, per_group, n_best, best);
  float sum = 0.0f;
  for (int i = 0; i < n_best; ++i) sum += s[best[i]];
  return sum;
}

// The worst of the n_used best groups: group g is kept iff it ranks at or before it.
MOESPLIT_HD int RouterLastKeptGroup(const float* group_score, int n_group, int n_used) {
  int prev = -1;
  for (int j = 0; j < n_used; ++j) {
    prev = RouterNext(group_score, n_group, prev < 0 ? 0.0f : group_score[prev], prev);
  }
  return prev;
}
MOESPLIT_HD bool RouterGroupKept(const float* group_score, int g, int last) {
  return g == last || RouterBetter(group_score[g], g, group_score[last], last);
}

// weights[i] = scores[ids[i]] * (inv * scale), inv = 1 / max(sum, 2^-14) (the smallest normal
// f16, as llama.cpp clamps) if norm_weights else 1; the sum runs in float, in pick order.
MOESPLIT_HD void RouterWeights(const RouterConfig& c, const float* scores, const int32_t* ids,
                               float* weights) {
  const int k = c.n_expert_used;
  float sum = 0.0f;
  for (int i = 0; i < k; ++i) sum += weights[i] = scores[ids[i]];
  const float floor_sum = 6.103515625e-5f;
  const float inv = c.norm_weights ? 1.0f / ((sum < floor_sum) ? floor_sum : sum) : 1.0f;
  const float scale = (c.weights_scale != 0.0f) ? c.weights_scale : 1.0f;
  for (int i = 0; i < k; ++i) weights[i] *= inv * scale;
}

// The whole routing of one token, sequentially (the host reference of gpu::Route; the kernel
// runs the same steps spread over a warp). Expects a valid config (gpu::ValidateRouterConfig).
//   logits: [E]; bias: [E] or nullptr; scratch scores, select: [E], group_score: [G] (G > 1);
//   ids, weights: [k].
MOESPLIT_HD void RouteToken(const RouterConfig& c, const float* logits, const float* bias,
                            float* scores, float* select, float* group_score, int32_t* ids,
                            float* weights) {
  const int E = c.n_expert;
  for (int e = 0; e < E; ++e) scores[e] = logits[e];
  if (c.gating == RouterGating::kSoftmax) {
    RouterSoftmax(scores, E);
  } else {
    for (int e = 0; e < E; ++e) scores[e] = RouterSigmoid(scores[e]);
  }
  for (int e = 0; e < E; ++e) select[e] = scores[e] + (bias ? bias[e] : 0.0f);
  if (c.n_group > 1) {
    const int per_group = E / c.n_group;
    for (int g = 0; g < c.n_group; ++g) {
      group_score[g] = RouterGroupScore(select + g * per_group, per_group);
    }
    const int last = RouterLastKeptGroup(group_score, c.n_group, c.n_group_used);
    for (int e = 0; e < c.n_group * per_group; ++e) {
      if (!RouterGroupKept(group_score, e / per_group, last)) select[e] = -INFINITY;
    }
  }
  RouterTopK(select, E, c.n_expert_used, ids);
  RouterWeights(c, scores, ids, weights);
}

}  // namespace moesplit::gpu
