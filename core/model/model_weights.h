// ModelWeights: every tensor the forward pass reads, resolved by llama.cpp name once at load time
// into zero-copy views of the memory-mapped GGUF. A view with data == nullptr is "absent" (an
// optional tensor, or one that the layer kind does not have). Shapes are in ggml order
// (ne[0] = row length): a linear layer `W` mapping K inputs to M outputs is [K, M].
#pragma once

#include <vector>

#include "core/base/status.h"
#include "core/base/tensor_view.h"
#include "core/gguf/gguf_file.h"
#include "core/model/model_config.h"

namespace moesplit {

inline bool Present(const TensorView& t) { return t.data != nullptr; }

struct LayerWeights {
  TensorView attn_norm;  // [D] F32
  TensorView ffn_norm;   // [D] F32

  // deepseek2 MLA (H heads, nope/rope/v per-head widths, L = kv_lora, Q = q_lora).
  TensorView attn_q_a;        // [D, Q]             (absent without q_lora)
  TensorView attn_q_a_norm;   // [Q] F32
  TensorView attn_q_b;        // [Q, H*(nope+rope)]
  TensorView attn_q;          // [D, H*head_dim_k]  (deepseek2 without q_lora; GQA archs)
  TensorView attn_kv_a_mqa;   // [D, L + rope]
  TensorView attn_kv_a_norm;  // [L] F32
  TensorView attn_k_b;        // [nope, L, H]  split layout
  TensorView attn_v_b;        // [L, v, H]     split layout
  TensorView attn_kv_b;       // [L, H*(nope+v)] legacy layout
  TensorView attn_output;     // [H*v, D]

  // GQA attention (qwen3moe, llama): Hk kv heads of width hd.
  TensorView attn_k;       // [D, Hk*hd]
  TensorView attn_v;       // [D, Hk*hd]
  TensorView attn_q_norm;  // [hd] F32 (qwen3moe)
  TensorView attn_k_norm;  // [hd] F32 (qwen3moe)

  // Dense FFN (deepseek2 leading layers), F = n_ff.
  TensorView ffn_gate;  // [D, F]
  TensorView ffn_up;    // [D, F]
  TensorView ffn_down;  // [F, D]

  // MoE: E experts of width Fe; shared expert width Fs.
  TensorView ffn_gate_inp;    // [D, E] router
  TensorView exp_probs_b;     // [E] F32 selection bias (optional)
  TensorView ffn_gate_exps;   // [D, Fe, E]
  TensorView ffn_up_exps;     // [D, Fe, E]
  TensorView ffn_down_exps;   // [Fe, D, E]
  TensorView ffn_gate_shexp;  // [D, Fs] (deepseek2)
  TensorView ffn_up_shexp;    // [D, Fs]
  TensorView ffn_down_shexp;  // [Fs, D]
};

struct ModelWeights {
  TensorView token_embd;             // [D, n_vocab]
  TensorView output_norm;            // [D] F32
  TensorView output;                 // [D, n_vocab] (token_embd when the file has no output.weight)
  std::vector<LayerWeights> layers;  // [n_layer]

  // Resolves every tensor `config` needs. All problems are reported at once: one error listing
  // every missing tensor, wrong shape and unsupported type.
  static StatusOr<ModelWeights> Resolve(const gguf::GgufFile& file, const ModelConfig& config);
};

}  // namespace moesplit
