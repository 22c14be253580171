#include "core/synth/quant_mix.h"

#include <algorithm>
#include <cstdio>
#include <string>
#include <string_view>

#include "core/base/status.h"

namespace moesplit::synth {
namespace {

bool Contains(std::string_view s, std::string_view part) {
  return s.find(part) != std::string_view::npos;
}
bool EndsWith(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

// llama-quant.cpp's tensor categories, matched by substring in the same order.
enum class Category {
  kOutput,
  kTokenEmbd,
  kAttnVLike,
  kAttnK,
  kAttnQ,
  kAttnOutput,
  kFfnDown,
  kOther
};

Category CategoryOf(std::string_view name) {
  if (name == "output.weight") return Category::kOutput;
  if (name == "token_embd.weight") return Category::kTokenEmbd;
  if (Contains(name, "attn_qkv.weight") || Contains(name, "attn_kv_b.weight") ||
      Contains(name, "attn_v.weight")) {
    return Category::kAttnVLike;
  }
  if (Contains(name, "attn_k.weight")) return Category::kAttnK;
  if (Contains(name, "attn_q.weight")) return Category::kAttnQ;
  if (Contains(name, "attn_output.weight")) return Category::kAttnOutput;
  if (Contains(name, "ffn_up") || Contains(name, "ffn_gate")) return Category::kOther;
  if (Contains(name, "ffn_down")) return Category::kFfnDown;
  return Category::kOther;
}

// First/last eighth of the layers and every third layer in between get more bits:
// n = 61 -> layers 0..6, 53..60 and 9, 12, 15, ...
bool UseMoreBits(int64_t i_layer, int64_t n_layer) {
  return i_layer < n_layer / 8 || i_layer >= 7 * n_layer / 8 || (i_layer - n_layer / 8) % 3 == 2;
}

int64_t LayerOf(const std::string& name) {
  int layer = -1;
  MOESPLIT_CHECK(std::sscanf(name.c_str(), "blk.%d.", &layer) == 1, "no layer in ", name);
  return layer;
}

// Ensures ne[0] holds whole blocks of the chosen type (tensor_type_fallback).
GgmlType Fallback(GgmlType t, int64_t ne0) {
  if (ne0 % GetTypeTraits(t).block_size == 0) return t;
  GgmlType r = GgmlType::kF16;
  switch (t) {
    case GgmlType::kQ4_K:
      r = GgmlType::kQ5_0;
      break;
    case GgmlType::kQ5_K:
      r = GgmlType::kQ5_1;
      break;
    case GgmlType::kQ6_K:
      r = GgmlType::kQ8_0;
      break;
    case GgmlType::kQ2_K:
    case GgmlType::kQ3_K:
      r = GgmlType::kQ4_0;
      break;
    case GgmlType::kIQ4_XS:
    case GgmlType::kIQ2_XXS:
    case GgmlType::kIQ2_XS:
    case GgmlType::kIQ2_S:
    case GgmlType::kIQ3_XXS:
    case GgmlType::kIQ3_S:
    case GgmlType::kIQ1_S:
    case GgmlType::kIQ1_M:
      r = GgmlType::kIQ4_NL;
      break;
    default:
      r = GgmlType::kF16;
      break;
  }
  return ne0 % GetTypeTraits(r).block_size == 0 ? r : GgmlType::kF16;
}

struct Q4KMState {
  int64_t n_layer = 0;
  int64_t n_expert = 0;
  int64_t n_attn_wv = 0;  // number of attn_v-like tensors in the model
  int64_t i_attn_wv = 0;  // how many were seen so far
};

GgmlType Q4KMType(const TensorSpec& t, Q4KMState* s) {
  GgmlType type = GgmlType::kQ4_K;
  switch (CategoryOf(t.name)) {
    case Category::kOutput:
      type = t.ne[0] % 256 != 0 ? GgmlType::kQ8_0 : GgmlType::kQ6_K;
      break;
    case Category::kAttnVLike:
      if (UseMoreBits(s->i_attn_wv, s->n_attn_wv)) type = GgmlType::kQ6_K;
      if (s->n_expert == 8) type = GgmlType::kQ8_0;
      ++s->i_attn_wv;
      break;
    case Category::kAttnK:
      if (s->n_expert == 8) type = GgmlType::kQ8_0;
      break;
    case Category::kAttnOutput:
      if (s->n_expert == 8) type = GgmlType::kQ5_K;
      break;
    case Category::kFfnDown:
      if (UseMoreBits(LayerOf(t.name), s->n_layer)) type = GgmlType::kQ6_K;
      break;
    case Category::kTokenEmbd:
    case Category::kAttnQ:
    case Category::kOther:
      break;
  }
  return type;
}

// IQ4_XS without an importance matrix (llama_tensor_get_type for LLAMA_FTYPE_MOSTLY_IQ4_XS):
// default IQ4_XS; output Q6_K; attn_v-like Q5_K when n_gqa >= 4 (Q8_0 with 8 experts); 8-expert
// models: attn_k Q8_0, attn_output Q5_K; ffn_down* Q5_K in the first eighth of the layers.
GgmlType IQ4XSType(const TensorSpec& t, const Q4KMState& s, int64_t n_gqa) {
  GgmlType type = GgmlType::kIQ4_XS;
  switch (CategoryOf(t.name)) {
    case Category::kOutput:
      type = t.ne[0] % 256 != 0 ? GgmlType::kQ8_0 : GgmlType::kQ6_K;
      break;
    case Category::kAttnVLike:
      if (n_gqa >= 4) type = GgmlType::kQ5_K;
      if (s.n_expert == 8) type = GgmlType::kQ8_0;
      break;
    case Category::kAttnK:
      if (s.n_expert == 8) type = GgmlType::kQ8_0;
      break;
    case Category::kAttnOutput:
      if (s.n_expert == 8) type = GgmlType::kQ5_K;
      break;
    case Category::kFfnDown:
      if (LayerOf(t.name) < s.n_layer / 8) type = GgmlType::kQ5_K;
      break;
    case Category::kTokenEmbd:
    case Category::kAttnQ:
    case Category::kOther:
      break;
  }
  return type;
}

// llama-quantize Q3_K_M without an importance matrix (LLAMA_FTYPE_MOSTLY_Q3_K_M, any arch but
// Falcon): default Q3_K; output Q6_K; attn_v-like Q5_K for the first two such tensors, Q4_K
// after (Q8_0 with 8 experts); attn_k Q8_0 with 8 experts; attn_output Q4_K (Q5_K with 8
// experts); ffn_down* Q5_K in layers < n_layer / 16, Q4_K in the others. So DeepSeek's routed
// experts are Q3_K gate / up with a Q4_K down projection (bartowski's Q3_K_M files).
GgmlType Q3KMType(const TensorSpec& t, Q4KMState* s) {
  GgmlType type = GgmlType::kQ3_K;
  switch (CategoryOf(t.name)) {
    case Category::kOutput:
      type = t.ne[0] % 256 != 0 ? GgmlType::kQ8_0 : GgmlType::kQ6_K;
      break;
    case Category::kAttnVLike:
      type = s->i_attn_wv < 2 ? GgmlType::kQ5_K : GgmlType::kQ4_K;
      if (s->n_expert == 8) type = GgmlType::kQ8_0;
      ++s->i_attn_wv;
      break;
    case Category::kAttnK:
      if (s->n_expert == 8) type = GgmlType::kQ8_0;
      break;
    case Category::kAttnOutput:
      type = s->n_expert == 8 ? GgmlType::kQ5_K : GgmlType::kQ4_K;
      break;
    case Category::kFfnDown:
      type = LayerOf(t.name) < s->n_layer / 16 ? GgmlType::kQ5_K : GgmlType::kQ4_K;
      break;
    case Category::kTokenEmbd:
    case Category::kAttnQ:
    case Category::kOther:
      break;
  }
  return type;
}

// Q4_0 with an importance matrix (llama_tensor_get_type for LLAMA_FTYPE_MOSTLY_Q4_0 when
// llama-quantize is given --imatrix, as bartowski's DeepSeek Q4_0 files are made): default Q4_0;
// output Q6_K; every ffn_down (the routed experts' and shared experts' included) of the layers <
// n_layer / 8 Q4_1 (llama.cpp's guard against "craziness in the first few ffn_down layers");
// 8-expert models: attn_v-like and attn_k Q8_0. The types only: make-model's values come from the
// no-imatrix quantizers.
GgmlType Q4_0Type(const TensorSpec& t, int64_t n_layer, int64_t n_expert) {
  switch (CategoryOf(t.name)) {
    case Category::kOutput:
      return t.ne[0] % 256 != 0 ? GgmlType::kQ8_0 : GgmlType::kQ6_K;
    case Category::kAttnVLike:
    case Category::kAttnK:
      return n_expert == 8 ? GgmlType::kQ8_0 : GgmlType::kQ4_0;
    case Category::kFfnDown:
      return LayerOf(t.name) < n_layer / 8 ? GgmlType::kQ4_1 : GgmlType::kQ4_0;
    default:
      return GgmlType::kQ4_0;
  }
}

// A mix like Unsloth's UD-Q2_K_XL DeepSeek files (theirs comes from an importance matrix and
// per-tensor tuning; this is its shape, not its recipe): the routed experts' gate / up Q2_K and
// their down projection Q2_K, Q3_K in the first and last eighth of the layers; everything the
// GPU would hold at more bits: attention Q4_K (attn_v-like Q6_K), the shared experts and the
// leading dense layers' FFN Q4_K gate / up and Q6_K down, token_embd Q4_K, output Q6_K.
GgmlType UdQ2KXLType(const TensorSpec& t, int64_t n_layer) {
  const Category c = CategoryOf(t.name);
  if (c == Category::kOutput) return t.ne[0] % 256 != 0 ? GgmlType::kQ8_0 : GgmlType::kQ6_K;
  if (c == Category::kTokenEmbd) return GgmlType::kQ4_K;
  if (c == Category::kAttnVLike) return GgmlType::kQ6_K;
  const bool down = Contains(t.name, "ffn_down");
  if (Contains(t.name, "_exps.weight")) {
    if (!down) return GgmlType::kQ2_K;
    const int64_t layer = LayerOf(t.name);
    return layer < n_layer / 8 || layer >= 7 * n_layer / 8 ? GgmlType::kQ3_K : GgmlType::kQ2_K;
  }
  if (Contains(t.name, "ffn_")) return down ? GgmlType::kQ6_K : GgmlType::kQ4_K;  // shexp, dense
  return GgmlType::kQ4_K;
}

// The shape of Unsloth's dynamic DeepSeek quants UD-IQ2_XXS / UD-IQ1_M / UD-IQ1_S (their
// "DeepSeek R1 dynamic 1.58-bit" write-up: only the routed experts go to 1.5-2 bits; the 3
// leading dense layers stay 4 or 6 bit, the shared experts 6 bit, all MLA attention 4 or 6 bit,
// token_embd 4 bit, output (lm_head) 6 bit, router and norms F32; ffn_down is the most
// sensitive, so its routed experts are coded higher in the first MoE layers; their table: down
// 2.06/1.56 bit for IQ1_S, 2.06 bit for IQ1_M, 2.5/2.06 bit for IQ2_XXS). Theirs also come from
// an importance matrix and per-tensor tuning; this is the shape only:
//   routed gate / up (ffn_*_exps): `experts`;
//   routed down (ffn_down_exps): `down_early` in the first kUdEarlyMoeLayers MoE layers,
//     `down_rest` after (UD-IQ2_XXS: Q2_K then IQ2_XXS; UD-IQ1_M: IQ2_XXS throughout; UD-IQ1_S:
//     IQ2_XXS then IQ1_S);
//   shared experts (ffn_*_shexp) Q6_K; dense layers' FFN gate / up Q4_K, down Q6_K;
//   attention Q4_K, attn_v-like (attn_kv_b / attn_v) Q6_K; token_embd Q4_K; output Q6_K;
// every type here is one moesplit already has fast kernels for, except the three lattice types.
struct UdIqRecipe {
  GgmlType experts;
  GgmlType down_early;
  GgmlType down_rest;
};
constexpr int64_t kUdEarlyMoeLayers = 3;  // the write-up: "the first 3 to 6 MoE down_proj"

UdIqRecipe UdIqRecipeOf(QuantMix mix) {
  switch (mix) {
    case QuantMix::kUdIQ2_XXS:
      return {GgmlType::kIQ2_XXS, GgmlType::kQ2_K, GgmlType::kIQ2_XXS};
    case QuantMix::kUdIQ1_M:
      return {GgmlType::kIQ1_M, GgmlType::kIQ2_XXS, GgmlType::kIQ2_XXS};
    case QuantMix::kUdIQ1_S:
      return {GgmlType::kIQ1_S, GgmlType::kIQ2_XXS, GgmlType::kIQ1_S};
    default:
      MOESPLIT_CHECK(false, "not a UD-IQ mix");
  }
  return {};
}

// first_moe_layer: the lowest layer with routed experts (DeepSeek: leading_dense_block_count).
GgmlType UdIqType(const TensorSpec& t, const UdIqRecipe& r, int64_t first_moe_layer) {
  const Category c = CategoryOf(t.name);
  if (c == Category::kOutput) return t.ne[0] % 256 != 0 ? GgmlType::kQ8_0 : GgmlType::kQ6_K;
  if (c == Category::kTokenEmbd) return GgmlType::kQ4_K;
  if (c == Category::kAttnVLike) return GgmlType::kQ6_K;
  const bool down = Contains(t.name, "ffn_down");
  if (Contains(t.name, "_exps.weight")) {
    if (!down) return r.experts;
    return LayerOf(t.name) < first_moe_layer + kUdEarlyMoeLayers ? r.down_early : r.down_rest;
  }
  if (Contains(t.name, "_shexp.weight")) return GgmlType::kQ6_K;
  if (Contains(t.name, "ffn_")) return down ? GgmlType::kQ6_K : GgmlType::kQ4_K;  // dense
  return GgmlType::kQ4_K;
}

// llama-quantize's IQ2_XS / IQ2_M / IQ3_XXS / IQ3_M (llama_tensor_get_type_impl, with an
// importance matrix: the IQ2 types and IQ3_XXS need one, and make-model's quantizers weigh as an
// all-ones one would), the mixes bartowski publishes for DeepSeek-V3 / R1. Default type IQ2_XS /
// IQ2_S / IQ3_XXS / IQ3_S. For a DeepSeek model (many experts, MLA names: attn_q_a / attn_q_b /
// attn_kv_a_mqa match no rule) that gives:
//   output Q5_K (IQ3_M: Q6_K); token_embd Q2_K / IQ3_S / IQ3_S / IQ3_S;
//   attn_kv_b (attn_v-like) Q4_K (IQ3_XXS: Q4_K when n_gqa >= 4, else IQ3_XXS);
//   attn_output IQ2_XS / IQ3_S / IQ3_S / Q4_K (Q5_K with 8 experts);
//   ffn_down*: IQ2: the first n_layer / 8 ffn_down tensors in llama's order (`down_rank`: by
//   layer, then name) Q2_K (IQ2_M: IQ3_S); IQ3_M: every ffn_down in layers < n_layer / 8 Q4_K;
//   everything else, the routed experts included, the default type.
GgmlType LlamaIqType(QuantMix mix, const TensorSpec& t, int64_t down_rank, int64_t n_layer,
                     int64_t n_expert, int64_t n_gqa) {
  const bool iq2 = mix == QuantMix::kIQ2_XS || mix == QuantMix::kIQ2_M;
  const bool m2 = mix == QuantMix::kIQ2_M, xxs3 = mix == QuantMix::kIQ3_XXS;
  const GgmlType base = mix == QuantMix::kIQ2_XS ? GgmlType::kIQ2_XS
                        : m2                     ? GgmlType::kIQ2_S
                        : xxs3                   ? GgmlType::kIQ3_XXS
                                                 : GgmlType::kIQ3_S;
  switch (CategoryOf(t.name)) {
    case Category::kOutput:
      if (t.ne[0] % 256 != 0) return GgmlType::kQ8_0;
      return iq2 || xxs3 ? GgmlType::kQ5_K : GgmlType::kQ6_K;
    case Category::kTokenEmbd:
      return mix == QuantMix::kIQ2_XS ? GgmlType::kQ2_K : GgmlType::kIQ3_S;
    case Category::kAttnVLike:
      if (iq2)
        return n_gqa >= 4 || n_expert >= 4 ? GgmlType::kQ4_K
               : m2                        ? GgmlType::kIQ3_S
                                           : GgmlType::kQ2_K;
      if (n_expert == 8) return GgmlType::kQ8_0;
      if (xxs3) return n_gqa >= 4 ? GgmlType::kQ4_K : GgmlType::kIQ3_XXS;
      return GgmlType::kQ4_K;
    case Category::kAttnK:
      if (iq2) return n_expert == 8 ? GgmlType::kQ4_K : base;
      return n_expert == 8 ? GgmlType::kQ8_0 : xxs3 ? GgmlType::kIQ2_S : base;
    case Category::kAttnQ:
      return xxs3 ? GgmlType::kIQ2_S : base;
    case Category::kAttnOutput:
      if (n_expert == 8) return GgmlType::kQ5_K;
      return m2 || xxs3 ? GgmlType::kIQ3_S : mix == QuantMix::kIQ3_M ? GgmlType::kQ4_K : base;
    case Category::kFfnDown:
      if (iq2) return down_rank < n_layer / 8 ? (m2 ? GgmlType::kIQ3_S : GgmlType::kQ2_K) : base;
      if (mix == QuantMix::kIQ3_M) {
        const int64_t layer = LayerOf(t.name);
        if (layer < n_layer / 8 || (n_expert == 8 && UseMoreBits(layer, n_layer))) {
          return GgmlType::kQ4_K;
        }
      }
      return base;
    case Category::kOther:
      return base;
  }
  return base;
}

// Each ffn_down tensor's rank in the order llama-quantize visits tensors (its weight map sorts by
// layer, then by name: blk.3.ffn_down_exps before blk.3.ffn_down_shexp), by position in
// `tensors`; -1 for the others.
std::vector<int64_t> FfnDownRanks(const std::vector<TensorSpec>& tensors) {
  std::vector<size_t> order;
  for (size_t i = 0; i < tensors.size(); ++i) {
    if (!KeepsSourceType(tensors[i]) && CategoryOf(tensors[i].name) == Category::kFfnDown) {
      order.push_back(i);
    }
  }
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    const int64_t la = LayerOf(tensors[a].name), lb = LayerOf(tensors[b].name);
    return la != lb ? la < lb : tensors[a].name < tensors[b].name;
  });
  std::vector<int64_t> rank(tensors.size(), -1);
  for (size_t r = 0; r < order.size(); ++r) rank[order[r]] = static_cast<int64_t>(r);
  return rank;
}

// The lowest layer holding routed experts, or n_layer if none does.
int64_t FirstMoeLayer(const std::vector<TensorSpec>& tensors, int64_t n_layer) {
  int64_t first = n_layer;
  for (const TensorSpec& t : tensors) {
    if (Contains(t.name, "_exps.weight")) first = std::min(first, LayerOf(t.name));
  }
  return first;
}

}  // namespace

