#include "core/model/model_config.h"

#include <cmath>
#include <sstream>

namespace moesplit {

const char* ModelArchName(ModelArch arch) {
  switch (arch) {
    case ModelArch::kDeepseek2:
      return "deepseek2";
    case ModelArch::kQwen3Moe:
      return "qwen3moe";
    case ModelArch::kLlama:
      return "llama";
  }
  return "?";
}

namespace {

// Typed access to "{arch}.key" with llama.cpp's optional/required semantics.
class KeyReader {
 public:
  KeyReader(const gguf::GgufFile& f, std::string arch) : f_(f), arch_(std::move(arch)) {}

  std::string Key(const std::string& k) const { return arch_ + "." + k; }
  bool Has(const std::string& k) const { return f_.Find(Key(k)) != nullptr; }

  // Required unsigned key.
  StatusOr<int64_t> Uint(const std::string& k) const {
    if (!Has(k)) {
      return InvalidArgumentError(f_.path(), ": metadata key '", Key(k),
                                  "' is missing (a llama.cpp-converted ", arch_,
                                  " model has it; re-convert the model)");
    }
    return UintOr(k, 0);
  }
  // Optional unsigned key: `def` when absent. An array (per-layer values, llama.cpp's
  // get_key_or_arr) is accepted when all entries are equal.
  StatusOr<int64_t> UintOr(const std::string& k, int64_t def) const {
    const gguf::Value* v = f_.Find(Key(k));
    if (v == nullptr) return def;
    if (v->type == gguf::ValueType::kArray) {
      MOESPLIT_ASSIGN_OR_RETURN(const gguf::Array* a, f_.GetArray(Key(k)));
      if (a->items.empty()) return InvalidArgumentError(f_.path(), ": '", Key(k), "' is empty");
      MOESPLIT_ASSIGN_OR_RETURN(uint64_t first, a->items[0].AsUint());
      for (const gguf::Value& item : a->items) {
        MOESPLIT_ASSIGN_OR_RETURN(uint64_t x, item.AsUint());
        if (x != first) {
          return UnimplementedError(f_.path(), ": '", Key(k),
                                    "' differs between layers; per-layer values are not supported");
        }
      }
      return static_cast<int64_t>(first);
    }
    MOESPLIT_ASSIGN_OR_RETURN(uint64_t x, f_.GetUint(Key(k)));
    return static_cast<int64_t>(x);
  }
  StatusOr<float> FloatOr(const std::string& k, float def) const {
    if (!Has(k)) return def;
    MOESPLIT_ASSIGN_OR_RETURN(double x, f_.GetFloat(Key(k)));
    return static_cast<float>(x);
  }
  StatusOr<bool> BoolOr(const std::string& k, bool def) const {
    if (!Has(k)) return def;
    return f_.GetBool(Key(k));
  }
  StatusOr<std::string> StringOr(const std::string& k, const std::string& def) const {
    if (!Has(k)) return def;
    return f_.GetString(Key(k));
  }

