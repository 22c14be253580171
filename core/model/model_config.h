// ModelConfig: the hyper-parameters of a model, read from GGUF metadata with the key names and
// defaults of llama.cpp (src/llama-arch.cpp names, llama_model::load_hparams defaults) for the
// architectures we run: deepseek2 (DeepSeek-V2/V3/R1), qwen3moe, and llama with experts (Mixtral).
// Derived values the forward pass needs (rope magnitudes, the attention scale) are computed here
// once, with the arithmetic in comments, so that the engine never re-derives them.
#pragma once

#include <cstdint>
#include <string>

#include "core/base/status.h"
#include "core/gguf/gguf_file.h"

namespace moesplit {

enum class ModelArch { kDeepseek2, kQwen3Moe, kLlama };
const char* ModelArchName(ModelArch arch);  // "deepseek2", "qwen3moe", "llama"

// deepseek2.expert_gating_func: how router logits become scores.
enum class GatingFunc { kSoftmax = 1, kSigmoid = 2 };

enum class RopeScalingType { kNone, kLinear, kYarn };

struct ModelConfig {
  ModelArch arch = ModelArch::kDeepseek2;
  int64_t n_vocab = 0;      // rows of token_embd / output
  int64_t n_embd = 0;       // hidden size D
  int64_t n_layer = 0;      // blocks
  int64_t n_ctx_train = 0;  // {arch}.context_length
  float rms_eps = 1e-6f;    // attention.layer_norm_rms_epsilon

  // Attention. For deepseek2 with the split MLA layout head_count_kv = 1 and key_length =
  // kv_lora + qk_rope (MLA seen as MQA); the per-head widths below are always the real ones.
  int64_t n_head = 0;
  int64_t n_head_kv = 0;   // GQA kv heads (qwen3moe / llama); deepseek2: as in the file
  int64_t head_dim_k = 0;  // per-head q/k width: qk_nope + qk_rope for deepseek2
  int64_t head_dim_v = 0;  // per-head v width (v_head for deepseek2)

  // deepseek2 MLA (0 elsewhere).
  int64_t q_lora_rank = 0;  // 0 = no q compression: attn_q directly (V2-Lite)
  int64_t kv_lora_rank = 0;
  int64_t qk_nope = 0;     // head_dim_k - n_rot
  int64_t qk_rope = 0;     // = n_rot
  bool mla_split = false;  // attn_k_b/attn_v_b (true) or legacy attn_kv_b (false)

  // FFN / MoE.
  int64_t n_ff = 0;             // dense FFN width (feed_forward_length)
  int64_t n_ff_exp = 0;         // routed expert FFN width
  int64_t n_ff_shexp = 0;       // shared expert FFN width (n_ff_exp * n_expert_shared)
  int64_t n_expert = 0;         // routed experts per MoE layer
  int64_t n_expert_used = 0;    // top-k
  int64_t n_expert_shared = 0;  // deepseek2 shared experts
  int64_t n_expert_groups = 0;  // 0/1 = no group limit
  int64_t n_group_used = 0;
  int64_t n_dense_lead = 0;  // leading dense blocks (deepseek2)
  GatingFunc gating = GatingFunc::kSoftmax;
  bool expert_weights_norm = false;   // renormalise the top-k weights to sum 1
  float expert_weights_scale = 0.0f;  // 0 = none (x1)

  // RoPE (as read).
  int64_t n_rot = 0;  // rope.dimension_count (default head_dim_k)
  float rope_freq_base = 10000.0f;
  RopeScalingType rope_scaling = RopeScalingType::kLinear;
  float rope_scaling_factor = 1.0f;  // rope.scaling.factor s (1 = none)
  int64_t yarn_orig_ctx = 0;         // rope.scaling.original_context_length (else n_ctx_train)
  float yarn_log_mul = 0.0f;  // rope.scaling.yarn_log_multiplier as stored (0.1*mscale_all_dim)
  float yarn_beta_fast = 32.0f;
  float yarn_beta_slow = 1.0f;
  float rope_attn_factor = 1.0f;  // rope.scaling.attn_factor

  // Derived (see ModelConfig::FromGguf): what ggml_rope_ext gets and the softmax scale.
  float rope_freq_scale = 1.0f;       // 1/s with scaling, else 1
  float rope_ext_factor = 0.0f;       // 1 with YaRN
  float rope_attn_factor_eff = 1.0f;  // the attn_factor argument of ggml_rope_ext
  float kq_scale = 1.0f;              // multiplies q.k before the softmax

  bool IsMoeLayer(int64_t il) const { return n_expert > 0 && il >= n_dense_lead; }

  // Reads and validates the metadata of `file`. Unsupported architecture -> Unimplemented;
  // missing/invalid keys -> InvalidArgument naming the key and the file.
  static StatusOr<ModelConfig> FromGguf(const gguf::GgufFile& file);

  // Multi-line human summary (for `eval` / logs).
  std::string Summary() const;
};

}  // namespace moesplit
