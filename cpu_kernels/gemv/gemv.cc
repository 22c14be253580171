#include "cpu_kernels/gemv/gemv.h"

#include "core/base/status.h"
#include "cpu_kernels/gemv/gemv_internal.h"
#include "cpu_kernels/quant/quant.h"

namespace moesplit::gemv {
namespace {

// Activation quantization is the reference one on every tier for now: it runs once per token
// row, against rows x n weight reads.
void QuantizeQ8K(const float* x, void* dst, int64_t n) {
  quant::QuantizeRow(GgmlType::kQ8_K, x, dst, n);
}
void QuantizeQ8_0(const float* x, void* dst, int64_t n) {
  quant::QuantizeRow(GgmlType::kQ8_0, x, dst, n);
}

constexpr GemvKernels kScalar = {cpu::IsaTier::kScalar, internal::DotQ4K_Q8K_Scalar,
                                 internal::DotQ8_0_Q8_0_Scalar, QuantizeQ8K, QuantizeQ8_0};
#if defined(MOESPLIT_GEMV_X86)
constexpr GemvKernels kAvx2 = {cpu::IsaTier::kAvx2, internal::DotQ4K_Q8K_Avx2,
                               internal::DotQ8_0_Q8_0_Avx2, QuantizeQ8K, QuantizeQ8_0};
constexpr GemvKernels kAvx512 = {cpu::IsaTier::kAvx512, internal::DotQ4K_Q8K_Avx512,
                                 internal::DotQ8_0_Q8_0_Avx512, QuantizeQ8K, QuantizeQ8_0};
constexpr GemvKernels kAvx512Vnni = {cpu::IsaTier::kAvx512Vnni, internal::DotQ4K_Q8K_Avx512Vnni,
                                     internal::DotQ8_0_Q8_0_Avx512Vnni, QuantizeQ8K, QuantizeQ8_0};
#endif

}  // namespace

const GemvKernels& KernelsFor(cpu::IsaTier tier) {
#if defined(MOESPLIT_GEMV_X86)
  switch (tier) {
    case cpu::IsaTier::kScalar:
      return kScalar;
    case cpu::IsaTier::kAvx2:
      return kAvx2;
    case cpu::IsaTier::kAvx512:
      return kAvx512;
    case cpu::IsaTier::kAvx512Vnni:
      return kAvx512Vnni;
  }
  MOESPLIT_CHECK(false, "bad IsaTier ", static_cast<int>(tier));
#endif
  // Non-x86 builds only have the scalar tier (DetectCpuFeatures reports nothing higher).
  return kScalar;
}

bool ActivationTypeFor(GgmlType weight_type, GgmlType* activation_type) {
  switch (weight_type) {
    case GgmlType::kQ4_K:
      *activation_type = GgmlType::kQ8_K;
      return true;
    case GgmlType::kQ8_0:
      *activation_type = GgmlType::kQ8_0;
      return true;
    default:
      return false;
  }
}

void Gemv(const GemvKernels& kernels, GgmlType weight_type, const void* w, size_t row_stride_bytes,
          int64_t rows, int64_t n, const void* a_q, float* y) {
  DotFn dot = nullptr;
  if (weight_type == GgmlType::kQ4_K) dot = kernels.dot_q4k_q8k;
  if (weight_type == GgmlType::kQ8_0) dot = kernels.dot_q8_0_q8_0;
  MOESPLIT_CHECK(dot != nullptr, "Gemv has no kernel for weight type ", TypeName(weight_type));
  MOESPLIT_CHECK(static_cast<int64_t>(row_stride_bytes) >= RowBytes(weight_type, n), "row stride ",
                 row_stride_bytes, " < row bytes ", RowBytes(weight_type, n));
  const auto* base = static_cast<const uint8_t*>(w);
  for (int64_t r = 0; r < rows; ++r) {
    y[r] = dot(base + static_cast<size_t>(r) * row_stride_bytes, a_q, n);
  }
}

}  // namespace moesplit::gemv
