// AVX-512 VNNI tier (vpdpbusd integer dots). Compiled with the AVX-512 tier's flags plus
// -mavx512vnni; reached only through KernelsFor(IsaTier::kAvx512Vnni).
#include <immintrin.h>

#include <cstdint>

#include "cpu_kernels/gemv/gemv_internal.h"
#include "cpu_kernels/gemv/gemv_isa_common.h"
#include "cpu_kernels/quant/blocks.h"

namespace moesplit::gemv::internal {

#include "cpu_kernels/gemv/gemv_avx512_impl.inc"

float DotQ8_0_Q8_0_Avx512Vnni(const void* w_row, const void* a_row, int64_t n) {
  return DotQ8_0Impl<true>(w_row, a_row, n);
}

}  // namespace moesplit::gemv::internal
