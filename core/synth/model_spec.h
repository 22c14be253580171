// Synthetic models for `moesplit make-model`: presets are plain data (hyper-parameters), from
// which we derive the tensor table (names, ggml shapes, types) and the GGUF metadata exactly as
// llama.cpp's converters write them for `deepseek2`, `qwen3moe` and llama-style MoE (Mixtral).
//
//   MOESPLIT_ASSIGN_OR_RETURN(ModelSpec spec, BuildModelSpec({.preset = "ds-v3", .layers = 4}));
//   TotalTensorBytes(spec)  // exact data-section payload, e.g. for `make-model --list`
//   WriteModel(spec, {.path = "x.gguf", .seed = 1234})  // see model_writer.h
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/base/dtype.h"
#include "core/base/status.h"
#include "core/gguf/gguf_value.h"

namespace moesplit::synth {

enum class Arch { kDeepseek2, kQwen3Moe, kLlama };

// How deepseek2 MLA attention is laid out in the file.
//  kSplit:  attn_k_b [qk_nope, kv_lora, n_head] + attn_v_b [kv_lora, v_head, n_head],
//           head_count_kv 1, key_length kv_lora+rope, value_length kv_lora, *_mla keys
//           (current convert_hf_to_gguf.py).
//  kLegacy: attn_kv_b [kv_lora, n_head*(qk_nope+v_head)], head_count_kv n_head,
//           key_length qk_nope+rope, value_length v_head, no *_mla keys (older converters).
enum class MlaLayout { kSplit, kLegacy };

// The llama-quantize ftypes we reproduce (llama_ftype values in general.file_type).
enum class QuantMix {
  kQ4_K_M,
  kQ8_0,
  kF16,
  kBF16,
  kIQ4_XS,
  kQ3_K_M,
  kUdQ2_K_XL,
  kUdIQ2_XXS,
  kUdIQ1_S,
  kUdIQ1_M,
  kIQ2_XS,  // llama-quantize's IQ2_XS / IQ2_M / IQ3_XXS / IQ3_M with an (all-ones) imatrix
  kIQ2_M,
  kIQ3_XXS,
  kIQ3_M,
  kQ4_0,      // llama-quantize's Q4_0 with an imatrix (bartowski's Q4_0 files): Q4_1 early downs
  kMXFP4_MOE  // the last (cmd_make_model lists kQ4_K_M..kMXFP4_MOE)
};

StatusOr<QuantMix> QuantMixFromName(std::string_view name);  // "Q4_K_M", "q8_0", "IQ4_XS", ...
const char* QuantMixName(QuantMix mix);
// Q4_K_M 15, Q8_0 7, F16 1, BF16 32, IQ4_XS 30, Q3_K_M 12, UD-Q2_K_XL 10 (Q2_K),
// UD-IQ2_XXS 19, UD-IQ1_S 24, UD-IQ1_M 31, IQ2_XS 20, IQ2_M 29, IQ3_XXS 23, IQ3_M 27, Q4_0 2,
// MXFP4_MOE 38
uint32_t QuantMixFileType(QuantMix mix);

StatusOr<MlaLayout> MlaLayoutFromName(std::string_view name);  // "split" | "legacy"

// Which token list the toy vocabulary gets (see vocab.h).
enum class VocabStyle {
  kDeepseek,  // <｜begin▁of▁sentence｜> 0, <｜end▁of▁sentence｜> 1, bytes, learned merges
  kDsTiny,    // as kDeepseek but the systematic merges of the llama.cpp-made oracle file
  kQwen,      // <|endoftext|> 0, <|im_start|> 1, <|im_end|> 2, bytes, learned merges
  kLlama,     // <s> 0, </s> 1, bytes, learned merges
  kKimi,      // bytes, learned merges, pads, then Kimi-K2's 256 special ids ([BOS] n-256,
              // [EOS] n-255, ...; see vocab.cc); pre "kimi-k2"
};

// Hyper-parameters of a preset. Widths are element counts; 0 means "absent" where noted.
struct ModelHparams {
  Arch arch = Arch::kDeepseek2;
  std::string general_name;   // general.name
  int64_t n_vocab = 0;        // rows of token_embd / output
  int64_t n_embd = 0;         // hidden size
  int64_t n_layer = 0;        // default block count (--layers overrides)
  int64_t n_head = 0;         // attention heads
  int64_t n_head_kv = 0;      // GQA kv heads (qwen3moe / llama only)
  int64_t head_dim = 0;       // per-head width (qwen3moe / llama only)
  int64_t n_ff = 0;           // dense FFN width (feed_forward_length)
  int64_t n_ff_exp = 0;       // routed / shared expert FFN width
  int64_t n_expert = 0;       // routed experts per MoE layer
  int64_t n_expert_used = 0;  // top-k
  int64_t n_expert_shared = 0;
  int64_t n_expert_groups = 0;  // 0 = key absent
  int64_t n_group_used = 0;     // 0 = key absent
  int64_t n_dense_lead = 0;     // deepseek2 leading dense blocks
  int64_t q_lora = 0;           // 0 = no q compression (attn_q directly, V2-Lite)
  int64_t kv_lora = 0;
  int64_t qk_nope = 0;
  int64_t qk_rope = 0;
  int64_t v_head = 0;
  uint32_t gating_func = 0;    // 0 = key absent, 1 softmax, 2 sigmoid
  float weights_scale = 0.0f;  // 0 = key absent
  bool weights_norm = false;   // key written only when true (as the converter does)
  uint32_t n_ctx = 4096;
  float rope_freq_base = 10000.0f;
  float rms_eps = 1e-6f;
  float yarn_factor = 0.0f;  // 0 = no rope scaling keys
  uint32_t yarn_orig_ctx = 0;
  float yarn_log_mul = 0.0f;    // deepseek2: 0.1 * mscale_all_dim
  float yarn_beta_fast = 0.0f;  // 0 = key absent
  float yarn_beta_slow = 0.0f;
  VocabStyle vocab = VocabStyle::kDeepseek;
  bool chat_template = true;  // write tokenizer.chat_template
};

// How a tensor's values are drawn (model_writer.cc).
enum class WeightInit {
  kNormal,  // normal(0, 0.02)
  kOnes,    // RMSNorm weights: exactly 1
  kBias,    // exp_probs_b: normal(0, 0.01)
};

struct TensorSpec {
  std::string name;         // llama.cpp name, e.g. "blk.3.ffn_down_exps.weight"
  std::vector<int64_t> ne;  // ggml order (ne[0] = row length), 1..3 dims
  GgmlType type = GgmlType::kF32;
  WeightInit init = WeightInit::kNormal;

