// Per-type reference kernels behind quant.h's dispatch. Internal to quant/.
//
// Every function works on `nb` whole blocks: `src`/`dst` point at nb blocks (the block struct of
// the type, see blocks.h) and at nb * block_size floats.
#pragma once

#include <cstdint>

namespace moesplit::quant::internal {

// dequant_legacy.cc
void DequantQ4_0(const void* src, float* dst, int64_t nb);
void DequantQ4_1(const void* src, float* dst, int64_t nb);
void DequantQ5_0(const void* src, float* dst, int64_t nb);
void DequantQ5_1(const void* src, float* dst, int64_t nb);
void DequantQ8_0(const void* src, float* dst, int64_t nb);

// dequant_kquants.cc
void DequantQ2_K(const void* src, float* dst, int64_t nb);
void DequantQ3_K(const void* src, float* dst, int64_t nb);
void DequantQ4_K(const void* src, float* dst, int64_t nb);
void DequantQ5_K(const void* src, float* dst, int64_t nb);
void DequantQ6_K(const void* src, float* dst, int64_t nb);
void DequantQ8_K(const void* src, float* dst, int64_t nb);

// quant_legacy.cc
void QuantQ4_0(const float* src, void* dst, int64_t nb);
void QuantQ4_1(const float* src, void* dst, int64_t nb);
void QuantQ5_0(const float* src, void* dst, int64_t nb);
void QuantQ5_1(const float* src, void* dst, int64_t nb);
void QuantQ8_0(const float* src, void* dst, int64_t nb);

// quant_kquants.cc (Q4_K, Q5_K, Q6_K, Q8_K) and quant_kquants_low.cc (Q2_K, Q3_K)
void QuantQ2_K(const float* src, void* dst, int64_t nb);
void QuantQ3_K(const float* src, void* dst, int64_t nb);
void QuantQ4_K(const float* src, void* dst, int64_t nb);
void QuantQ5_K(const float* src, void* dst, int64_t nb);
void QuantQ6_K(const float* src, void* dst, int64_t nb);
void QuantQ8_K(const float* src, void* dst, int64_t nb);

// quant_iq4.cc (IQ4_NL, IQ4_XS: dequantization and the no-importance-matrix quantizers)
void DequantIQ4_NL(const void* src, float* dst, int64_t nb);
void DequantIQ4_XS(const void* src, float* dst, int64_t nb);
void QuantIQ4_NL(const float* src, void* dst, int64_t nb);
void QuantIQ4_XS(const float* src, void* dst, int64_t nb);

// dequant_iq.cc (decode only: the lattice types and MXFP4, blocks_iq.h)
void DequantIQ2_XXS(const void* src, float* dst, int64_t nb);
void DequantIQ2_XS(const void* src, float* dst, int64_t nb);
void DequantIQ2_S(const void* src, float* dst, int64_t nb);
void DequantIQ3_XXS(const void* src, float* dst, int64_t nb);
void DequantIQ3_S(const void* src, float* dst, int64_t nb);
void DequantIQ1_S(const void* src, float* dst, int64_t nb);
void DequantIQ1_M(const void* src, float* dst, int64_t nb);
void DequantMXFP4(const void* src, float* dst, int64_t nb);
// quant_iq4.cc: ggml's quantize_row_mxfp4_ref.
void QuantMXFP4(const float* src, void* dst, int64_t nb);

// quant_iq2.cc, quant_iq1.cc: ggml's lattice quantizers run with a flat importance matrix (all
// weights 1.0; llama.cpp refuses these types without one), grid-neighbour maps in
// quant_iq_lattice.h. QuantIQ1_MNoImatrix: ggml's IQ1_M without an importance matrix (weights
// x^2), the weighting of the iq1_m oracle file; not in the dispatch table.
void QuantIQ2_XXS(const float* src, void* dst, int64_t nb);
void QuantIQ1_S(const float* src, void* dst, int64_t nb);
void QuantIQ1_M(const float* src, void* dst, int64_t nb);
void QuantIQ1_MNoImatrix(const float* src, void* dst, int64_t nb);
// quant_iq23.cc: IQ2_XS, IQ2_S, IQ3_XXS and IQ3_S with a flat importance matrix
// (llama-quantize's bytes given an all-ones imatrix); the *NoImatrix variants are ggml's
// quantize_row_*_ref (the oracle files).
void QuantIQ2_XS(const float* src, void* dst, int64_t nb);
void QuantIQ2_S(const float* src, void* dst, int64_t nb);
void QuantIQ2_SNoImatrix(const float* src, void* dst, int64_t nb);
void QuantIQ3_XXS(const float* src, void* dst, int64_t nb);
void QuantIQ3_XXSNoImatrix(const float* src, void* dst, int64_t nb);
void QuantIQ3_S(const float* src, void* dst, int64_t nb);
void QuantIQ3_SNoImatrix(const float* src, void* dst, int64_t nb);

}  // namespace moesplit::quant::internal
