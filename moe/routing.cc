#include "moe/routing.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <vector>

#include "core/base/status.h"
#include "cpu_kernels/ops/ops.h"

namespace moesplit::moe {

namespace {

// Indices of the k largest values of v[0..n) in descending order (ties: lower index first).
void TopK(const float* v, int n, int k, int32_t* out) {
  std::vector<int32_t> idx(static_cast<size_t>(n));
  std::iota(idx.begin(), idx.end(), 0);
  std::partial_sort(idx.begin(), idx.begin() + k, idx.end(),
                    [&](int32_t a, int32_t b) { return v[a] > v[b] || (v[a] == v[b] && a < b); });
  std::copy(idx.begin(), idx.begin() + k, out);
}

// Sets select[e] = -inf for experts outside the n_group_used best groups.
void MaskGroups(const RouterConfig& c, float* select) {
  const int per_group = c.n_expert / c.n_group;
  std::vector<float> group_score(static_cast<size_t>(c.n_group));  // [G]
  for (int g = 0; g < c.n_group; ++g) {
    const float* s = select + g * per_group;
    int32_t best[2] = {0, 0};
    const int n_best = std::min(2, per_group);
    TopK(s, per_group, n_best, best);
    float sum = 0.0f;
    for (int i = 0; i < n_best; ++i) sum += s[best[i]];
    group_score[static_cast<size_t>(g)] = sum;
  }
  std::vector<int32_t> keep(static_cast<size_t>(c.n_group_used));
  TopK(group_score.data(), c.n_group, c.n_group_used, keep.data());
  std::vector<bool> kept(static_cast<size_t>(c.n_group), false);
  for (int32_t g : keep) kept[static_cast<size_t>(g)] = true;
  for (int g = 0; g < c.n_group; ++g) {
    if (kept[static_cast<size_t>(g)]) continue;
    std::fill(select + g * per_group, select + (g + 1) * per_group,
              -std::numeric_limits<float>::infinity());
  }
}

}  // namespace

void Route(const RouterConfig& c, const float* logits, const float* bias, int64_t n_tok,
           int32_t* ids, float* weights) {
  MOESPLIT_CHECK(c.n_expert > 0 && c.n_expert_used > 0 && c.n_expert_used <= c.n_expert);
  const int E = c.n_expert, k = c.n_expert_used;
  std::vector<float> scores(static_cast<size_t>(E));  // [E] unbiased
  std::vector<float> select(static_cast<size_t>(E));  // [E] biased, masked
  for (int64_t t = 0; t < n_tok; ++t) {
    std::copy(logits + t * E, logits + (t + 1) * E, scores.begin());
    if (c.gating == Gating::kSoftmax) {
      ops::Softmax(scores.data(), E);
    } else {
      for (float& s : scores) s = ops::Sigmoid(s);
    }
    for (int e = 0; e < E; ++e) select[e] = scores[e] + (bias ? bias[e] : 0.0f);
    if (c.n_group > 1) MaskGroups(c, select.data());
    int32_t* tid = ids + t * k;
    float* tw = weights + t * k;
    TopK(select.data(), E, k, tid);
    float sum = 0.0f;
    for (int i = 0; i < k; ++i) sum += tw[i] = scores[tid[i]];
    // llama.cpp clamps the sum at the smallest normal f16 (6.1e-5) to avoid dividing by ~0.
    const float inv = c.norm_weights ? 1.0f / std::max(sum, 6.103515625e-5f) : 1.0f;
    const float scale = (c.weights_scale != 0.0f) ? c.weights_scale : 1.0f;
    for (int i = 0; i < k; ++i) tw[i] *= inv * scale;
  }
}

}  // namespace moesplit::moe
