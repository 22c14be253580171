// Legacy-block kernels (Q8_0 / Q4_0 / Q5_0 weights x Q8_0 activations), AVX-512 VNNI tier (vpdpbusd
// integer dots). Compiled with MOESPLIT_FLAGS_AVX512VNNI (gemv/legacy.cmake); reached only through
// KernelsFor(IsaTier::kAvx512Vnni). The bodies are in gemv_legacy_avx512_impl.inc.
#include <immintrin.h>

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "cpu_kernels/gemv/gemv_internal.h"
#include "cpu_kernels/quant/blocks.h"

namespace moesplit::gemv::internal {

#include "cpu_kernels/gemv/gemv_legacy_avx512_impl.inc"
#include "cpu_kernels/gemv/gemv_avx512_reduce.inc"
#include "cpu_kernels/gemv/gemv_legacy_gm_avx512vnni.inc"

float DotQ4_0_Q8_0_Avx512Vnni(const void* w_row, const void* a_row, int64_t n) {
  return DotImpl<KindQ4_0<true>>(w_row, a_row, n);
}

float DotQ5_0_Q8_0_Avx512Vnni(const void* w_row, const void* a_row, int64_t n) {
  return DotImpl<KindQ5_0<true>>(w_row, a_row, n);
}

void GemmQ8_0_Q8_0_Avx512Vnni(const void* w, size_t w_stride, int64_t n_rows, const void* a,
                              size_t a_stride, int64_t n_tok, int64_t n, float* y, int64_t ldy) {
  const int64_t done = GmGemm16<GmQ8_0>(w, w_stride, n_rows, a, a_stride, n_tok, n, y, ldy);
  if (done < n_tok) {
    GemmImpl<KindQ8_0<true>>(w, w_stride, n_rows, static_cast<const uint8_t*>(a) + done * a_stride, a_stride,
                 n_tok - done, n, y + done * ldy, ldy);
  }
}

void GemmQ4_0_Q8_0_Avx512Vnni(const void* w, size_t w_stride, int64_t n_rows, const void* a,
                              size_t a_stride, int64_t n_tok, int64_t n, float* y, int64_t ldy) {
  const int64_t done = GmGemm16<GmQ4Q5<false>>(w, w_stride, n_rows, a, a_stride, n_tok, n, y, ldy);
  if (done < n_tok) {
    GemmImpl<KindQ4_0<true>>(w, w_stride, n_rows, static_cast<const uint8_t*>(a) + done * a_stride, a_stride,
                 n_tok - done, n, y + done * ldy, ldy);
  }
}

void GemmQ5_0_Q8_0_Avx512Vnni(const void* w, size_t w_stride, int64_t n_rows, const void* a,
                              size_t a_stride, int64_t n_tok, int64_t n, float* y, int64_t ldy) {
  const int64_t done = GmGemm16<GmQ4Q5<true>>(w, w_stride, n_rows, a, a_stride, n_tok, n, y, ldy);
  if (done < n_tok) {
    GemmImpl<KindQ5_0<true>>(w, w_stride, n_rows, static_cast<const uint8_t*>(a) + done * a_stride, a_stride,
                 n_tok - done, n, y + done * ldy, ldy);
  }
}

}  // namespace moesplit::gemv::internal