  int64_t NumElements() const;
  int64_t NumRows() const { return NumElements() / ne[0]; }
  uint64_t Bytes() const;  // RowBytes(type, ne[0]) * rows
};

struct ModelSpec {
  std::string preset;
  ModelHparams hp;  // with n_layer = the chosen block count
  QuantMix quant = QuantMix::kQ4_K_M;
  MlaLayout mla = MlaLayout::kSplit;
  std::vector<gguf::KeyValue> metadata;  // in file order
  std::vector<TensorSpec> tensors;       // in file order (llama-quantize's order)
  std::vector<std::string> warnings;     // e.g. "llama.cpp will not load this layer count"
};

struct BuildOptions {
  std::string preset;
  int64_t layers = 0;  // 0 = the preset's default
  QuantMix quant = QuantMix::kQ4_K_M;
  MlaLayout mla = MlaLayout::kSplit;
  // Replaces the preset's hyper-parameters (tests: e.g. a toy model at DeepSeek's real MLA
  // widths, which the CUDA kernels require); `preset` still names the model.
  std::optional<ModelHparams> hparams;
};

// Names of all presets, in --list order.
std::vector<std::string> PresetNames();
// InvalidArgument (listing the presets) if unknown.
StatusOr<ModelHparams> FindPreset(std::string_view name);
// One line per preset for `--list`.
std::string PresetDescription(std::string_view name);

// Hyper-parameters + options -> full tensor table with types + metadata (incl. vocabulary).
StatusOr<ModelSpec> BuildModelSpec(const BuildOptions& options);
// Only the tensor table (names, shapes, types), no vocabulary: cheap, for size estimates.
StatusOr<ModelSpec> BuildTensorTable(const BuildOptions& options);

uint64_t TotalTensorBytes(const ModelSpec& spec);

}  // namespace moesplit::synth
