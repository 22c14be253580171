// AVX-512 F/BW/VL/DQ tier (maddubs + madd integer dots). Compiled with -mavx512f -mavx512bw
// -mavx512vl -mavx512dq -mf16c; reached only through KernelsFor(IsaTier::kAvx512).
#include <immintrin.h>

#include <cstdint>

#include "cpu_kernels/gemv/gemv_internal.h"
#include "cpu_kernels/gemv/gemv_isa_common.h"
#include "cpu_kernels/quant/blocks.h"

namespace moesplit::gemv::internal {

#include "cpu_kernels/gemv/gemv_avx512_impl.inc"

float DotQ8_0_Q8_0_Avx512(const void* w_row, const void* a_row, int64_t n) {
  return DotQ8_0Impl<false>(w_row, a_row, n);
}

}  // namespace moesplit::gemv::internal