 private:
  const gguf::GgufFile& f_;
  std::string arch_;
};

Status ReadCommon(const gguf::GgufFile& f, const KeyReader& r, ModelConfig* c) {
  MOESPLIT_ASSIGN_OR_RETURN(c->n_ctx_train, r.Uint("context_length"));
  MOESPLIT_ASSIGN_OR_RETURN(c->n_embd, r.Uint("embedding_length"));
  MOESPLIT_ASSIGN_OR_RETURN(c->n_layer, r.Uint("block_count"));
  MOESPLIT_ASSIGN_OR_RETURN(c->n_ff, r.UintOr("feed_forward_length", 0));
  MOESPLIT_ASSIGN_OR_RETURN(c->n_head, r.Uint("attention.head_count"));
  MOESPLIT_ASSIGN_OR_RETURN(c->n_head_kv, r.UintOr("attention.head_count_kv", c->n_head));
  MOESPLIT_ASSIGN_OR_RETURN(c->n_expert, r.UintOr("expert_count", 0));
  MOESPLIT_ASSIGN_OR_RETURN(c->n_expert_used, r.UintOr("expert_used_count", 0));
  MOESPLIT_ASSIGN_OR_RETURN(c->n_expert_groups, r.UintOr("expert_group_count", 0));
  MOESPLIT_ASSIGN_OR_RETURN(c->n_group_used, r.UintOr("expert_group_used_count", 0));
  MOESPLIT_ASSIGN_OR_RETURN(float eps, r.FloatOr("attention.layer_norm_rms_epsilon", -1.0f));
  if (eps <= 0.0f) {
    return InvalidArgumentError(f.path(), ": metadata key '",
                                r.Key("attention.layer_norm_rms_epsilon"),
                                "' is missing or not positive");
  }
  c->rms_eps = eps;
  if (c->n_head <= 0 || c->n_embd <= 0 || c->n_layer <= 0) {
    return InvalidArgumentError(f.path(), ": head_count ", c->n_head, ", embedding_length ",
                                c->n_embd, ", block_count ", c->n_layer, " must all be positive");
  }
  // Per-head widths default to n_embd / n_head (llama_model::load_hparams).
  MOESPLIT_ASSIGN_OR_RETURN(c->head_dim_k, r.UintOr("attention.key_length", c->n_embd / c->n_head));
  MOESPLIT_ASSIGN_OR_RETURN(c->head_dim_v,
                            r.UintOr("attention.value_length", c->n_embd / c->n_head));
  MOESPLIT_ASSIGN_OR_RETURN(c->n_rot, r.UintOr("rope.dimension_count", c->head_dim_k));
  MOESPLIT_ASSIGN_OR_RETURN(c->rope_freq_base, r.FloatOr("rope.freq_base", 10000.0f));

  // Rope scaling: type defaults to "linear"; factor 0/absent = none.
  MOESPLIT_ASSIGN_OR_RETURN(std::string type, r.StringOr("rope.scaling.type", "linear"));
  if (type == "none") {
    c->rope_scaling = RopeScalingType::kNone;
  } else if (type == "linear") {
    c->rope_scaling = RopeScalingType::kLinear;
  } else if (type == "yarn") {
    c->rope_scaling = RopeScalingType::kYarn;
  } else {
    return UnimplementedError(f.path(), ": ", r.Key("rope.scaling.type"), " '", type,
                              "' is not supported (none, linear, yarn)");
  }
  MOESPLIT_ASSIGN_OR_RETURN(float factor, r.FloatOr("rope.scaling.factor", 0.0f));
  if (factor == 0.0f) {
    MOESPLIT_ASSIGN_OR_RETURN(factor, r.FloatOr("rope.scale_linear", 0.0f));
  }
  c->rope_scaling_factor = factor == 0.0f ? 1.0f : factor;
  MOESPLIT_ASSIGN_OR_RETURN(c->yarn_orig_ctx,
                            r.UintOr("rope.scaling.original_context_length", c->n_ctx_train));
  MOESPLIT_ASSIGN_OR_RETURN(c->yarn_log_mul, r.FloatOr("rope.scaling.yarn_log_multiplier", 0.0f));
  MOESPLIT_ASSIGN_OR_RETURN(c->yarn_beta_fast, r.FloatOr("rope.scaling.yarn_beta_fast", 32.0f));
  MOESPLIT_ASSIGN_OR_RETURN(c->yarn_beta_slow, r.FloatOr("rope.scaling.yarn_beta_slow", 1.0f));
  MOESPLIT_ASSIGN_OR_RETURN(c->rope_attn_factor, r.FloatOr("rope.scaling.attn_factor", 1.0f));
  return Status::Ok();
}

Status ReadDeepseek2(const gguf::GgufFile& f, const KeyReader& r, ModelConfig* c) {
  MOESPLIT_ASSIGN_OR_RETURN(c->n_dense_lead, r.UintOr("leading_dense_block_count", 0));
  MOESPLIT_ASSIGN_OR_RETURN(c->q_lora_rank, r.UintOr("attention.q_lora_rank", 0));
  MOESPLIT_ASSIGN_OR_RETURN(c->kv_lora_rank, r.Uint("attention.kv_lora_rank"));
  MOESPLIT_ASSIGN_OR_RETURN(int64_t k_mla, r.UintOr("attention.key_length_mla", 0));
  MOESPLIT_ASSIGN_OR_RETURN(int64_t v_mla, r.UintOr("attention.value_length_mla", 0));
  // Split layout (current converter): key_length = kv_lora + rope (MQA view), *_mla = real
  // per-head widths. Legacy: key_length / value_length are the real per-head widths.
  c->mla_split = k_mla != 0 && v_mla != 0;
  if (c->mla_split) {
    c->head_dim_k = k_mla;
    c->head_dim_v = v_mla;
  }
  c->qk_rope = c->n_rot;
  c->qk_nope = c->head_dim_k - c->qk_rope;
  if (c->qk_nope < 1) {
    return InvalidArgumentError(f.path(), ": key length ", c->head_dim_k, " minus ",
                                r.Key("rope.dimension_count"), " ", c->n_rot,
                                " leaves no non-rope dims (expected e.g. 192 - 64)");
  }
  MOESPLIT_ASSIGN_OR_RETURN(c->n_ff_exp, r.Uint("expert_feed_forward_length"));
  MOESPLIT_ASSIGN_OR_RETURN(c->n_expert_shared, r.Uint("expert_shared_count"));
  c->n_ff_shexp = c->n_ff_exp * c->n_expert_shared;
  MOESPLIT_ASSIGN_OR_RETURN(c->expert_weights_scale, r.FloatOr("expert_weights_scale", 0.0f));
  MOESPLIT_ASSIGN_OR_RETURN(c->expert_weights_norm, r.BoolOr("expert_weights_norm", false));
  // Absent gating func = softmax (DeepSeek V2 / V2.5 files predate the key).
  MOESPLIT_ASSIGN_OR_RETURN(int64_t gating, r.UintOr("expert_gating_func", 1));
  if (gating != 1 && gating != 2) {
    return UnimplementedError(f.path(), ": ", r.Key("expert_gating_func"), " = ", gating,
                              " is not supported (1 softmax, 2 sigmoid)");
  }
  c->gating = gating == 2 ? GatingFunc::kSigmoid : GatingFunc::kSoftmax;
  return Status::Ok();
}

// The rope magnitude and the attention scale, as llama.cpp 0a50d9909 computes them
// (llama_context's yarn_attn_factor and src/models/deepseek2.cpp). With s = rope.scaling.factor
// and M = mscale_all_dim = yarn_log_multiplier / 0.1 (the converter stores 0.1 * M):
//   YaRN rope magnitude: ggml multiplies cos/sin by attn_factor * (1 + 0.1 ln s); llama.cpp
//   passes attn_factor = 1 / (1 + 0.1 ln s) when a log multiplier is present, so the net
//   magnitude is 1 (times rope.scaling.attn_factor).
//   deepseek2 kq_scale = mscale^2 / sqrt(qk_nope + qk_rope), mscale = 1 + 0.1 * M * ln s
//   (V3: s = 40, M = 1 -> mscale = 1.3689, kq_scale = 1.874 / sqrt(192)).
void DeriveRope(ModelConfig* c) {
  const bool scaled = c->rope_scaling != RopeScalingType::kNone;
  c->rope_freq_scale = scaled ? 1.0f / c->rope_scaling_factor : 1.0f;
  c->rope_ext_factor = c->rope_scaling == RopeScalingType::kYarn ? 1.0f : 0.0f;
  const float ln_s = std::log(1.0f / c->rope_freq_scale);
  float attn = 1.0f;
  if (c->rope_ext_factor != 0.0f) {
    // get_mscale(s, m) = 1 + 0.1 m ln s for s > 1. With a log multiplier llama.cpp divides
    // get_mscale(s, mscale) by get_mscale(s, M) where for deepseek2 mscale = M: ratio 1.
    const float m_all = c->yarn_log_mul / 0.1f;
    const bool ds2 = c->arch == ModelArch::kDeepseek2;
    auto get_mscale = [&](float m) {
      return c->rope_scaling_factor <= 1.0f ? 1.0f : 1.0f + 0.1f * m * ln_s;
    };
    if (c->yarn_log_mul != 0.0f) {
      const float mscale = (ds2 && m_all != 1.0f) ? m_all : 1.0f;
      attn = get_mscale(mscale) / get_mscale(m_all);
    } else {
      attn = get_mscale(1.0f);
    }
    attn *= 1.0f / (1.0f + 0.1f * ln_s);  // cancels ggml's own YaRN magnitude factor
  }
  attn *= c->rope_attn_factor;
  c->rope_attn_factor_eff = attn;
  if (c->arch == ModelArch::kDeepseek2) {
    const float attn_factor_org = attn * (1.0f + 0.1f * ln_s);
    const float mscale = attn_factor_org * (1.0f + 0.1f * (c->yarn_log_mul / 0.1f) * ln_s);
    c->kq_scale = mscale * mscale / std::sqrt(static_cast<float>(c->head_dim_k));
  } else {
    c->kq_scale = 1.0f / std::sqrt(static_cast<float>(c->head_dim_k));
  }
}

Status Validate(const gguf::GgufFile& f, const ModelConfig& c) {
  auto bad = [&](const std::string& what) {
    return InvalidArgumentError(f.path(), ": inconsistent hyper-parameters: ", what);
  };
  if (c.n_expert > 0) {
    if (c.n_expert_used <= 0 || c.n_expert_used > c.n_expert)
      return bad(StrCat("expert_used_count ", c.n_expert_used, " not in 1..", c.n_expert));
    if (c.n_expert_groups > 1) {
      if (c.n_expert % c.n_expert_groups != 0)
        return bad(StrCat("expert_count ", c.n_expert, " not divisible by expert_group_count ",
                          c.n_expert_groups));
      if (c.n_group_used <= 0 || c.n_group_used > c.n_expert_groups)
        return bad(
            StrCat("expert_group_used_count ", c.n_group_used, " not in 1..", c.n_expert_groups));
      if (c.n_group_used * (c.n_expert / c.n_expert_groups) < c.n_expert_used)
        return bad("the used groups hold fewer experts than expert_used_count");
    }
  }
  if (c.n_rot <= 0 || c.n_rot % 2 != 0 || c.n_rot > c.head_dim_k)
    return bad(
        StrCat("rope.dimension_count ", c.n_rot, " must be even and <= key length ", c.head_dim_k));
  if (c.n_head_kv <= 0 || c.n_head % c.n_head_kv != 0)
    return bad(StrCat("head_count ", c.n_head, " not a multiple of head_count_kv ", c.n_head_kv));
  return Status::Ok();
}

}  // namespace

StatusOr<ModelConfig> ModelConfig::FromGguf(const gguf::GgufFile& f) {
  const std::string arch = f.architecture();
  ModelConfig c;
  if (arch == "deepseek2") {
    c.arch = ModelArch::kDeepseek2;
  } else if (arch == "qwen3moe") {
    c.arch = ModelArch::kQwen3Moe;
  } else if (arch == "llama") {
    c.arch = ModelArch::kLlama;
  } else {
    return UnimplementedError(f.path(), ": architecture '", arch,
                              "' is not supported (deepseek2, qwen3moe, llama with experts)");
  }
  KeyReader r(f, arch);
  MOESPLIT_RETURN_IF_ERROR(ReadCommon(f, r, &c));
  // Vocabulary size: {arch}.vocab_size, else the token list length.
  MOESPLIT_ASSIGN_OR_RETURN(c.n_vocab, r.UintOr("vocab_size", 0));
  if (c.n_vocab == 0 && f.Find("tokenizer.ggml.tokens") != nullptr) {
    MOESPLIT_ASSIGN_OR_RETURN(const gguf::Array* tokens, f.GetArray("tokenizer.ggml.tokens"));
    c.n_vocab = static_cast<int64_t>(tokens->items.size());
  }
  switch (c.arch) {
    case ModelArch::kDeepseek2:
      MOESPLIT_RETURN_IF_ERROR(ReadDeepseek2(f, r, &c));
      break;
    case ModelArch::kQwen3Moe: {
      MOESPLIT_ASSIGN_OR_RETURN(c.n_ff_exp, r.UintOr("expert_feed_forward_length", 0));
      c.expert_weights_norm = true;  // llama.cpp's qwen3moe graph always renormalises
      break;
    }
    case ModelArch::kLlama:
      c.n_ff_exp = c.n_ff;  // Mixtral experts have the dense width
      c.expert_weights_norm = true;
      if (c.n_expert == 0) {
        return UnimplementedError(f.path(), ": a llama model without experts (",
                                  r.Key("expert_count"), " absent) is not supported");
      }
      break;
  }
  MOESPLIT_RETURN_IF_ERROR(Validate(f, c));
  DeriveRope(&c);
  return c;
}

std::string ModelConfig::Summary() const {
  std::ostringstream os;
  os << ModelArchName(arch) << ": " << n_layer << " layers, hidden " << n_embd << ", vocab "
     << n_vocab << ", heads " << n_head << "/" << n_head_kv << " (k " << head_dim_k << ", v "
     << head_dim_v << ", rope " << n_rot << ")";
  if (arch == ModelArch::kDeepseek2) {
    os << ", MLA q_lora " << q_lora_rank << " kv_lora " << kv_lora_rank << " ("
       << (mla_split ? "split attn_k_b/attn_v_b" : "legacy attn_kv_b") << ")";
  }
  if (n_expert > 0) {
    os << ", experts " << n_expert << " top-" << n_expert_used << " of width " << n_ff_exp;
    if (n_expert_shared > 0) os << " + " << n_expert_shared << " shared";
    if (n_expert_groups > 1) os << ", groups " << n_group_used << "/" << n_expert_groups;
    os << ", " << (gating == GatingFunc::kSigmoid ? "sigmoid" : "softmax");
  }
  os << ", kq_scale " << kq_scale;
  return os.str();
}

}  // namespace moesplit
