#include "core/model/tensor_role.h"

#include <charconv>

namespace moesplit {
namespace {

bool Contains(std::string_view s, std::string_view part) {
  return s.find(part) != std::string_view::npos;
}

// The part after "blk.N." (or the whole name for global tensors), minus ".weight"/".bias".
std::string_view BaseName(std::string_view name) {
  if (name.starts_with("blk.")) {
    size_t dot = name.find('.', 4);
    if (dot != std::string_view::npos) name.remove_prefix(dot + 1);
  }
  for (std::string_view suffix : {".weight", ".bias"}) {
    if (name.ends_with(suffix)) name.remove_suffix(suffix.size());
  }
  return name;
}

}  // namespace

const char* TensorRoleName(TensorRole role) {
  switch (role) {
    case TensorRole::kRoutedExperts:
      return "routed experts";
    case TensorRole::kSharedExperts:
      return "shared experts";
    case TensorRole::kDenseFfn:
      return "dense FFN";
    case TensorRole::kRouter:
      return "router";
    case TensorRole::kAttention:
      return "attention";
    case TensorRole::kEmbeddings:
      return "embeddings";
    case TensorRole::kOutput:
      return "output (lm_head)";
    case TensorRole::kNorms:
      return "norms";
    case TensorRole::kOther:
      return "other";
  }
  return "other";
}

TensorRole ClassifyTensor(std::string_view name) {
  const std::string_view base = BaseName(name);
  if (base.ends_with("_norm") || base == "norm") return TensorRole::kNorms;
  if (base == "token_embd") return TensorRole::kEmbeddings;
  if (base == "output") return TensorRole::kOutput;
  if (base.ends_with("_exps")) return TensorRole::kRoutedExperts;
  if (base.ends_with("_shexp")) return TensorRole::kSharedExperts;
  if (base == "ffn_gate_inp" || base == "exp_probs_b" || base.starts_with("ffn_gate_inp"))
    return TensorRole::kRouter;
  if (base == "ffn_gate" || base == "ffn_up" || base == "ffn_down") return TensorRole::kDenseFfn;
  if (base.starts_with("attn_")) return TensorRole::kAttention;
  // Legacy per-expert tensors (old Mixtral files): blk.N.ffn_gate.E.weight.
  if (base.starts_with("ffn_") && Contains(base, ".")) return TensorRole::kRoutedExperts;
  return TensorRole::kOther;
}

int LayerOfTensor(std::string_view name) {
  if (!name.starts_with("blk.")) return -1;
  int layer = -1;
  const char* begin = name.data() + 4;
  const char* end = name.data() + name.size();
  auto [ptr, ec] = std::from_chars(begin, end, layer);
  if (ec != std::errc() || ptr == begin) return -1;
  return layer;
}

}  // namespace moesplit
