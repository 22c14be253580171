// ModelShape: what the planner needs to know about a model, as plain numbers — hyper-parameters,
// bytes and element counts per tensor class, KV cache bytes per token. Built from a GGUF file or
// from a make-model preset by apps/model_shape_source.h; numa/ never sees the file or the model
// object, so the planner can be tested on any shape (and a 400 GB model can be planned before it
// is downloaded).
//
// Tensor classes (core/model/tensor_role.h): routed experts (ffn_*_exps), shared experts
// (ffn_*_shexp), dense FFN (ffn_gate/up/down of dense layers), attention (attn_*), router
// (ffn_gate_inp, exp_probs_b), norms (*_norm), embeddings (token_embd), output (lm_head), other.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace moesplit::numa {

// Bytes (as stored, quantized) or elements of each tensor class, summed over the whole model.
struct TensorClassSizes {
  uint64_t routed_experts = 0;  // every expert of every MoE layer, gate + up + down
  uint64_t shared_experts = 0;
  uint64_t dense_ffn = 0;
  uint64_t attention = 0;
  uint64_t router = 0;
  uint64_t norms = 0;
  uint64_t embeddings = 0;
  uint64_t output = 0;
  uint64_t other = 0;  // rope frequencies, unclassified tensors

  uint64_t Total() const {
    return routed_experts + shared_experts + dense_ffn + attention + router + norms + embeddings +
           output + other;
  }
};

struct ModelShape {
  std::string name;   // preset name ("ds-v3") or GGUF path
  std::string arch;   // "deepseek2" | "qwen3moe" | "llama"
  std::string quant;  // "Q4_K_M" for a preset; the file-type description for a file

  int64_t n_layers = 0;        // blocks
  int64_t n_moe_layers = 0;    // blocks with routed experts
  int64_t n_dense_layers = 0;  // blocks with a dense FFN (n_layers - n_moe_layers)
  int64_t n_embd = 0;          // hidden size D (elements)
  int64_t n_vocab = 0;
  int64_t n_head = 0;
  int64_t n_expert = 0;         // routed experts per MoE layer (E)
  int64_t n_expert_used = 0;    // top-k (k)
  int64_t n_expert_shared = 0;  // shared experts per MoE layer
  int64_t n_ff_exp = 0;         // routed expert FFN width (elements)
  int64_t n_ff = 0;             // dense FFN width (elements)

  TensorClassSizes bytes;   // bytes per class, as stored in the file
  TensorClassSizes params;  // elements per class (one multiply-add per element per token)

  // One expert (gate + up + down) of an average MoE layer: bytes.routed_experts /
  // (n_moe_layers * n_expert). Decode reads k of these per MoE layer per token.
  uint64_t routed_bytes_per_expert_layer = 0;
  uint64_t routed_params_per_expert_layer = 0;  // the same in elements
  // [n_moe_layers] routed-expert bytes of each MoE layer in block order (Q4_K_M gives some
  // layers' ffn_down_exps Q6_K, so they differ); empty = equal shares of bytes.routed_experts.
  std::vector<uint64_t> routed_bytes_by_moe_layer;

  // KV cache bytes per token (all layers) as moesplit's cache stores it (core/engine/kv_cache.h):
  // deepseek2 MLA: kv_lora + qk_rope values per layer (the latent rows); GQA: n_head_kv *
  // (head_dim_k + head_dim_v) values per layer. f16 = 2 bytes, f32 = 4 bytes.
  uint64_t kv_bytes_per_token_f16 = 0;
  uint64_t kv_bytes_per_token_f32 = 0;
  // The same for the hybrid pass's cache on the GPU (core/engine/hybrid_forward.h): MLA's
  // latent rows, (kv_lora + qk_rope) f16 values per layer (V3: 576 x 2 B x 61 layers), as the
  // CPU's f16 cache; for GQA (which the hybrid pass does not run) the f16 CPU layout too.
  uint64_t kv_gpu_bytes_per_token = 0;
  // Attention multiply-adds per token per cached position, all layers: MLA (absorbed) n_head *
  // ((kv_lora + qk_rope) + kv_lora); GQA n_head * (head_dim_k + head_dim_v).
  uint64_t attn_macs_per_position = 0;

  // Elements per weight type ("q4_K", "q6_K", "q8_0", ...: ggml's names), for the prefill rate
  // of each type's kernel: the routed experts, and the other matrix products of a token
  // (shared experts, dense FFN, attention, router; the head is one row per prompt).
  std::map<std::string, uint64_t> routed_params_by_type;
  std::map<std::string, uint64_t> dense_params_by_type;
  // Routed-expert bytes per weight type, as stored in the file (their sum is
  // bytes.routed_experts): decode's share of each type's kernel (expert_decode_gbps_per_core).
  std::map<std::string, uint64_t> routed_bytes_by_type;
};

}  // namespace moesplit::numa
