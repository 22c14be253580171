// Reference dequantization of the 256-value K-quant super-blocks, bit-exact with ggml's
// to_float. The sub-block scale is formed first (d * s_j, dmin * m_j) and then applied to each
// quant, in that order, because float rounding makes d * (s_j * q) a different number.
#include "cpu_kernels/quant/blocks.h"
#include "cpu_kernels/quant/quant_internal.h"
#include "cpu_kernels/quant/quant_math.h"

namespace moesplit::quant::internal {

// 84 B -> 256 values. Sub-block j (16 values): (d * s_j) * q - dmin * m_j, q 2 bits.
void DequantQ2_K(const void* src, float* dst, int64_t nb) {
  const auto* blocks = static_cast<const BlockQ2_K*>(src);
  for (int64_t i = 0; i < nb; ++i, dst += kQkK) {
    const BlockQ2_K& b = blocks[i];
    const float d = Half(b.d);
    const float dmin = Half(b.dmin);
    for (int j = 0; j < kQkK / 16; ++j) {
      // Value 16j + l lives in half h = j / 8, byte 16 * (j % 2) + l, bit pair (j % 8) / 2.
      const uint8_t* q = b.qs + 32 * (j / 8) + 16 * (j % 2);
      const int shift = 2 * ((j % 8) / 2);
      const float dl = d * static_cast<float>(b.scales[j] & 0xF);
      const float ml = dmin * static_cast<float>(b.scales[j] >> 4);
      for (int l = 0; l < 16; ++l) {
        dst[16 * j + l] = dl * static_cast<float>((q[l] >> shift) & 3) - ml;
      }
    }
  }
}

// 110 B -> 256 values. Sub-block j (16 values): (d * (s_j - 32)) * (q - 4 * !hbit).
void DequantQ3_K(const void* src, float* dst, int64_t nb) {
  const auto* blocks = static_cast<const BlockQ3_K*>(src);
  for (int64_t i = 0; i < nb; ++i, dst += kQkK) {
    const BlockQ3_K& b = blocks[i];
    const float d = Half(b.d);
    for (int j = 0; j < kQkK / 16; ++j) {
      const int off = 32 * (j / 8) + 16 * (j % 2);  // byte of value 16j in qs, as Q2_K
      const int shift = 2 * ((j % 8) / 2);
      const uint8_t hbit = static_cast<uint8_t>(1u << (j / 2));  // bit of value 16j in hmask
      const float dl = d * static_cast<float>(UnpackScaleQ3K(j, b.scales) - 32);
      for (int l = 0; l < 16; ++l) {
        const int low = (b.qs[off + l] >> shift) & 3;
        const int q = low - ((b.hmask[(16 * j + l) % 32] & hbit) ? 0 : 4);
        dst[16 * j + l] = dl * static_cast<float>(q);
      }
    }
  }
}

// 144 B -> 256 values. Sub-block j (32 values): (d * s_j) * q - dmin * m_j, q 4 bits.
void DequantQ4_K(const void* src, float* dst, int64_t nb) {
  const auto* blocks = static_cast<const BlockQ4_K*>(src);
  for (int64_t i = 0; i < nb; ++i, dst += kQkK) {
    const BlockQ4_K& b = blocks[i];
    const float d = Half(b.d);
    const float dmin = Half(b.dmin);
    for (int j = 0; j < kQkK / 32; ++j) {
      int sc, m;
      UnpackScaleMinK4(j, b.scales, &sc, &m);
      const float dl = d * static_cast<float>(sc);
      const float ml = dmin * static_cast<float>(m);
      const uint8_t* q = b.qs + 32 * (j / 2);
      const int shift = 4 * (j % 2);
      for (int l = 0; l < 32; ++l) {
        dst[32 * j + l] = dl * static_cast<float>((q[l] >> shift) & 0xF) - ml;
      }
    }
  }
}

// 176 B -> 256 values. As Q4_K with a 5th bit: q = nibble + 16 * bit j of qh[l].
void DequantQ5_K(const void* src, float* dst, int64_t nb) {
  const auto* blocks = static_cast<const BlockQ5_K*>(src);
  for (int64_t i = 0; i < nb; ++i, dst += kQkK) {
    const BlockQ5_K& b = blocks[i];
    const float d = Half(b.d);
    const float dmin = Half(b.dmin);
    for (int j = 0; j < kQkK / 32; ++j) {
      int sc, m;
      UnpackScaleMinK4(j, b.scales, &sc, &m);
      const float dl = d * static_cast<float>(sc);
      const float ml = dmin * static_cast<float>(m);
      const uint8_t* q = b.qs + 32 * (j / 2);
      const int shift = 4 * (j % 2);
      const uint8_t hbit = static_cast<uint8_t>(1u << j);
      for (int l = 0; l < 32; ++l) {
        const int v = ((q[l] >> shift) & 0xF) + ((b.qh[l] & hbit) ? 16 : 0);
        dst[32 * j + l] = dl * static_cast<float>(v) - ml;
      }
    }
  }
}

// 210 B -> 256 values. Sub-block j (16 values): (d * s_j) * (q - 32), q 6 bits.
void DequantQ6_K(const void* src, float* dst, int64_t nb) {
  const auto* blocks = static_cast<const BlockQ6_K*>(src);
  for (int64_t i = 0; i < nb; ++i, dst += kQkK) {
    const BlockQ6_K& b = blocks[i];
    const float d = Half(b.d);
    uint8_t L[kQkK];
    internal::Q6KLevels(b, L);
    for (int v = 0; v < kQkK; ++v) {
      const int q = L[v] - 32;
      dst[v] = d * static_cast<float>(b.scales[v / 16]) * static_cast<float>(q);
    }
  }
}

// 292 B -> 256 values: d * q (f32 d).
void DequantQ8_K(const void* src, float* dst, int64_t nb) {
  const auto* blocks = static_cast<const BlockQ8_K*>(src);
  for (int64_t i = 0; i < nb; ++i, dst += kQkK) {
    const BlockQ8_K& b = blocks[i];
    for (int j = 0; j < kQkK; ++j) dst[j] = b.d * static_cast<float>(b.qs[j]);
  }
}

}  // namespace moesplit::quant::internal
