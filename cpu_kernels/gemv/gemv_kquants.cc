// Registration of the K-quant kernels (weights Q4_K/Q5_K/Q6_K, activations Q8_K) per tier.
#include "cpu_kernels/gemv/gemv_internal.h"

namespace moesplit::gemv::internal {

void AddKQuantKernels(cpu::IsaTier tier, GemvKernels* k) {
  auto set = [&](GgmlType t, DotFn dot, GemmFn gemm) {
    k->by_type[static_cast<size_t>(t)] = {GgmlType::kQ8_K, dot, gemm};
  };
  switch (tier) {
    case cpu::IsaTier::kScalar:
      set(GgmlType::kQ4_K, DotQ4K_Q8K_Scalar, GemmByDots<DotQ4K_Q8K_Scalar>);
      return;
#if defined(MOESPLIT_GEMV_X86)
    case cpu::IsaTier::kAvx2:
      set(GgmlType::kQ4_K, DotQ4K_Q8K_Avx2, GemmByDots<DotQ4K_Q8K_Avx2>);
      return;
    case cpu::IsaTier::kAvx512:
      set(GgmlType::kQ4_K, DotQ4K_Q8K_Avx512, GemmByDots<DotQ4K_Q8K_Avx512>);
      return;
    case cpu::IsaTier::kAvx512Vnni:
      set(GgmlType::kQ4_K, DotQ4K_Q8K_Avx512Vnni, GemmByDots<DotQ4K_Q8K_Avx512Vnni>);
      return;
#endif
    default:
      return;
  }
}

}  // namespace moesplit::gemv::internal
