// GGUF metadata per architecture: the keys and value types llama.cpp's converters write
// (convert_hf_to_gguf.py + conversion/{base,deepseek,qwen,llama}.py), in the order of the
// llama.cpp-made oracle: general.*, hyper-parameters, tokenizer.*, then the two keys
// llama-quantize appends (general.quantization_version, general.file_type).
#include <string>

#include "core/synth/model_spec.h"
#include "core/synth/vocab.h"

namespace moesplit::synth {
namespace {

using gguf::Value;

struct KvList {
  std::vector<gguf::KeyValue>* out;
  std::string arch;

  void Add(std::string key, Value v) { out->push_back({std::move(key), std::move(v)}); }
  // "{arch}.key"
  void Arch(const std::string& key, Value v) { Add(arch + "." + key, std::move(v)); }
  void U32(const std::string& key, int64_t x) { Arch(key, Value::U32(static_cast<uint32_t>(x))); }
};

const char* ArchName(Arch a) {
  switch (a) {
    case Arch::kDeepseek2:
      return "deepseek2";
    case Arch::kQwen3Moe:
      return "qwen3moe";
    case Arch::kLlama:
      return "llama";
  }
  return "?";
}

// Written by TextModel.set_gguf_parameters for rope_scaling {type: yarn, ...}.
void AddYarn(const ModelHparams& h, bool with_beta, KvList* kv) {
  if (h.yarn_factor == 0.0f) return;
  kv->Arch("rope.scaling.type", Value::Str("yarn"));
  kv->Arch("rope.scaling.factor", Value::F32(h.yarn_factor));
  kv->U32("rope.scaling.original_context_length", h.yarn_orig_ctx);
  if (with_beta && h.yarn_beta_fast != 0.0f) {
    kv->Arch("rope.scaling.yarn_beta_fast", Value::F32(h.yarn_beta_fast));
    kv->Arch("rope.scaling.yarn_beta_slow", Value::F32(h.yarn_beta_slow));
  }
}

void AddCommonHead(const ModelHparams& h, int64_t head_count_kv, bool yarn_beta, KvList* kv) {
  kv->U32("context_length", h.n_ctx);
  kv->U32("embedding_length", h.n_embd);
  kv->U32("feed_forward_length", h.n_ff);
  kv->U32("block_count", h.n_layer);
  kv->U32("attention.head_count", h.n_head);
  kv->U32("attention.head_count_kv", head_count_kv);
  AddYarn(h, yarn_beta, kv);
  kv->Arch("rope.freq_base", Value::F32(h.rope_freq_base));
  kv->Arch("attention.layer_norm_rms_epsilon", Value::F32(h.rms_eps));
  kv->U32("expert_count", h.n_expert);
  kv->U32("expert_used_count", h.n_expert_used);
}

// DeepSeek: MLA as MQA (split) or as MHA (legacy); see MlaLayout.
void AddDeepseek2(const ModelHparams& h, MlaLayout mla, KvList* kv) {
  const bool split = mla == MlaLayout::kSplit;
  AddCommonHead(h, split ? 1 : h.n_head, /*yarn_beta=*/split, kv);
  if (h.n_expert_groups > 0) kv->U32("expert_group_count", h.n_expert_groups);
  if (h.n_group_used > 0) kv->U32("expert_group_used_count", h.n_group_used);
  if (h.gating_func != 0) kv->U32("expert_gating_func", h.gating_func);
  kv->U32("leading_dense_block_count", h.n_dense_lead);
  kv->U32("vocab_size", h.n_vocab);
  if (h.q_lora > 0) kv->U32("attention.q_lora_rank", h.q_lora);
  kv->U32("attention.kv_lora_rank", h.kv_lora);
  if (split) {
    kv->U32("attention.key_length", h.kv_lora + h.qk_rope);      // 512 + 64 = 576 for V3
    kv->U32("attention.value_length", h.kv_lora);                // 512
    kv->U32("attention.key_length_mla", h.qk_nope + h.qk_rope);  // 192
    kv->U32("attention.value_length_mla", h.v_head);             // 128
  } else {
    kv->U32("attention.key_length", h.qk_nope + h.qk_rope);  // 192
    kv->U32("attention.value_length", h.v_head);             // 128
  }
  kv->U32("expert_feed_forward_length", h.n_ff_exp);
  kv->U32("expert_shared_count", h.n_expert_shared);
  if (h.weights_scale != 0.0f) kv->Arch("expert_weights_scale", Value::F32(h.weights_scale));
  if (h.weights_norm) kv->Arch("expert_weights_norm", Value::Bool(true));
  kv->U32("rope.dimension_count", h.qk_rope);
  if (h.yarn_factor != 0.0f) {
    kv->Arch("rope.scaling.yarn_log_multiplier", Value::F32(h.yarn_log_mul));
  }
}

void AddQwen3Moe(const ModelHparams& h, KvList* kv) {
  AddCommonHead(h, h.n_head_kv, true, kv);
  kv->U32("attention.key_length", h.head_dim);
  kv->U32("attention.value_length", h.head_dim);
  kv->U32("expert_feed_forward_length", h.n_ff_exp);
}

void AddLlama(const ModelHparams& h, KvList* kv) {
  AddCommonHead(h, h.n_head_kv, true, kv);
  kv->U32("vocab_size", h.n_vocab);
  kv->U32("rope.dimension_count", h.head_dim);
}

void AddTokenizer(const Vocab& v, KvList* kv) {
  kv->Add("tokenizer.ggml.model", Value::Str(v.model));
  kv->Add("tokenizer.ggml.pre", Value::Str(v.pre));
  kv->Add("tokenizer.ggml.tokens", Value::StrArray(v.tokens));
  kv->Add("tokenizer.ggml.token_type", Value::I32Array(v.token_types));
  kv->Add("tokenizer.ggml.merges", Value::StrArray(v.merges));
  kv->Add("tokenizer.ggml.bos_token_id", Value::U32(v.bos));
  kv->Add("tokenizer.ggml.eos_token_id", Value::U32(v.eos));
  if (v.pad) kv->Add("tokenizer.ggml.padding_token_id", Value::U32(*v.pad));
  kv->Add("tokenizer.ggml.add_bos_token", Value::Bool(v.add_bos));
  if (v.pre == "deepseek-v3") kv->Add("tokenizer.ggml.add_eos_token", Value::Bool(v.add_eos));
  if (!v.chat_template.empty()) kv->Add("tokenizer.chat_template", Value::Str(v.chat_template));
}

}  // namespace

StatusOr<ModelSpec> BuildModelSpec(const BuildOptions& options) {
  MOESPLIT_ASSIGN_OR_RETURN(ModelSpec spec, BuildTensorTable(options));
  const ModelHparams& h = spec.hp;
  KvList kv{&spec.metadata, ArchName(h.arch)};
  kv.Add("general.architecture", Value::Str(kv.arch));
  kv.Add("general.name", Value::Str(h.general_name));
  kv.Add("general.type", Value::Str("model"));
  switch (h.arch) {
    case Arch::kDeepseek2:
      AddDeepseek2(h, spec.mla, &kv);
      break;
    case Arch::kQwen3Moe:
      AddQwen3Moe(h, &kv);
      break;
    case Arch::kLlama:
      AddLlama(h, &kv);
      break;
  }
  AddTokenizer(BuildVocab(h.vocab, h.n_vocab, h.chat_template), &kv);
  kv.Add("general.quantization_version", Value::U32(2));
  kv.Add("general.file_type", Value::U32(QuantMixFileType(spec.quant)));
  return spec;
}

}  // namespace moesplit::synth
