// The 6-bit values of one step of a kQ6_K_R16 group block (layout in cpu_kernels/quant/repack.h),
// shared by the AVX-512 VNNI group kernel (gemv_kquants_q6k_r16_avx512vnni.inc) and the AMX fill
// (gemv_amx.cc). AVX-512 BW intrinsics: include only from translation units built with the
// AVX-512 flags.
#pragma once

#include <immintrin.h>

#include "cpu_kernels/quant/repack.h"

namespace moesplit::gemv::internal {

// v[c] (c < 4) = the 16 rows x 4 levels of sub-block 4 (step / 4) + c, values 4 (step % 4) ..
// +3, as u8: v[0..2] the levels, v[3] 4x the levels (bits 2-7). With A, B, C = q[3 step ..]:
//   v[c] = {A, B, C}[c] & 0x3F;  v[3] = sel(0xF0, sel(0xC0, A, B >> 2), C >> 4) & 0xFC
// (16-bit shifts: the bits a shift carries in from the next byte land where a select takes
// another source or the AND clears). 8 ops; sel(m, x, y) = m ? x : y bit by bit is vpternlogd
// with truth table 0xCA.
inline __attribute__((always_inline)) void Q6R16StepValues(const quant::BlockQ6_K_R16& blk,
                                                           int step, __m512i v[4]) {
  const __m512i m3f = _mm512_set1_epi8(0x3F), mc0 = _mm512_set1_epi8(static_cast<char>(0xC0)),
                mf0 = _mm512_set1_epi8(static_cast<char>(0xF0)),
                mfc = _mm512_set1_epi8(static_cast<char>(0xFC));
  const __m512i qa = _mm512_loadu_si512(blk.q[3 * step]);
  const __m512i qb = _mm512_loadu_si512(blk.q[3 * step + 1]);
  const __m512i qc = _mm512_loadu_si512(blk.q[3 * step + 2]);
  const __m512i u = _mm512_ternarylogic_epi32(mc0, qa, _mm512_srli_epi16(qb, 2), 0xCA);
  const __m512i w = _mm512_ternarylogic_epi32(mf0, u, _mm512_srli_epi16(qc, 4), 0xCA);
  v[0] = _mm512_and_si512(qa, m3f);
  v[1] = _mm512_and_si512(qb, m3f);
  v[2] = _mm512_and_si512(qc, m3f);
  v[3] = _mm512_and_si512(w, mfc);
}

}  // namespace moesplit::gemv::internal
