// Reference (scalar) quantization and dequantization of ggml's block formats. Dequantization is
// bit-exact with ggml's `to_float`, quantization byte-identical with ggml's `_ref` quantizers
// (tests/cpu_kernels/quant_oracle_test.cc); these are the twins every SIMD kernel is tested
// against. Block layouts: blocks.h.
#pragma once

#include <cstdint>

#include "core/base/dtype.h"

namespace moesplit::quant {

// True for F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, Q8_K,
// IQ4_NL, IQ4_XS, and the decode-only IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS, IQ3_S, IQ1_S, IQ1_M,
// MXFP4.
bool CanDequantize(GgmlType type);
// True for the 8 decode-only types above: their dequantizer serves `inspect --values` and the
// oracle tests; no GPU kernel computes with them. All eight have CPU kernels (gemv: a model with
// them loads and runs on the CPU). Four of them (IQ2_XXS, IQ1_S, IQ1_M, MXFP4) have a
// quantizer, so `make-model` can write files in those types.
bool IsDecodeOnly(GgmlType type);
// True for the first 16 types and for IQ2_XXS, IQ1_S, IQ1_M, MXFP4. Each follows ggml's
// quantize_row_*_ref (f16/bf16: RNE; IQ4_NL / IQ4_XS: llama.cpp's no-importance-matrix path,
// quantize_iq4_* with no quant_weights; IQ2_XXS / IQ1_S / IQ1_M: quantize_iq2_xxs /
// quantize_iq1_s / quantize_iq1_m with a flat importance matrix, all weights 1.0, what
// llama-quantize does given an all-ones imatrix: it has no path without one; MXFP4:
// quantize_row_mxfp4_ref, nearest level under the largest magnitude's exponent). The bytes are
// checked identical to llama.cpp's for the 16 types with oracle files made that way; IQ1_M's
// oracle was made without an imatrix and is matched by an internal variant; Q8_K (ggml's
// activation quantizer) has no oracle file and is checked by its properties.
bool CanQuantize(GgmlType type);

// dst[0..n) = values of the n elements at src. n must be a multiple of the block size
// (CHECKed); `type` must satisfy CanDequantize (CHECKed); src must be aligned like the block
// (2 bytes, 4 for F32 and Q8_K; CHECKed).
void DequantizeRow(GgmlType type, const void* src, float* dst, int64_t n);

// Writes RowBytes(type, n) bytes of blocks encoding src[0..n) to dst. Same preconditions with
// CanQuantize. Deterministic (no importance matrix, or a flat one, see CanQuantize).
void QuantizeRow(GgmlType type, const float* src, void* dst, int64_t n);

}  // namespace moesplit::quant
