#include "moe/grouped_experts.h"

#include <algorithm>
#include <numeric>

#include "core/base/int_math.h"
#include "core/base/status.h"

namespace moesplit::moe {

GroupedExperts::GroupedExperts(const ExpertStore* store, std::vector<moesplit::Executor*> pools,
                               RunGroupsFn run_groups, const gemv::GemvKernels* kernels)
    : store_(store), run_groups_(std::move(run_groups)) {
  MOESPLIT_CHECK(static_cast<int>(pools.size()) == store->num_groups(), pools.size(),
                 " pools for ", store->num_groups(), " expert groups");
  MOESPLIT_CHECK(pools.size() == 1 || run_groups_, "several groups need a fan-out");
  for (moesplit::Executor* p : pools) engines_.push_back(std::make_unique<ExpertEngine>(p, kernels));
  partial_.resize(pools.size());
  use_.resize(pools.size());
}

void GroupedExperts::AssignExperts(const ExpertEngine::Layer& layer, int64_t n_tok,
                                   const int32_t* ids, int k) {
  const int G = num_groups();
  const int64_t E = layer.gate_exps.ne[2];
  std::vector<int64_t> count(static_cast<size_t>(E), 0);  // [E] tokens per expert
  for (int64_t i = 0; i < n_tok * k; ++i) ++count[static_cast<size_t>(ids[i])];
  std::vector<int32_t> order(static_cast<size_t>(E));
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](int32_t a, int32_t b) { return count[a] > count[b]; });
  std::vector<int64_t> load(static_cast<size_t>(G), 0);
  for (auto& u : use_) u.assign(static_cast<size_t>(E), 0);
  for (int32_t e : order) {
    if (count[e] == 0) break;
    const int g = static_cast<int>(std::min_element(load.begin(), load.end()) - load.begin());
    use_[g][e] = 1;
    // Work ~ weight bytes (read once) + tokens (compute): one expert's bytes = 1 unit, and a
    // token adds ~1/64 unit (prefill amortises the weights over ~64 tokens at VNNI rates).
    load[g] += 64 + count[e];
  }
  shared_group_ = static_cast<int>(std::min_element(load.begin(), load.end()) - load.begin());
}

void GroupedExperts::Forward(int64_t il, const float* hidden, int64_t n_tok, const int32_t* ids,
                             const float* weights, int k, float* out) {
  if (n_tok <= 0) return;
  const int G = num_groups();
  if (G == 1) {
    engines_[0]->Forward(store_->layer(0, il), hidden, n_tok, ids, weights, k, out);
    return;
  }
  const bool replicate = store_->mode() == numa::NumaMode::kReplicate;
  const int64_t D = store_->layer(0, il).gate_exps.ne[0];
  if (replicate) AssignExperts(store_->layer(0, il), n_tok, ids, k);
  for (int g = 1; g < G; ++g) partial_[g].resize(static_cast<size_t>(n_tok * D));
  run_groups_([&](int g) {
    float* dst = g == 0 ? out : partial_[g].data();
    const ExpertEngine::Layer& layer = store_->layer(g, il);
    if (layer.gate_exps.data == nullptr) {  // shard: this group's slice of the layer is empty
      std::fill(dst, dst + n_tok * D, 0.0f);
      return;
    }
    if (replicate) {
      engines_[g]->ForwardSubset(layer, hidden, n_tok, ids, weights, k, use_[g].data(),
                                 g == shared_group_, dst);
    } else {
      engines_[g]->Forward(layer, hidden, n_tok, ids, weights, k, dst);
    }
  });
  // out += sum of the partials, each group summing its block of columns of every row.
  run_groups_([&](int g) {
    const int64_t d0 = CeilDiv(D, G) * g, d1 = std::min(D, CeilDiv(D, G) * (g + 1));
    for (int64_t t = 0; t < n_tok; ++t) {
      float* o = out + t * D;
      for (int h = 1; h < G; ++h) {
        const float* p = partial_[h].data() + t * D;
        for (int64_t d = d0; d < d1; ++d) o[d] += p[d];
      }
    }
  });
}

}  // namespace moesplit::moe
