// Registration of the float-weight kernels (weights F32/F16/BF16, activations F32) per tier.
#include "cpu_kernels/gemv/gemv_internal.h"

namespace moesplit::gemv::internal {

void AddFloatKernels(cpu::IsaTier tier, GemvKernels* k) {
  (void)tier;
  (void)k;  // no float kernels yet: the engine keeps the reference matmul for these types
}

}  // namespace moesplit::gemv::internal
