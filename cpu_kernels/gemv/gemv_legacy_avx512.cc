// Legacy-block kernels (Q8_0 / Q4_0 / Q5_0 / IQ4_NL weights x Q8_0 activations), AVX-512
// F/BW/VL/DQ tier (maddubs + madd integer dots). Compiled with MOESPLIT_FLAGS_AVX512
// (gemv/legacy.cmake); reached only through KernelsFor(IsaTier::kAvx512). The bodies are in
// gemv_legacy_avx512_impl.inc.
#include <immintrin.h>

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "cpu_kernels/gemv/gemv_internal.h"
#include "cpu_kernels/quant/blocks.h"
#include "cpu_kernels/quant/blocks_iq.h"

namespace moesplit::gemv::internal {

#include "cpu_kernels/gemv/gemv_legacy_avx512_impl.inc"

float DotQ4_0_Q8_0_Avx512(const void* w_row, const void* a_row, int64_t n) {
  return DotImpl<KindQ4_0<false>>(w_row, a_row, n);
}

float DotQ5_0_Q8_0_Avx512(const void* w_row, const void* a_row, int64_t n) {
  return DotImpl<KindQ5_0<false>>(w_row, a_row, n);
}

void GemmQ8_0_Q8_0_Avx512(const void* w, size_t w_stride, int64_t n_rows, const void* a,
                          size_t a_stride, int64_t n_tok, int64_t n, float* y, int64_t ldy) {
  GemmImpl<KindQ8_0<false>>(w, w_stride, n_rows, a, a_stride, n_tok, n, y, ldy);
}

void GemmQ4_0_Q8_0_Avx512(const void* w, size_t w_stride, int64_t n_rows, const void* a,
                          size_t a_stride, int64_t n_tok, int64_t n, float* y, int64_t ldy) {
  GemmImpl<KindQ4_0<false>>(w, w_stride, n_rows, a, a_stride, n_tok, n, y, ldy);
}

void GemmQ5_0_Q8_0_Avx512(const void* w, size_t w_stride, int64_t n_rows, const void* a,
                          size_t a_stride, int64_t n_tok, int64_t n, float* y, int64_t ldy) {
  GemmImpl<KindQ5_0<false>>(w, w_stride, n_rows, a, a_stride, n_tok, n, y, ldy);
}

float DotIQ4NL_Q8_0_Avx512(const void* w_row, const void* a_row, int64_t n) {
  return DotImpl<KindIQ4NL<false>>(w_row, a_row, n);
}

void GemmIQ4NL_Q8_0_Avx512(const void* w, size_t w_stride, int64_t n_rows, const void* a,
                           size_t a_stride, int64_t n_tok, int64_t n, float* y, int64_t ldy) {
  GemmImpl<KindIQ4NL<false>>(w, w_stride, n_rows, a, a_stride, n_tok, n, y, ldy);
}

}  // namespace moesplit::gemv::internal
