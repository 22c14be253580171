// Registration of the float-weight kernels (weights F32/F16/BF16, activations plain F32 rows) per
// tier. The AVX-512 VNNI tier takes the AVX-512 kernels: float FMA has no VNNI form.
#include "cpu_kernels/gemv/gemv_internal.h"

namespace moesplit::gemv::internal {

void AddFloatKernels(cpu::IsaTier tier, GemvKernels* k) {
  auto set = [&](GgmlType t, DotFn dot, GemmFn gemm) {
    k->by_type[static_cast<size_t>(t)] = {GgmlType::kF32, dot, gemm};
  };
  switch (tier) {
    case cpu::IsaTier::kScalar:
      set(GgmlType::kF32, DotF32_F32_Scalar, GemmByDots<DotF32_F32_Scalar>);
      set(GgmlType::kF16, DotF16_F32_Scalar, GemmByDots<DotF16_F32_Scalar>);
      set(GgmlType::kBF16, DotBF16_F32_Scalar, GemmByDots<DotBF16_F32_Scalar>);
      return;
#if defined(MOESPLIT_GEMV_X86)
    case cpu::IsaTier::kAvx2:
      set(GgmlType::kF32, DotF32_F32_Avx2, GemmF32_F32_Avx2);
      set(GgmlType::kF16, DotF16_F32_Avx2, GemmF16_F32_Avx2);
      set(GgmlType::kBF16, DotBF16_F32_Avx2, GemmBF16_F32_Avx2);
      return;
    case cpu::IsaTier::kAvx512:
    case cpu::IsaTier::kAvx512Vnni:
      set(GgmlType::kF32, DotF32_F32_Avx512, GemmF32_F32_Avx512);
      set(GgmlType::kF16, DotF16_F32_Avx512, GemmF16_F32_Avx512);
      set(GgmlType::kBF16, DotBF16_F32_Avx512, GemmBF16_F32_Avx512);
      return;
#endif
    default:
      return;
  }
}

}  // namespace moesplit::gemv::internal
