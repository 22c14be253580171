// MoE routing: router logits -> the top-k experts of every token and their weights, for the
// gating schemes of DeepSeek-V3 (sigmoid + selection bias + group-limited top-k, weights
// renormalised and scaled), DeepSeek-V2 (softmax), Qwen3-MoE and Mixtral (softmax, top-k,
// renormalise). Mirrors llama.cpp's build_moe_ffn:
//   scores   = softmax(logits) or sigmoid(logits)                      [E]
//   select   = scores + bias (bias only steers the choice)              [E]
//   groups   (n_group > 1): group g = experts [g*E/G, (g+1)*E/G); its score = sum of its two
//            best `select` values; only the n_group_used best groups stay eligible
//   ids      = top-k of `select` among eligible experts (descending)    [k]
//   weights  = scores[ids] (unbiased); / sum(weights) if norm; * scale  [k]
#pragma once

#include <cstdint>

namespace moesplit::moe {

enum class Gating { kSoftmax, kSigmoid };

struct RouterConfig {
  int n_expert = 0;       // E
  int n_expert_used = 0;  // k
  int n_group = 0;        // G; 0 or 1 = no group limit
  int n_group_used = 0;
  Gating gating = Gating::kSoftmax;
  bool norm_weights = false;   // renormalise the k weights to sum 1
  float weights_scale = 0.0f;  // 0 or 1 = no scaling
};

// logits: [n_tok x E] row-major; bias: [E] or nullptr; ids: [n_tok x k]; weights: [n_tok x k].
void Route(const RouterConfig& config, const float* logits, const float* bias, int64_t n_tok,
           int32_t* ids, float* weights);

}  // namespace moesplit::moe
