// Per-tensor type choice of llama.cpp's `llama-quantize` (src/llama-quant.cpp,
// llama_tensor_get_type) for the ftypes make-model offers, re-derived for MoE models:
//  - only tensors with >= 2 dims whose name ends in "weight" are quantized, never "*_norm.weight"
//    nor "ffn_gate_inp.weight" (router): those stay F32 (as the F16 converter output has them);
//  - Q4_K_M: default Q4_K; output.weight Q6_K; attn_v / attn_qkv / attn_kv_b Q6_K on the
//    "use more bits" layers (counted over those tensors); ffn_down* (incl. _exps, _shexp) Q6_K on
//    the use-more-bits layers (layer parsed from the name, out of block_count); 8-expert models:
//    attn_v and attn_k Q8_0, attn_output Q5_K;
//  - IQ4_XS (no importance matrix): default IQ4_XS; output.weight Q6_K; attn_v-like Q5_K when
//    n_head / n_head_kv >= 4; ffn_down* Q5_K in layers < n_layer / 8; 8-expert models: attn_v
//    Q8_0, attn_k Q8_0, attn_output Q5_K (bartowski's IQ4_XS files are this mix, imatrix aside);
//  - Q3_K_M: default Q3_K; output Q6_K; attn_v-like Q5_K for the first two, then Q4_K;
//    attn_output Q4_K; ffn_down* Q5_K in layers < n_layer / 16, else Q4_K; 8-expert models:
//    attn_v and attn_k Q8_0, attn_output Q5_K (file type 12);
//  - UD-Q2_K_XL (the shape of Unsloth's UD-Q2_K_XL DeepSeek files, not their imatrix recipe):
//    routed experts Q2_K, their down projection Q3_K in the first and last eighth of the
//    layers; attention Q4_K (attn_v-like Q6_K); shared experts and dense FFN Q4_K gate / up,
//    Q6_K down; token_embd Q4_K; output Q6_K (file type 10, Q2_K);
//  - UD-IQ2_XXS / UD-IQ1_M / UD-IQ1_S (the shape of Unsloth's dynamic DeepSeek files of those
//    names): routed gate / up IQ2_XXS / IQ1_M / IQ1_S; routed down one step higher in the
//    first 3 MoE layers (Q2_K / IQ2_XXS / IQ2_XXS) and IQ2_XXS / IQ2_XXS / IQ1_S after; shared
//    experts Q6_K; dense FFN Q4_K gate / up, Q6_K down; attention Q4_K (attn_v-like Q6_K);
//    token_embd Q4_K; output Q6_K (file types 19 / 31 / 24); recipe and sources in
//    quant_mix.cc;
//  - IQ2_XS / IQ2_M / IQ3_XXS / IQ3_M (llama-quantize's, with an importance matrix; bartowski's
//    DeepSeek files): default IQ2_XS / IQ2_S / IQ3_XXS / IQ3_S, the routed experts included;
//    output Q5_K (IQ3_M: Q6_K); token_embd Q2_K (IQ2_XS) or IQ3_S; attn_kv_b Q4_K (IQ3_XXS:
//    IQ3_XXS below 4 heads per kv head); attn_output IQ2_XS / IQ3_S / IQ3_S / Q4_K; the first
//    n_layer / 8 ffn_down tensors in llama's order Q2_K / IQ3_S (IQ2 mixes), every ffn_down of
//    layers < n_layer / 8 Q4_K (IQ3_M); attn_q (no q_lora) IQ2_S in IQ3_XXS (file types 20 /
//    29 / 23 / 27; each checked tensor by tensor against llama-quantize, quant_mix.cc);
//  - MXFP4_MOE (llama-quantize's MXFP4_MOE, file type 38, made for gpt-oss): every routed
//    expert tensor (3-D, ffn_*_exps) MXFP4, every other quantized tensor Q8_0;
//  - a K-quant whose ne[0] is not a multiple of 256 falls back: Q4_K->Q5_0, Q5_K->Q5_1,
//    Q6_K->Q8_0, Q2_K / Q3_K->Q4_0, IQ4_XS and the lattice types->IQ4_NL (e.g. DeepSeek's
//    attn_k_b with ne[0] = qk_nope = 128), and to
//    F16 if even that block size (32) does not divide ne[0].
#pragma once

#include <vector>

#include "core/synth/model_spec.h"

namespace moesplit::synth {

// True for the tensors llama-quantize leaves in their source type (F32 here).
bool KeepsSourceType(const TensorSpec& t);

// Sets `type` of every tensor. `tensors` must be in file order (the attn_v counter depends on
// it; the ffn_down counter of the IQ2 mixes sorts as llama-quantize does). n_layer = block_count,
// n_expert = expert_count, n_gqa = head_count / head_count_kv (1 where the model has no kv head
// count).
void AssignTypes(QuantMix mix, int64_t n_layer, int64_t n_expert, int64_t n_gqa,
                 std::vector<TensorSpec>* tensors);

}  // namespace moesplit::synth
