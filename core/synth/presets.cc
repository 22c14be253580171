// The preset table and option parsing. Widths follow the models' Hugging Face configs
// (config.json) as the converters read them; tiny presets keep the same structure at toy sizes.
#include <algorithm>
#include <cctype>
#include <string>

#include "core/synth/model_spec.h"

namespace moesplit::synth {
namespace {

std::string Upper(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return out;
}

// ds-tiny: the structure of shared/testdata/models/ds-tiny-Q4_K_M.gguf (made with llama.cpp).
ModelHparams DsTiny() {
  ModelHparams h;
  h.arch = Arch::kDeepseek2;
  h.general_name = "moesplit ds-tiny";
  h.n_vocab = 1024, h.n_embd = 256, h.n_layer = 4, h.n_head = 4;
  h.n_ff = 512, h.n_ff_exp = 128;
  h.n_expert = 16, h.n_expert_used = 4, h.n_expert_shared = 1;
  h.n_expert_groups = 4, h.n_group_used = 2, h.n_dense_lead = 1;
  h.q_lora = 64, h.kv_lora = 64, h.qk_nope = 32, h.qk_rope = 16, h.v_head = 32;
  h.gating_func = 2, h.weights_scale = 2.5f, h.weights_norm = true;
  h.n_ctx = 4096;
  h.vocab = VocabStyle::kDsTiny;
  h.chat_template = false;  // the oracle has none
  return h;
}

// DeepSeek-V2-Lite (16B, 2.4B active): no q compression, softmax routing, 2 shared experts.
ModelHparams DsV2Lite() {
  ModelHparams h;
  h.arch = Arch::kDeepseek2;
  h.general_name = "moesplit ds-v2-lite";
  h.n_vocab = 102400, h.n_embd = 2048, h.n_layer = 27, h.n_head = 16;
  h.n_ff = 10944, h.n_ff_exp = 1408;
  h.n_expert = 64, h.n_expert_used = 6, h.n_expert_shared = 2;
  h.n_expert_groups = 1, h.n_group_used = 1, h.n_dense_lead = 1;  // config: n_group 1, topk_group 1
  h.q_lora = 0, h.kv_lora = 512, h.qk_nope = 128, h.qk_rope = 64, h.v_head = 128;
  h.gating_func = 1, h.weights_scale = 1.0f, h.weights_norm = false;
  h.n_ctx = 163840;
  // rope_scaling: yarn, factor 40, original 4096, mscale_all_dim 0.707 -> log mul 0.1 * 0.707.
  h.yarn_factor = 40.0f, h.yarn_orig_ctx = 4096, h.yarn_log_mul = 0.0707f;
  h.yarn_beta_fast = 32.0f, h.yarn_beta_slow = 1.0f;
  h.vocab = VocabStyle::kDeepseek;
  return h;
}

// DeepSeek-V2-Lite's structure at toy widths, with its 27 layers: llama.cpp recognises a
// deepseek2 model without q_lora only at 26/27 layers, so this is the smallest file that
// exercises the V2-Lite path (attn_q, softmax routing without groups, 2 shared experts, YaRN with
// mscale_all_dim 0.707) in both runtimes. ~12 MB at Q4_K_M.
ModelHparams DsV2LiteTiny() {
  ModelHparams h = DsV2Lite();
  h.general_name = "moesplit ds-v2-lite-tiny";
  h.n_vocab = 1024, h.n_embd = 256, h.n_head = 4;
  h.n_ff = 512, h.n_ff_exp = 64;
  h.n_expert = 16, h.n_expert_used = 6;
  h.kv_lora = 64, h.qk_nope = 32, h.qk_rope = 16, h.v_head = 32;
  h.n_ctx = 163840;
  return h;
}

// DeepSeek-V3 / R1 (671B, 37B active).
ModelHparams DsV3() {
  ModelHparams h;
  h.arch = Arch::kDeepseek2;
  h.general_name = "moesplit ds-v3";
  h.n_vocab = 129280, h.n_embd = 7168, h.n_layer = 61, h.n_head = 128;
  h.n_ff = 18432, h.n_ff_exp = 2048;
  h.n_expert = 256, h.n_expert_used = 8, h.n_expert_shared = 1;
  h.n_expert_groups = 8, h.n_group_used = 4, h.n_dense_lead = 3;
  h.q_lora = 1536, h.kv_lora = 512, h.qk_nope = 128, h.qk_rope = 64, h.v_head = 128;
  h.gating_func = 2, h.weights_scale = 2.5f, h.weights_norm = true;
  h.n_ctx = 163840;
  // rope_scaling: yarn, factor 40, original 4096, mscale_all_dim 1.0 -> log mul 0.1.
  h.yarn_factor = 40.0f, h.yarn_orig_ctx = 4096, h.yarn_log_mul = 0.1f;
  h.yarn_beta_fast = 32.0f, h.yarn_beta_slow = 1.0f;
  h.vocab = VocabStyle::kDeepseek;
  return h;
}

// Kimi-K2 (Moonshot AI, 1.04T, 32B active; config.json of Kimi-K2-Instruct / -Base): the
// DeepSeek-V3 architecture (llama.cpp loads it as deepseek2) with 384 routed experts, 64 heads,
// one leading dense layer and no expert groups (n_group 1, topk_group 1).
ModelHparams KimiK2() {
  ModelHparams h;
  h.arch = Arch::kDeepseek2;
  h.general_name = "moesplit kimi-k2";
  h.n_vocab = 163840, h.n_embd = 7168, h.n_layer = 61, h.n_head = 64;
  h.n_ff = 18432, h.n_ff_exp = 2048;
  h.n_expert = 384, h.n_expert_used = 8, h.n_expert_shared = 1;
  h.n_expert_groups = 1, h.n_group_used = 1, h.n_dense_lead = 1;
  h.q_lora = 1536, h.kv_lora = 512, h.qk_nope = 128, h.qk_rope = 64, h.v_head = 128;
  h.gating_func = 2, h.weights_scale = 2.827f, h.weights_norm = true;  // sigmoid, noaux_tc
  h.n_ctx = 131072, h.rope_freq_base = 50000.0f;
  // rope_scaling: yarn, factor 32, original 4096, mscale_all_dim 1.0 -> log mul 0.1,
  // beta_fast 1, beta_slow 1 (DeepSeek-V3 has 32 / 1).
  h.yarn_factor = 32.0f, h.yarn_orig_ctx = 4096, h.yarn_log_mul = 0.1f;
  h.yarn_beta_fast = 1.0f, h.yarn_beta_slow = 1.0f;
  h.vocab = VocabStyle::kKimi;
  h.chat_template = false;  // Kimi's chat format is not one moesplit renders (chat_template.h)
  return h;
}

// Qwen3-30B-A3B structure at toy size: GQA 4/2 heads of 64, q/k norms, 16 experts top-4.
ModelHparams Qwen3MoeTiny() {
  ModelHparams h;
  h.arch = Arch::kQwen3Moe;
  h.general_name = "moesplit qwen3moe-tiny";
  h.n_vocab = 1024, h.n_embd = 256, h.n_layer = 4, h.n_head = 4, h.n_head_kv = 2;
  h.head_dim = 64, h.n_ff = 512, h.n_ff_exp = 128;
  h.n_expert = 16, h.n_expert_used = 4;
  h.n_ctx = 4096, h.rope_freq_base = 1000000.0f, h.rms_eps = 1e-6f;
  h.vocab = VocabStyle::kQwen;
  return h;
}

// Mixtral-8x7B structure at toy size: llama arch, 8 experts top-2, GQA 8/2 heads of 32.
ModelHparams MixtralTiny() {
  ModelHparams h;
  h.arch = Arch::kLlama;
  h.general_name = "moesplit mixtral-tiny";
  h.n_vocab = 1024, h.n_embd = 256, h.n_layer = 4, h.n_head = 8, h.n_head_kv = 2;
  h.head_dim = 32, h.n_ff = 512;
  h.n_expert = 8, h.n_expert_used = 2;
  h.n_ctx = 4096, h.rope_freq_base = 1000000.0f, h.rms_eps = 1e-5f;
  h.vocab = VocabStyle::kLlama;
  return h;
}

}  // namespace

std::vector<std::string> PresetNames() {
  return {"ds-tiny", "ds-v2-lite",    "ds-v2-lite-tiny", "ds-v3",
          "kimi-k2", "qwen3moe-tiny", "mixtral-tiny"};
}

StatusOr<ModelHparams> FindPreset(std::string_view name) {
  if (name == "ds-tiny") return DsTiny();
  if (name == "ds-v2-lite") return DsV2Lite();
  if (name == "ds-v2-lite-tiny") return DsV2LiteTiny();
  if (name == "ds-v3") return DsV3();
  if (name == "kimi-k2") return KimiK2();
  if (name == "qwen3moe-tiny") return Qwen3MoeTiny();
  if (name == "mixtral-tiny") return MixtralTiny();
  std::string list;
  for (const std::string& n : PresetNames()) list += (list.empty() ? "" : ", ") + n;
  return InvalidArgumentError("unknown preset '", name, "' (presets: ", list, ")");
}

std::string PresetDescription(std::string_view name) {
  if (name == "ds-tiny")
    return "deepseek2, 4 layers, hidden 256, 16 experts top-4 (the oracle's layout)";
  if (name == "ds-v2-lite")
    return "deepseek2, DeepSeek-V2-Lite widths, 27 layers, 64 experts top-6";
  if (name == "ds-v2-lite-tiny")
    return "deepseek2, DeepSeek-V2-Lite structure (27 layers, no q_lora) at hidden 256";
  if (name == "ds-v3") return "deepseek2, DeepSeek-V3/R1 widths, 61 layers, 256 experts top-8";
  if (name == "kimi-k2") return "deepseek2, Kimi-K2 widths, 61 layers, 384 experts top-8, 64 heads";
  if (name == "qwen3moe-tiny") return "qwen3moe, 4 layers, hidden 256, 16 experts top-4";
  if (name == "mixtral-tiny") return "llama (Mixtral), 4 layers, hidden 256, 8 experts top-2";
  return "";
}

StatusOr<QuantMix> QuantMixFromName(std::string_view name) {
  const std::string u = Upper(name);
  if (u == "Q4_K_M") return QuantMix::kQ4_K_M;
  if (u == "Q8_0") return QuantMix::kQ8_0;
  if (u == "F16") return QuantMix::kF16;
  if (u == "BF16") return QuantMix::kBF16;
  if (u == "IQ4_XS") return QuantMix::kIQ4_XS;
  if (u == "Q3_K_M") return QuantMix::kQ3_K_M;
  if (u == "UD-Q2_K_XL") return QuantMix::kUdQ2_K_XL;
  if (u == "UD-IQ2_XXS") return QuantMix::kUdIQ2_XXS;
  if (u == "UD-IQ1_S") return QuantMix::kUdIQ1_S;
  if (u == "UD-IQ1_M") return QuantMix::kUdIQ1_M;
  if (u == "IQ2_XS") return QuantMix::kIQ2_XS;
  if (u == "IQ2_M") return QuantMix::kIQ2_M;
  if (u == "IQ3_XXS") return QuantMix::kIQ3_XXS;
  if (u == "IQ3_M") return QuantMix::kIQ3_M;
  if (u == "Q4_0") return QuantMix::kQ4_0;
  if (u == "MXFP4_MOE") return QuantMix::kMXFP4_MOE;
  return InvalidArgumentError("unsupported --quant '", name,
                              "' (choose Q4_K_M, Q8_0, IQ4_XS, Q3_K_M, UD-Q2_K_XL, UD-IQ2_XXS, "
                              "UD-IQ1_M, UD-IQ1_S, IQ2_XS, IQ2_M, IQ3_XXS, IQ3_M, Q4_0, MXFP4_MOE, "
                              "F16, BF16)");
}

const char* QuantMixName(QuantMix mix) {
  switch (mix) {
    case QuantMix::kQ4_K_M:
      return "Q4_K_M";
    case QuantMix::kQ8_0:
      return "Q8_0";
    case QuantMix::kF16:
      return "F16";
    case QuantMix::kBF16:
      return "BF16";
    case QuantMix::kIQ4_XS:
      return "IQ4_XS";
    case QuantMix::kQ3_K_M:
      return "Q3_K_M";
    case QuantMix::kUdQ2_K_XL:
      return "UD-Q2_K_XL";
    case QuantMix::kUdIQ2_XXS:
      return "UD-IQ2_XXS";
    case QuantMix::kUdIQ1_S:
      return "UD-IQ1_S";
    case QuantMix::kUdIQ1_M:
      return "UD-IQ1_M";
    case QuantMix::kIQ2_XS:
      return "IQ2_XS";
    case QuantMix::kIQ2_M:
      return "IQ2_M";
    case QuantMix::kIQ3_XXS:
      return "IQ3_XXS";
    case QuantMix::kIQ3_M:
      return "IQ3_M";
    case QuantMix::kQ4_0:
      return "Q4_0";
    case QuantMix::kMXFP4_MOE:
      return "MXFP4_MOE";
  }
  return "?";
}

uint32_t QuantMixFileType(QuantMix mix) {
  switch (mix) {
    case QuantMix::kQ4_K_M:
      return 15;  // LLAMA_FTYPE_MOSTLY_Q4_K_M
    case QuantMix::kQ8_0:
      return 7;  // LLAMA_FTYPE_MOSTLY_Q8_0
    case QuantMix::kF16:
      return 1;  // LLAMA_FTYPE_MOSTLY_F16
    case QuantMix::kBF16:
      return 32;  // LLAMA_FTYPE_MOSTLY_BF16
    case QuantMix::kIQ4_XS:
      return 30;  // LLAMA_FTYPE_MOSTLY_IQ4_XS
    case QuantMix::kQ3_K_M:
      return 12;  // LLAMA_FTYPE_MOSTLY_Q3_K_M
    case QuantMix::kUdQ2_K_XL:
      return 10;  // LLAMA_FTYPE_MOSTLY_Q2_K
    case QuantMix::kUdIQ2_XXS:
      return 19;  // LLAMA_FTYPE_MOSTLY_IQ2_XXS
    case QuantMix::kUdIQ1_S:
      return 24;  // LLAMA_FTYPE_MOSTLY_IQ1_S
    case QuantMix::kUdIQ1_M:
      return 31;  // LLAMA_FTYPE_MOSTLY_IQ1_M
    case QuantMix::kIQ2_XS:
      return 20;  // LLAMA_FTYPE_MOSTLY_IQ2_XS
    case QuantMix::kIQ2_M:
      return 29;  // LLAMA_FTYPE_MOSTLY_IQ2_M
    case QuantMix::kIQ3_XXS:
      return 23;  // LLAMA_FTYPE_MOSTLY_IQ3_XXS
    case QuantMix::kIQ3_M:
      return 27;  // LLAMA_FTYPE_MOSTLY_IQ3_M
    case QuantMix::kQ4_0:
      return 2;  // LLAMA_FTYPE_MOSTLY_Q4_0
    case QuantMix::kMXFP4_MOE:
      return 38;  // LLAMA_FTYPE_MOSTLY_MXFP4_MOE
  }
  return 0;
}

StatusOr<MlaLayout> MlaLayoutFromName(std::string_view name) {
  if (name == "split") return MlaLayout::kSplit;
  if (name == "legacy") return MlaLayout::kLegacy;
  return InvalidArgumentError("unknown --mla-layout '", name, "' (choose split or legacy)");
}

}  // namespace moesplit::synth
