// Tensor tables per architecture, with shapes exactly as llama.cpp's loader creates them
// (src/models/deepseek2.cpp, qwen3moe.cpp, llama.cpp), in ggml order: ne[0] is the row length.
#include <algorithm>
#include <cstdio>
#include <string>

#include "core/synth/model_spec.h"
#include "core/synth/quant_mix.h"

namespace moesplit::synth {
namespace {

using Ne = std::vector<int64_t>;

struct TableBuilder {
  std::vector<TensorSpec>* out;
  int64_t layer = -1;

  void Add(const std::string& base, Ne ne, WeightInit init = WeightInit::kNormal,
           const char* suffix = "weight") {
    std::string name = layer < 0 ? base : "blk." + std::to_string(layer) + "." + base;
    name += ".";
    name += suffix;
    out->push_back(TensorSpec{std::move(name), std::move(ne), GgmlType::kF32, init});
  }
  void Norm(const std::string& base, int64_t n) { Add(base, {n}, WeightInit::kOnes); }
};

// DeepSeek MLA attention of one layer. Shapes for V3 (n_head 128, q_lora 1536, kv_lora 512,
// nope 128, rope 64, v 128): attn_q_b [1536, 128*192], attn_kv_a_mqa [7168, 512+64],
// attn_k_b [128, 512, 128], attn_v_b [512, 128, 128] or attn_kv_b [512, 128*256],
// attn_output [128*128, 7168].
void AddMla(const ModelHparams& h, MlaLayout mla, TableBuilder* b) {
  const int64_t head_k = h.qk_nope + h.qk_rope;
  b->Norm("attn_norm", h.n_embd);
  if (h.q_lora > 0) {
    b->Add("attn_q_a", {h.n_embd, h.q_lora});
    b->Norm("attn_q_a_norm", h.q_lora);
    b->Add("attn_q_b", {h.q_lora, h.n_head * head_k});
  } else {
    b->Add("attn_q", {h.n_embd, h.n_head * head_k});
  }
  b->Add("attn_kv_a_mqa", {h.n_embd, h.kv_lora + h.qk_rope});
  b->Norm("attn_kv_a_norm", h.kv_lora);
  if (mla == MlaLayout::kSplit) {
    b->Add("attn_k_b", {h.qk_nope, h.kv_lora, h.n_head});
    b->Add("attn_v_b", {h.kv_lora, h.v_head, h.n_head});
  } else {
    b->Add("attn_kv_b", {h.kv_lora, h.n_head * (h.qk_nope + h.v_head)});
  }
  b->Add("attn_output", {h.n_head * h.v_head, h.n_embd});
}

// GQA attention (qwen3moe adds per-head q/k RMSNorm of head_dim).
void AddGqa(const ModelHparams& h, TableBuilder* b) {
  b->Norm("attn_norm", h.n_embd);
  b->Add("attn_q", {h.n_embd, h.n_head * h.head_dim});
  b->Add("attn_k", {h.n_embd, h.n_head_kv * h.head_dim});
  b->Add("attn_v", {h.n_embd, h.n_head_kv * h.head_dim});
  b->Add("attn_output", {h.n_head * h.head_dim, h.n_embd});
  if (h.arch == Arch::kQwen3Moe) {
    b->Norm("attn_q_norm", h.head_dim);
    b->Norm("attn_k_norm", h.head_dim);
  }
}

// Routed experts merged into 3-D tensors [.., .., n_expert], plus router and shared expert(s).
// V3: ffn_gate_exps [7168, 2048, 256] = 3.76 G values per layer and matrix.
void AddMoe(const ModelHparams& h, TableBuilder* b) {
  const int64_t ff = h.arch == Arch::kLlama ? h.n_ff : h.n_ff_exp;  // llama: experts use n_ff
  b->Norm("ffn_norm", h.n_embd);
  b->Add("ffn_gate_inp", {h.n_embd, h.n_expert});
  if (h.gating_func == 2) b->Add("exp_probs_b", {h.n_expert}, WeightInit::kBias, "bias");
  b->Add("ffn_gate_exps", {h.n_embd, ff, h.n_expert});
  b->Add("ffn_down_exps", {ff, h.n_embd, h.n_expert});
  b->Add("ffn_up_exps", {h.n_embd, ff, h.n_expert});
  if (h.n_expert_shared > 0) {
    // All shared experts in one FFN of n_ff_exp * n_shared (V2-Lite: 2 * 1408 = 2816).
    const int64_t sh = h.n_ff_exp * h.n_expert_shared;
    b->Add("ffn_gate_shexp", {h.n_embd, sh});
    b->Add("ffn_down_shexp", {sh, h.n_embd});
    b->Add("ffn_up_shexp", {h.n_embd, sh});
  }
}

void AddDenseFfn(const ModelHparams& h, TableBuilder* b) {
  b->Norm("ffn_norm", h.n_embd);
  b->Add("ffn_gate", {h.n_embd, h.n_ff});
  b->Add("ffn_down", {h.n_ff, h.n_embd});
  b->Add("ffn_up", {h.n_embd, h.n_ff});
}

// llama-quantize walks tensors in llama.cpp's weights_map order: non-layer tensors first,
// then by layer number, and by name within a layer (see the oracle file's table).
int64_t LayerKey(const std::string& name) {
  int layer = -1;
  return std::sscanf(name.c_str(), "blk.%d.", &layer) == 1 ? layer : -1;
}

void SortLikeQuantize(std::vector<TensorSpec>* t) {
  std::stable_sort(t->begin(), t->end(), [](const TensorSpec& a, const TensorSpec& b) {
    const int64_t la = LayerKey(a.name), lb = LayerKey(b.name);
    return la != lb ? la < lb : a.name < b.name;
  });
}

Status ValidateLayers(const std::string& preset, const ModelHparams& h, int64_t layers,
                      std::vector<std::string>* warnings) {
  if (layers < 1 || layers > 1024) {
    return InvalidArgumentError("--layers ", layers, " out of range (1..1024)");
  }
  if (h.arch != Arch::kDeepseek2) return Status::Ok();
  // llama.cpp's deepseek2 loader treats 26/27-layer models as V2-Lite (is_lite): it does not
  // read q_lora_rank and expects attn_q instead of attn_q_a/attn_q_b.
  const bool lite_count = layers == 26 || layers == 27;
  if (h.q_lora > 0 && lite_count) {
    return InvalidArgumentError("--layers ", layers, " for ", preset,
                                ": llama.cpp treats 26/27-layer deepseek2 models as "
                                "V2-Lite (no q_lora); choose another layer count");
  }
  if (h.q_lora == 0 && !lite_count) {
    warnings->push_back(StrCat(preset, " with ", layers,
                               " layers: llama.cpp loads a deepseek2 "
                               "model without q_lora_rank only with 26 or 27 layers"));
  }
  if (layers <= h.n_dense_lead) {
    warnings->push_back(StrCat(preset, " with ", layers, " layers has only dense layers (",
                               h.n_dense_lead, " leading dense blocks), no MoE layer"));
  }
  return Status::Ok();
}

}  // namespace

int64_t TensorSpec::NumElements() const {
  int64_t n = 1;
  for (int64_t d : ne) n *= d;
  return n;
}

uint64_t TensorSpec::Bytes() const {
  return static_cast<uint64_t>(RowBytes(type, ne[0])) * static_cast<uint64_t>(NumRows());
}

uint64_t TotalTensorBytes(const ModelSpec& spec) {
  uint64_t total = 0;
  for (const TensorSpec& t : spec.tensors) total += t.Bytes();
  return total;
}

StatusOr<ModelSpec> BuildTensorTable(const BuildOptions& options) {
  ModelHparams h;
  if (options.hparams.has_value()) {
    h = *options.hparams;
  } else {
    MOESPLIT_ASSIGN_OR_RETURN(h, FindPreset(options.preset));
  }
  ModelSpec spec;
  if (options.layers < 0) return InvalidArgumentError("--layers ", options.layers, " must be >= 1");
  const int64_t layers = options.layers > 0 ? options.layers : h.n_layer;
  MOESPLIT_RETURN_IF_ERROR(ValidateLayers(options.preset, h, layers, &spec.warnings));
  h.n_layer = layers;
  h.n_dense_lead = std::min(h.n_dense_lead, layers);
  spec.preset = options.preset;
  spec.quant = options.quant;
  spec.mla = options.mla;

  TableBuilder b{&spec.tensors};
  b.Add("token_embd", {h.n_embd, h.n_vocab});
  b.Norm("output_norm", h.n_embd);
  b.Add("output", {h.n_embd, h.n_vocab});
  for (int64_t il = 0; il < layers; ++il) {
    b.layer = il;
    if (h.arch == Arch::kDeepseek2) {
      AddMla(h, options.mla, &b);
    } else {
      AddGqa(h, &b);
    }
    if (il < h.n_dense_lead) {
      AddDenseFfn(h, &b);
    } else {
      AddMoe(h, &b);
    }
  }
  SortLikeQuantize(&spec.tensors);
  const int64_t n_gqa = h.n_head_kv > 0 ? h.n_head / h.n_head_kv : 1;
  AssignTypes(options.quant, layers, h.n_expert, n_gqa, &spec.tensors);
  spec.hp = std::move(h);
  return spec;
}

}  // namespace moesplit::synth
