// Dispatch of the reference row (de)quantizers by GgmlType, and the plain float types.
#include "cpu_kernels/quant/quant.h"

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "core/base/float16.h"
#include "core/base/status.h"
#include "cpu_kernels/quant/quant_internal.h"

namespace moesplit::quant {
namespace {

using DequantFn = void (*)(const void* src, float* dst, int64_t nb);
using QuantFn = void (*)(const float* src, void* dst, int64_t nb);

// F32 / F16 / BF16 are "blocks" of one value.
void DequantF32(const void* src, float* dst, int64_t n) { std::memcpy(dst, src, n * 4); }
void QuantF32(const float* src, void* dst, int64_t n) { std::memcpy(dst, src, n * 4); }

void DequantF16(const void* src, float* dst, int64_t n) {
  const auto* h = static_cast<const uint16_t*>(src);
  for (int64_t i = 0; i < n; ++i) dst[i] = Fp16ToFp32(h[i]);
}
void QuantF16(const float* src, void* dst, int64_t n) {
  auto* h = static_cast<uint16_t*>(dst);
  for (int64_t i = 0; i < n; ++i) h[i] = Fp32ToFp16(src[i]);
}

void DequantBF16(const void* src, float* dst, int64_t n) {
  const auto* h = static_cast<const uint16_t*>(src);
  for (int64_t i = 0; i < n; ++i) dst[i] = Bf16ToFp32(h[i]);
}
void QuantBF16(const float* src, void* dst, int64_t n) {
  auto* h = static_cast<uint16_t*>(dst);
  for (int64_t i = 0; i < n; ++i) h[i] = Fp32ToBf16(src[i]);
}

struct RowKernels {
  GgmlType type;
  DequantFn dequant;  // never null in the table
  QuantFn quant;      // null where no reference quantizer exists
  size_t align;       // alignof the block struct: the kernels access blocks in place
};

using T = GgmlType;
namespace in = internal;
constexpr RowKernels kKernels[] = {
    {T::kF32, DequantF32, QuantF32, 4},
    {T::kF16, DequantF16, QuantF16, 2},
    {T::kBF16, DequantBF16, QuantBF16, 2},
    {T::kQ4_0, in::DequantQ4_0, in::QuantQ4_0, 2},
    {T::kQ4_1, in::DequantQ4_1, in::QuantQ4_1, 2},
    {T::kQ5_0, in::DequantQ5_0, in::QuantQ5_0, 2},
    {T::kQ5_1, in::DequantQ5_1, in::QuantQ5_1, 2},
    {T::kQ8_0, in::DequantQ8_0, in::QuantQ8_0, 2},
    {T::kQ2_K, in::DequantQ2_K, in::QuantQ2_K, 2},
    {T::kQ3_K, in::DequantQ3_K, in::QuantQ3_K, 2},
    {T::kQ4_K, in::DequantQ4_K, in::QuantQ4_K, 2},
    {T::kQ5_K, in::DequantQ5_K, in::QuantQ5_K, 2},
    {T::kQ6_K, in::DequantQ6_K, in::QuantQ6_K, 2},
    {T::kQ8_K, in::DequantQ8_K, in::QuantQ8_K, 4},
    {T::kIQ4_NL, in::DequantIQ4_NL, in::QuantIQ4_NL, 2},
    {T::kIQ4_XS, in::DequantIQ4_XS, in::QuantIQ4_XS, 2},
    // The lattice types and MXFP4 (see kDecodeOnly). The lattice quantizers follow ggml's with a
    // flat importance matrix (MXFP4 needs none), so that make-model can write them as
    // llama-quantize does with an all-ones imatrix (quant_iq2.cc, quant_iq23.cc, quant_iq1.cc).
    {T::kIQ2_XXS, in::DequantIQ2_XXS, in::QuantIQ2_XXS, 2},
    {T::kIQ2_XS, in::DequantIQ2_XS, in::QuantIQ2_XS, 2},
    {T::kIQ2_S, in::DequantIQ2_S, in::QuantIQ2_S, 2},
    {T::kIQ3_XXS, in::DequantIQ3_XXS, in::QuantIQ3_XXS, 2},
    {T::kIQ3_S, in::DequantIQ3_S, in::QuantIQ3_S, 2},
    {T::kIQ1_S, in::DequantIQ1_S, in::QuantIQ1_S, 2},
    {T::kIQ1_M, in::DequantIQ1_M, in::QuantIQ1_M, 1},
    {T::kMXFP4, in::DequantMXFP4, in::QuantMXFP4, 1},
};

// Types decoded for inspection and tests only: no kernel computes with them (quant.h).
constexpr GgmlType kDecodeOnly[] = {T::kIQ2_XXS, T::kIQ2_XS, T::kIQ2_S, T::kIQ3_XXS,
                                    T::kIQ3_S,   T::kIQ1_S,  T::kIQ1_M, T::kMXFP4};

const RowKernels* Find(GgmlType type) {
  for (const RowKernels& k : kKernels) {
    if (k.type == type) return &k;
  }
  return nullptr;
}

// Number of blocks in n values; CHECKs divisibility.
int64_t BlockCount(GgmlType type, int64_t n) {
  const TypeTraits& tr = GetTypeTraits(type);
  MOESPLIT_CHECK(n >= 0 && n % tr.block_size == 0, tr.name, ": ", n,
                 " values is not a multiple of the block size ", tr.block_size);
  return n / tr.block_size;
}

void CheckAligned(const RowKernels& k, const void* blocks) {
  MOESPLIT_CHECK(reinterpret_cast<uintptr_t>(blocks) % k.align == 0, TypeName(k.type),
                 " blocks must be ", k.align, "-byte aligned");
}

}  // namespace

bool CanDequantize(GgmlType type) { return Find(type) != nullptr; }

bool IsDecodeOnly(GgmlType type) {
  for (GgmlType t : kDecodeOnly) {
    if (t == type) return true;
  }
  return false;
}

bool CanQuantize(GgmlType type) {
  const RowKernels* k = Find(type);
  return k != nullptr && k->quant != nullptr;
}

void DequantizeRow(GgmlType type, const void* src, float* dst, int64_t n) {
  const RowKernels* k = Find(type);
  MOESPLIT_CHECK(k != nullptr, "no reference dequantizer for ", TypeName(type));
  CheckAligned(*k, src);
  const int64_t nb = BlockCount(type, n);
  if (nb > 0) k->dequant(src, dst, nb);
}

void QuantizeRow(GgmlType type, const float* src, void* dst, int64_t n) {
  const RowKernels* k = Find(type);
  MOESPLIT_CHECK(k != nullptr && k->quant != nullptr, "no reference quantizer for ",
                 TypeName(type));
  CheckAligned(*k, dst);
  const int64_t nb = BlockCount(type, n);
  if (nb > 0) k->quant(src, dst, nb);
}

}  // namespace moesplit::quant
