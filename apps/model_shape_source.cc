#include "apps/model_shape_source.h"

#include <array>
#include <map>
#include <set>
#include <string_view>
#include <vector>

#include "core/gguf/gguf_file.h"
#include "core/model/model_config.h"
#include "core/model/tensor_role.h"
#include "core/synth/model_spec.h"

namespace moesplit::app {
namespace {

// The hyper-parameters a shape needs beyond the tensor table (both sources fill this).
struct Dims {
  std::string arch;
  int64_t n_layers = 0, n_embd = 0, n_vocab = 0, n_head = 0;
  int64_t n_expert = 0, n_expert_used = 0, n_expert_shared = 0;
  bool mla = false;                                       // deepseek2: latent cache
  int64_t kv_lora = 0, qk_rope = 0;                       // MLA widths
  int64_t n_head_kv = 0, head_dim_k = 0, head_dim_v = 0;  // GQA widths
};

struct TensorRow {
  std::string_view name;
  std::array<int64_t, 3> ne = {1, 1, 1};  // ggml order: ne[0] = row length
  uint64_t bytes = 0;                     // as stored
  uint64_t elements = 0;
  GgmlType type = GgmlType::kF32;
};

void Add(TensorRole role, uint64_t v, numa::TensorClassSizes* s) {
  switch (role) {
    case TensorRole::kRoutedExperts:
      s->routed_experts += v;
      break;
    case TensorRole::kSharedExperts:
      s->shared_experts += v;
      break;
    case TensorRole::kDenseFfn:
      s->dense_ffn += v;
      break;
    case TensorRole::kRouter:
      s->router += v;
      break;
    case TensorRole::kAttention:
      s->attention += v;
      break;
    case TensorRole::kEmbeddings:
      s->embeddings += v;
      break;
    case TensorRole::kOutput:
      s->output += v;
      break;
    case TensorRole::kNorms:
      s->norms += v;
      break;
    case TensorRole::kOther:
      s->other += v;
      break;
  }
}

// Tensor base name without "blk.N." and ".weight".
std::string_view Base(std::string_view name) {
  if (name.starts_with("blk.")) name.remove_prefix(name.find('.', 4) + 1);
  if (name.ends_with(".weight")) name.remove_suffix(7);
  return name;
}

numa::ModelShape BuildShape(const Dims& d, const std::vector<TensorRow>& tensors) {
  numa::ModelShape s;
  s.arch = d.arch;
  s.n_layers = d.n_layers, s.n_embd = d.n_embd, s.n_vocab = d.n_vocab, s.n_head = d.n_head;
  s.n_expert = d.n_expert, s.n_expert_used = d.n_expert_used;
  s.n_expert_shared = d.n_expert_shared;
  std::map<int, uint64_t> moe_layers;  // block -> routed-expert bytes
  for (const TensorRow& t : tensors) {
    const TensorRole role = ClassifyTensor(t.name);
    Add(role, t.bytes, &s.bytes);
    Add(role, t.elements, &s.params);
    // Multiply-adds per type for the prefill rate of each kernel (embeddings are row lookups,
    // norms and the rest element-wise: not matrix products).
    if (role == TensorRole::kRoutedExperts) {
      s.routed_params_by_type[TypeName(t.type)] += t.elements;
      s.routed_bytes_by_type[TypeName(t.type)] += t.bytes;
    } else if (role == TensorRole::kSharedExperts || role == TensorRole::kDenseFfn ||
               role == TensorRole::kAttention || role == TensorRole::kRouter) {
      s.dense_params_by_type[TypeName(t.type)] += t.elements;
    }
    const std::string_view base = Base(t.name);
    if (role == TensorRole::kRoutedExperts) {
      moe_layers[LayerOfTensor(t.name)] += t.bytes;
      if (base == "ffn_up_exps") s.n_ff_exp = t.ne[1];  // [D, n_ff_exp, E]
    }
    if (role == TensorRole::kDenseFfn && base == "ffn_up") s.n_ff = t.ne[1];  // [D, n_ff]
  }
  s.n_moe_layers = static_cast<int64_t>(moe_layers.size());
  for (const auto& [layer, bytes] : moe_layers) s.routed_bytes_by_moe_layer.push_back(bytes);
  s.n_dense_layers = s.n_layers - s.n_moe_layers;
  const uint64_t experts = static_cast<uint64_t>(s.n_moe_layers * s.n_expert);
  if (experts > 0) {
    s.routed_bytes_per_expert_layer = s.bytes.routed_experts / experts;
    s.routed_params_per_expert_layer = s.params.routed_experts / experts;
  }
  // Values per token per layer in moesplit's cache and attention MACs per cached position
  // (numa/model_shape.h). V3: 512 + 64 = 576 values x 61 layers x 2 B = 70.3 KB/token (the
  // latent rows only, core/engine/kv_cache.h); each position costs (512 + 64) + 512 MACs per
  // head (scores, then the weighted sum of the latents).
  const int64_t values =
      d.mla ? d.kv_lora + d.qk_rope : d.n_head_kv * (d.head_dim_k + d.head_dim_v);
  const int64_t macs = d.mla ? d.n_head * ((d.kv_lora + d.qk_rope) + d.kv_lora)
                             : d.n_head * (d.head_dim_k + d.head_dim_v);
  s.kv_bytes_per_token_f16 = static_cast<uint64_t>(values * d.n_layers * 2);
  s.kv_bytes_per_token_f32 = static_cast<uint64_t>(values * d.n_layers * 4);
  s.kv_gpu_bytes_per_token = s.kv_bytes_per_token_f16;
  s.attn_macs_per_position = static_cast<uint64_t>(macs * d.n_layers);
  return s;
}

const char* SynthArchName(synth::Arch a) {
  switch (a) {
    case synth::Arch::kDeepseek2:
      return "deepseek2";
    case synth::Arch::kQwen3Moe:
      return "qwen3moe";
    case synth::Arch::kLlama:
      return "llama";
  }
  return "?";
}

}  // namespace

StatusOr<numa::ModelShape> ModelShapeFromGguf(const std::string& path,
                                              std::vector<TensorEntry>* tensors) {
  MOESPLIT_ASSIGN_OR_RETURN(std::unique_ptr<gguf::GgufFile> file, gguf::GgufFile::Open(path));
  MOESPLIT_ASSIGN_OR_RETURN(ModelConfig c, ModelConfig::FromGguf(*file));
  Dims d;
  d.arch = ModelArchName(c.arch);
  d.n_layers = c.n_layer, d.n_embd = c.n_embd, d.n_vocab = c.n_vocab, d.n_head = c.n_head;
  d.n_expert = c.n_expert, d.n_expert_used = c.n_expert_used;
  d.n_expert_shared = c.n_expert_shared;
  d.mla = c.arch == ModelArch::kDeepseek2;
  d.kv_lora = c.kv_lora_rank, d.qk_rope = c.qk_rope;
  d.n_head_kv = c.n_head_kv, d.head_dim_k = c.head_dim_k, d.head_dim_v = c.head_dim_v;
  std::vector<TensorRow> rows;
  rows.reserve(file->tensors().size());
  for (const gguf::TensorInfo& t : file->tensors()) {
    rows.push_back({t.name,
                    {t.ne[0], t.ne[1], t.ne[2]},
                    t.nbytes,
                    static_cast<uint64_t>(t.NumElements()),
                    t.type});
  }
  numa::ModelShape s = BuildShape(d, rows);
  if (tensors != nullptr) {
    for (const TensorRow& r : rows) tensors->push_back({std::string(r.name), r.bytes});
  }
  s.name = path;
  auto ft = file->GetUint("general.file_type");
  s.quant = ft.ok() ? FileTypeName(static_cast<uint32_t>(*ft)) : "?";
  return s;
}

StatusOr<numa::ModelShape> ModelShapeFromPreset(const std::string& preset, int64_t layers,
                                                const std::string& quant,
                                                std::vector<TensorEntry>* tensors) {
  if (layers < 0) return InvalidArgumentError("layers ", layers, " must be >= 1 (0 = all)");
  MOESPLIT_ASSIGN_OR_RETURN(synth::QuantMix mix, synth::QuantMixFromName(quant));
  MOESPLIT_ASSIGN_OR_RETURN(
      synth::ModelSpec spec,
      synth::BuildTensorTable({.preset = preset, .layers = layers, .quant = mix}));
  const synth::ModelHparams& h = spec.hp;
  Dims d;
  d.arch = SynthArchName(h.arch);
  d.n_layers = h.n_layer, d.n_embd = h.n_embd, d.n_vocab = h.n_vocab, d.n_head = h.n_head;
  d.n_expert = h.n_expert, d.n_expert_used = h.n_expert_used;
  d.n_expert_shared = h.n_expert_shared;
  d.mla = h.arch == synth::Arch::kDeepseek2;
  d.kv_lora = h.kv_lora, d.qk_rope = h.qk_rope;
  d.n_head_kv = h.n_head_kv, d.head_dim_k = h.head_dim, d.head_dim_v = h.head_dim;
  std::vector<TensorRow> rows;
  rows.reserve(spec.tensors.size());
  for (const synth::TensorSpec& t : spec.tensors) {
    TensorRow r{t.name, {1, 1, 1}, t.Bytes(), static_cast<uint64_t>(t.NumElements()), t.type};
    for (size_t i = 0; i < t.ne.size() && i < 3; ++i) r.ne[i] = t.ne[i];
    rows.push_back(r);
  }
  numa::ModelShape s = BuildShape(d, rows);
  if (tensors != nullptr) {
    for (const TensorRow& r : rows) tensors->push_back({std::string(r.name), r.bytes});
  }
  s.name = preset;
  s.quant = synth::QuantMixName(mix);
  return s;
}

}  // namespace moesplit::app