bool KeepsSourceType(const TensorSpec& t) {
  return t.ne.size() < 2 || !EndsWith(t.name, "weight") || Contains(t.name, "_norm.weight") ||
         Contains(t.name, "ffn_gate_inp.weight");
}

void AssignTypes(QuantMix mix, int64_t n_layer, int64_t n_expert, int64_t n_gqa,
                 std::vector<TensorSpec>* tensors) {
  Q4KMState state{n_layer, n_expert, 0, 0};
  const int64_t first_moe_layer = FirstMoeLayer(*tensors, n_layer);
  const std::vector<int64_t> down_rank = FfnDownRanks(*tensors);
  for (const TensorSpec& t : *tensors) {
    if (!KeepsSourceType(t) && CategoryOf(t.name) == Category::kAttnVLike) ++state.n_attn_wv;
  }
  for (size_t i = 0; i < tensors->size(); ++i) {
    TensorSpec& t = (*tensors)[i];
    if (KeepsSourceType(t)) {
      t.type = GgmlType::kF32;
      continue;
    }
    switch (mix) {
      case QuantMix::kF16:
        t.type = GgmlType::kF16;
        break;
      case QuantMix::kBF16:
        t.type = GgmlType::kBF16;
        break;
      case QuantMix::kQ8_0:
        t.type = Fallback(GgmlType::kQ8_0, t.ne[0]);
        break;
      case QuantMix::kQ4_K_M:
        t.type = Fallback(Q4KMType(t, &state), t.ne[0]);
        break;
      case QuantMix::kIQ4_XS:
        t.type = Fallback(IQ4XSType(t, state, n_gqa), t.ne[0]);
        break;
      case QuantMix::kQ3_K_M:
        t.type = Fallback(Q3KMType(t, &state), t.ne[0]);
        break;
      case QuantMix::kUdQ2_K_XL:
        t.type = Fallback(UdQ2KXLType(t, n_layer), t.ne[0]);
        break;
      case QuantMix::kMXFP4_MOE:
        t.type = Fallback(Contains(t.name, "_exps.weight") ? GgmlType::kMXFP4 : GgmlType::kQ8_0,
                          t.ne[0]);
        break;
      case QuantMix::kQ4_0:
        t.type = Fallback(Q4_0Type(t, n_layer, n_expert), t.ne[0]);
        break;
      case QuantMix::kUdIQ2_XXS:
      case QuantMix::kUdIQ1_S:
      case QuantMix::kUdIQ1_M:
        t.type = Fallback(UdIqType(t, UdIqRecipeOf(mix), first_moe_layer), t.ne[0]);
        break;
      case QuantMix::kIQ2_XS:
      case QuantMix::kIQ2_M:
      case QuantMix::kIQ3_XXS:
      case QuantMix::kIQ3_M:
        t.type = Fallback(LlamaIqType(mix, t, down_rank[i], n_layer, n_expert, n_gqa), t.ne[0]);
        break;
    }
  }
}

}  // namespace moesplit::synth
