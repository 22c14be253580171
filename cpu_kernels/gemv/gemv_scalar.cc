// Scalar reference kernels: the twins every SIMD tier is tested against. Per block the integer
// sums are exact; the float terms are accumulated in block order.
#include <cstdint>

#include "cpu_kernels/gemv/gemv_internal.h"
#include "cpu_kernels/gemv/gemv_isa_common.h"
#include "cpu_kernels/quant/blocks.h"

namespace moesplit::gemv::internal {

using quant::BlockQ4_K;
using quant::BlockQ5_K;
using quant::BlockQ6_K;
using quant::BlockQ8_0;
using quant::BlockQ8_K;
using quant::kQk;
using quant::kQkK;

// Per 256-value block b (w = d*s_j*q - dmin*m_j, a = d_a*q8):
//   sum_i w_i a_i = d*d_a * sum_j s_j * sum_{i in j} q_i q8_i  -  dmin*d_a * sum_j m_j * bsum_j
float DotQ4K_Q8K_Scalar(const void* w_row, const void* a_row, int64_t n) {
  const auto* w = static_cast<const BlockQ4_K*>(w_row);  // [n / 256]
  const auto* a = static_cast<const BlockQ8_K*>(a_row);  // [n / 256]
  const int64_t nb = n / kQkK;
  float sum = 0.0f;
  for (int64_t b = 0; b < nb; ++b) {
    const Q4KScales s = UnpackQ4KScales(w[b].scales);
    const uint8_t* q4 = w[b].qs;  // [128]: chunk c (32 bytes) = values 64c + l | 64c + 32 + l
    const int8_t* q8 = a[b].qs;   // [256]
    int32_t isum = 0;             // |isum| <= 63 * 15 * 127 * 256 < 2^31
    for (int c = 0; c < 4; ++c) {
      int32_t lo = 0, hi = 0;
      for (int l = 0; l < 32; ++l) {
        lo += (q4[32 * c + l] & 0xF) * q8[64 * c + l];
        hi += (q4[32 * c + l] >> 4) * q8[64 * c + 32 + l];
      }
      isum += s.scale[2 * c] * lo + s.scale[2 * c + 1] * hi;
    }
    const float d = HalfToFloat(w[b].d) * a[b].d;
    const float dmin = HalfToFloat(w[b].dmin) * a[b].d;
    sum += d * static_cast<float>(isum) - dmin * static_cast<float>(Q4KMinDot(s, a[b].bsums));
  }
  return sum;
}

// As Q4_K with 5-bit quants: q = nibble | 16 * (bit 2c of qh[l] for the low nibble of chunk c
// byte l, bit 2c + 1 for the high nibble). |isum| <= 63 * 31 * 127 * 256 < 2^31.
float DotQ5K_Q8K_Scalar(const void* w_row, const void* a_row, int64_t n) {
  const auto* w = static_cast<const BlockQ5_K*>(w_row);  // [n / 256]
  const auto* a = static_cast<const BlockQ8_K*>(a_row);  // [n / 256]
  const int64_t nb = n / kQkK;
  float sum = 0.0f;
  for (int64_t b = 0; b < nb; ++b) {
    const Q4KScales s = UnpackQ4KScales(w[b].scales);
    const uint8_t* q4 = w[b].qs;  // [128] low nibbles, as Q4_K
    const uint8_t* qh = w[b].qh;  // [32] 5th bits: bit k of qh[l] -> value 32k + l
    const int8_t* q8 = a[b].qs;   // [256]
    int32_t isum = 0;
    for (int c = 0; c < 4; ++c) {
      int32_t lo = 0, hi = 0;
      for (int l = 0; l < 32; ++l) {
        const int vlo = (q4[32 * c + l] & 0xF) | (((qh[l] >> (2 * c)) & 1) << 4);
        const int vhi = (q4[32 * c + l] >> 4) | (((qh[l] >> (2 * c + 1)) & 1) << 4);
        lo += vlo * q8[64 * c + l];
        hi += vhi * q8[64 * c + 32 + l];
      }
      isum += s.scale[2 * c] * lo + s.scale[2 * c + 1] * hi;
    }
    const float d = HalfToFloat(w[b].d) * a[b].d;
    const float dmin = HalfToFloat(w[b].dmin) * a[b].d;
    sum += d * static_cast<float>(isum) - dmin * static_cast<float>(Q4KMinDot(s, a[b].bsums));
  }
  return sum;
}

// Per block (w = d * sc_j * (q - 32), 16 sub-blocks j of 16 values, q in [0, 63]):
//   sum_i w_i a_i = d * d_a * sum_j sc_j * sum_{i in j} (q_i - 32) * q8_i
// all in integers first: |isum| <= 128 * 32 * 127 * 256 < 2^31.
float DotQ6K_Q8K_Scalar(const void* w_row, const void* a_row, int64_t n) {
  const auto* w = static_cast<const BlockQ6_K*>(w_row);  // [n / 256]
  const auto* a = static_cast<const BlockQ8_K*>(a_row);  // [n / 256]
  const int64_t nb = n / kQkK;
  float sum = 0.0f;
  for (int64_t b = 0; b < nb; ++b) {
    const int8_t* q8 = a[b].qs;  // [256]
    int32_t sub[16] = {};        // [16] sum_{i in j} (q_i - 32) * q8_i
    for (int v = 0; v < kQkK; ++v) {
      // v = 128h + 32k + l: low nibble k / 2 of ql[64h + 32 (k % 2) + l], bits 2k of qh[32h + l].
      const int h = v / 128, k = (v % 128) / 32, l = v % 32;
      const int low = (w[b].ql[64 * h + 32 * (k % 2) + l] >> (4 * (k / 2))) & 0xF;
      const int high = (w[b].qh[32 * h + l] >> (2 * k)) & 3;
      sub[v / 16] += ((low | (high << 4)) - 32) * q8[v];
    }
    int32_t isum = 0;
    for (int j = 0; j < 16; ++j) isum += w[b].scales[j] * sub[j];
    sum += HalfToFloat(w[b].d) * a[b].d * static_cast<float>(isum);
  }
  return sum;
}

float DotQ8_0_Q8_0_Scalar(const void* w_row, const void* a_row, int64_t n) {
  const auto* w = static_cast<const BlockQ8_0*>(w_row);  // [n / 32]
  const auto* a = static_cast<const BlockQ8_0*>(a_row);  // [n / 32]
  const int64_t nb = n / kQk;
  float sum = 0.0f;
  for (int64_t b = 0; b < nb; ++b) {
    int32_t isum = 0;  // |isum| <= 32 * 127^2
    for (int l = 0; l < kQk; ++l) isum += w[b].qs[l] * a[b].qs[l];
    sum += HalfToFloat(w[b].d) * HalfToFloat(a[b].d) * static_cast<float>(isum);
  }
  return sum;
}

// Per 256-value block (w = d * (s_j - 32) * kIq4Values[q], a = d_a * q8):
//   sum_i w_i a_i = d * d_a * sum_j (s_j - 32) * sum_{i in j} kIq4Values[q_i] q8_i
// |isum| <= 32 * 127 * 127 * 256 < 2^31.
float DotIQ4XS_Q8K_Scalar(const void* w_row, const void* a_row, int64_t n) {
  const auto* w = static_cast<const quant::BlockIQ4_XS*>(w_row);  // [n / 256]
  const auto* a = static_cast<const BlockQ8_K*>(a_row);           // [n / 256]
  const int64_t nb = n / kQkK;
  float sum = 0.0f;
  for (int64_t b = 0; b < nb; ++b) {
    int32_t isum = 0;
    for (int j = 0; j < kQkK / kQk; ++j) {
      const int ls =
          ((w[b].scales_l[j / 2] >> 4 * (j % 2)) & 0xF) | ((w[b].scales_h >> 2 * j) & 3) << 4;
      const uint8_t* q4 = w[b].qs + 16 * j;   // [16] indices of values 32j + l | 32j + 16 + l
      const int8_t* q8 = a[b].qs + kQk * j;  // [32]
      int32_t sub = 0;
      for (int l = 0; l < kQk / 2; ++l) {
        sub += quant::kIq4Values[q4[l] & 0xF] * q8[l];
        sub += quant::kIq4Values[q4[l] >> 4] * q8[l + kQk / 2];
      }
      isum += (ls - 32) * sub;
    }
    sum += HalfToFloat(w[b].d) * a[b].d * static_cast<float>(isum);
  }
  return sum;
}

// Q2_K / Q3_K's low 2 bits of value v (0..255): byte v % 32 of half v / 128, bit pair
// (v % 128) / 32 (blocks.h).
static inline int Low2(const uint8_t* qs, int v) {
  return (qs[32 * (v / 128) + v % 32] >> (2 * ((v % 128) / 32))) & 3;
}

// Per block (w = d * s_j * q - dmin * m_j, 16 sub-blocks j of 16 values, q in [0, 3]):
//   sum_i w_i a_i = d * d_a * sum_j s_j * sum_{i in j} q_i q8_i - dmin * d_a * sum_j m_j bsum_j
// |isum| <= 15 * 3 * 127 * 256 < 2^21, |msum| <= 15 * 127 * 256.
float DotQ2K_Q8K_Scalar(const void* w_row, const void* a_row, int64_t n) {
  const auto* w = static_cast<const quant::BlockQ2_K*>(w_row);  // [n / 256]
  const auto* a = static_cast<const BlockQ8_K*>(a_row);         // [n / 256]
  const int64_t nb = n / kQkK;
  float sum = 0.0f;
  for (int64_t b = 0; b < nb; ++b) {
    const int8_t* q8 = a[b].qs;  // [256]
    int32_t isum = 0, msum = 0;
    for (int j = 0; j < 16; ++j) {
      int32_t sub = 0;
      for (int l = 0; l < 16; ++l) sub += Low2(w[b].qs, 16 * j + l) * q8[16 * j + l];
      isum += (w[b].scales[j] & 0xF) * sub;
      msum += (w[b].scales[j] >> 4) * a[b].bsums[j];
    }
    const float d = HalfToFloat(w[b].d) * a[b].d;
    const float dmin = HalfToFloat(w[b].dmin) * a[b].d;
    sum += d * static_cast<float>(isum) - dmin * static_cast<float>(msum);
  }
  return sum;
}

// Per block (w = d * (s_j - 32) * (q - 4), q = low 2 bits + 4 * hmask bit in [0, 7]):
//   sum_i w_i a_i = d * d_a * sum_j (s_j - 32) * sum_{i in j} (q_i - 4) q8_i
// |isum| <= 32 * 4 * 127 * 256 < 2^23.
float DotQ3K_Q8K_Scalar(const void* w_row, const void* a_row, int64_t n) {
  const auto* w = static_cast<const quant::BlockQ3_K*>(w_row);  // [n / 256]
  const auto* a = static_cast<const BlockQ8_K*>(a_row);         // [n / 256]
  const int64_t nb = n / kQkK;
  float sum = 0.0f;
  for (int64_t b = 0; b < nb; ++b) {
    const int8_t* q8 = a[b].qs;  // [256]
    const uint8_t* sc = w[b].scales;
    int32_t isum = 0;
    for (int j = 0; j < 16; ++j) {
      int32_t sub = 0;
      for (int l = 0; l < 16; ++l) {
        const int v = 16 * j + l;
        const int h = (w[b].hmask[v % 32] >> (v / 32)) & 1;
        sub += (Low2(w[b].qs, v) + 4 * h - 4) * q8[v];
      }
      // the 6-bit scale: low nibble in sc[j % 8] (j < 8 low, else high), top 2 bits at
      // sc[8 + j % 4] bits 2 (j / 4)
      const int ls = ((sc[j % 8] >> (4 * (j / 8))) & 0xF) | ((sc[8 + j % 4] >> (2 * (j / 4))) & 3)
                                                                << 4;
      isum += (ls - 32) * sub;
    }
    sum += HalfToFloat(w[b].d) * a[b].d * static_cast<float>(isum);
  }
  return sum;
}

}  // namespace moesplit::gemv::internal
