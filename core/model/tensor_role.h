// What a tensor is for, from its GGUF name (llama.cpp's naming: "blk.N.ffn_up_exps.weight").
// The role decides where it lives: routed experts (~95% of DeepSeek-V3's bytes) on CPU nodes,
// everything else preferably on the GPU. The planner works on bytes per role, not on names.
#pragma once

#include <array>
#include <cstdint>
#include <string_view>

namespace moesplit {

enum class TensorRole : int {
  kRoutedExperts = 0,  // ffn_{gate,up,down}_exps (3-D: [n_embd|n_ff_exp, ..., n_expert])
  kSharedExperts,      // ffn_{gate,up,down}_shexp
  kDenseFfn,           // ffn_{gate,up,down} of dense (leading) layers / dense models
  kRouter,             // ffn_gate_inp (router matrix), exp_probs_b (selection bias)
  kAttention,          // attn_q*, attn_kv*, attn_k_b, attn_v_b, attn_output, q/k/v, ...
  kEmbeddings,         // token_embd
  kOutput,             // output.weight (lm_head)
  kNorms,              // *_norm (RMSNorm weights), incl. attn_q_a_norm, attn_kv_a_norm
  kOther,              // anything else (rope freqs, biases of unknown role)
};
inline constexpr int kNumTensorRoles = 9;

const char* TensorRoleName(TensorRole role);  // "routed experts", "attention", ...
TensorRole ClassifyTensor(std::string_view name);

// Transformer block index from "blk.N...." or -1 for global tensors.
int LayerOfTensor(std::string_view name);

}  // namespace moesplit
