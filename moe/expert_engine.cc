#include "moe/expert_engine.h"

#include <algorithm>

#include "core/base/status.h"

namespace moesplit::moe {

void ExpertEngine::Forward(const Layer& layer, const float* hidden, int64_t n_tok,
                           const int32_t* ids, const float* weights, int k, float* out) {
  ForwardSubset(layer, hidden, n_tok, ids, weights, k, nullptr, true, out);
}

void ExpertEngine::ForwardSubset(const Layer& layer, const float* hidden, int64_t n_tok,
                                 const int32_t* ids, const float* weights, int k,
                                 const uint8_t* use_expert, bool shared, float* out) {
  if (n_tok <= 0) return;
  const int64_t E = layer.gate_exps.ne[2], slots = n_tok * k;
  // Dispatch: group the T*k (token, slot) pairs by expert with a counting sort, stable in token
  // order, so that expert e's tokens are tokens_[start_[e] .. start_[e+1]).
  start_.assign(static_cast<size_t>(E) + 1, 0);
  for (int64_t i = 0; i < slots; ++i) {
    MOESPLIT_CHECK(ids[i] >= 0 && ids[i] < E, "expert id ", ids[i], " of ", E);
    ++start_[static_cast<size_t>(ids[i]) + 1];
  }
  for (int64_t e = 0; e < E; ++e) start_[e + 1] += start_[e];
  fill_.assign(start_.begin(), start_.end() - 1);
  tokens_.resize(static_cast<size_t>(slots));
  slot_w_.resize(static_cast<size_t>(slots));
  for (int64_t i = 0; i < slots; ++i) {
    const int64_t s = fill_[static_cast<size_t>(ids[i])]++;
    tokens_[static_cast<size_t>(s)] = static_cast<int32_t>(i / k);
    slot_w_[static_cast<size_t>(s)] = weights[i];
  }
  jobs_.clear();
  for (int64_t e = 0; e < E; ++e) {
    const int64_t n = start_[e + 1] - start_[e];
    if (n == 0) continue;  // an expert nobody chose costs nothing
    if (use_expert != nullptr && use_expert[e] == 0) continue;  // another group's expert
    jobs_.push_back({matmul::FromTensor(layer.gate_exps, e), matmul::FromTensor(layer.up_exps, e),
                     matmul::FromTensor(layer.down_exps, e), &tokens_[start_[e]],
                     &slot_w_[start_[e]], n});
  }
  if (shared && layer.gate_shexp.data != nullptr) {
    jobs_.push_back({matmul::FromTensor(layer.gate_shexp), matmul::FromTensor(layer.up_shexp),
                     matmul::FromTensor(layer.down_shexp), nullptr, nullptr, n_tok});
  }
  if (jobs_.empty()) {
    std::fill(out, out + n_tok * layer.gate_exps.ne[0], 0.0f);  // nothing of this layer here
    return;
  }
  ffn_.Run(jobs_, hidden, n_tok, out);
}

void ExpertEngine::ForwardDense(const Dense& ffn, const float* hidden, int64_t n_tok, float* out) {
  if (n_tok <= 0) return;
  const FfnJob job{matmul::FromTensor(ffn.gate),
                   matmul::FromTensor(ffn.up),
                   matmul::FromTensor(ffn.down),
                   nullptr,
                   nullptr,
                   n_tok};
  ffn_.Run({&job, 1}, hidden, n_tok, out);
}

}  // namespace moesplit::moe
