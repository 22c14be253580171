// AVX-512 F/BW/VL/DQ tier of the K-quant kernels (maddubs + madd). Compiled with
// MOESPLIT_FLAGS_AVX512 (gemv/kquants.cmake); reached only through KernelsFor(IsaTier::kAvx512).
#include <immintrin.h>

#include <cstddef>
#include <cstdint>

#include "cpu_kernels/gemv/gemv_internal.h"
#include "cpu_kernels/gemv/gemv_isa_common.h"
#include "cpu_kernels/quant/blocks.h"

namespace moesplit::gemv::internal {

#include "cpu_kernels/gemv/gemv_kquants_avx512.inc"
#include "cpu_kernels/gemv/gemv_kquants_decode_avx512.inc"
#include "cpu_kernels/gemv/gemv_kquants_q6k_decode_avx512.inc"

using CoreAvx512 = Avx512Core<false>;

float DotQ4K_Q8K_Avx512(const void* w_row, const void* a_row, int64_t n) {
  return Q4KDecodeDot<false>(w_row, a_row, n);
}
float DotQ6K_Q8K_Avx512(const void* w_row, const void* a_row, int64_t n) {
  return Q6KDecodeDot<false>(w_row, a_row, n);
}

void GemmQ4K_Q8K_Avx512(const void* w, size_t w_stride, int64_t n_rows, const void* a,
                        size_t a_stride, int64_t n_tok, int64_t n, float* y, int64_t ldy) {
  if (n_tok == 1) {  // decode: the nibble-native tile (gemv_kquants_decode_avx512.inc)
    Q4KDecodeGemv<false>(w, w_stride, n_rows, a, n, y);
    return;
  }
  KQuantGemm<CoreAvx512, Q4KFmt>(w, w_stride, n_rows, a, a_stride, n_tok, n, y, ldy);
}
void GemmQ6K_Q8K_Avx512(const void* w, size_t w_stride, int64_t n_rows, const void* a,
                        size_t a_stride, int64_t n_tok, int64_t n, float* y, int64_t ldy) {
  if (n_tok == 1) {  // decode: the packed-order tile (gemv_kquants_q6k_decode_avx512.inc)
    Q6KDecodeGemv<false>(w, w_stride, n_rows, a, n, y);
    return;
  }
  KQuantGemm<CoreAvx512, Q6KFmt>(w, w_stride, n_rows, a, a_stride, n_tok, n, y, ldy);
}

}  // namespace moesplit::gemv::internal
