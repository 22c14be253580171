// Reference dequantization of the lattice types IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS, IQ3_S, IQ1_S,
// IQ1_M and of MXFP4, bit-exact with ggml's dequantize_row_* (quant_oracle_test.cc). Block
// layouts: blocks_iq.h; the lattice tables: iq_grids.h.
//
// Every value is (sub-block scale) * (grid magnitude) * (+/-1), or for IQ1 (sub-block scale) *
// (grid value +/- 0.125), with the sub-block scale formed first, in ggml's operand order (e.g.
// IQ2_XXS: (d * (0.5f + s)) * 0.25f): float rounding makes other orders different numbers.
// The sign is a multiplication by -1.0f as in ggml, so a zero scale gives -0.0f where the sign
// bit is set. No expression here has the a * b + c shape, and the library is built with
// -ffp-contract=off anyway.
//
// Decode only: IQ2_XS, IQ2_S, IQ3_XXS, IQ3_S and MXFP4 have no quantizer in moesplit; the
// lattice types have CPU kernels (gemv_internal.h), MXFP4 has none (quant.h).
#include <cstdint>
#include <cstring>

#include "cpu_kernels/quant/blocks_iq.h"
#include "cpu_kernels/quant/iq_grids.h"
#include "cpu_kernels/quant/quant_internal.h"
#include "cpu_kernels/quant/quant_math.h"

namespace moesplit::quant::internal {
namespace {

// Byte j of a grid entry: the magnitude (or, for IQ1, the signed value) of value j of a group.
inline uint8_t GridByte(uint64_t entry, int j) { return static_cast<uint8_t>(entry >> (8 * j)); }

// n values y[j] = (scale * magnitude_j) * (bit j of signs ? -1 : 1).
template <int n>
void SignedGroup(float scale, uint64_t entry, unsigned signs, float* y) {
  for (int j = 0; j < n; ++j) {
    const float sign = (signs >> j) & 1 ? -1.0f : 1.0f;
    y[j] = scale * static_cast<float>(GridByte(entry, j)) * sign;
  }
}

// 8 values y[j] = scale * (grid_j + delta), grid_j in {-1, 0, 1}: IQ1_S / IQ1_M.
void Iq1Group(float scale, uint64_t entry, float delta, float* y) {
  for (int j = 0; j < 8; ++j) {
    const int8_t g = static_cast<int8_t>(GridByte(entry, j));
    y[j] = scale * (static_cast<float>(g) + delta);
  }
}

uint32_t LoadU32(const void* p) {
  uint32_t v;
  std::memcpy(&v, p, sizeof(v));
  return v;
}

}  // namespace

// 66 B -> 256 values. Sub-block j: 4 grid-index bytes, then 4 x 7 sign bits and the scale.
void DequantIQ2_XXS(const void* src, float* dst, int64_t nb) {
  const auto* blocks = static_cast<const BlockIQ2_XXS*>(src);
  for (int64_t i = 0; i < nb; ++i) {
    const BlockIQ2_XXS& b = blocks[i];
    const float d = Half(b.d);
    for (int j = 0; j < kQkK / 32; ++j, dst += 32) {
      const uint32_t idx = LoadU32(&b.qs[4 * j]);
      const uint32_t aux = LoadU32(&b.qs[4 * j + 2]);
      const float db = d * (0.5f + static_cast<float>(aux >> 28)) * 0.25f;
      for (int g = 0; g < 4; ++g) {
        SignedGroup<8>(db, kIq2XxsGrid[(idx >> (8 * g)) & 0xFF],
                       Iq2SignByte((aux >> (7 * g)) & 127), dst + 8 * g);
      }
    }
  }
}

// 74 B -> 256 values. One uint16 per group (9-bit grid index, 7-bit sign index), two 4-bit
// scales per sub-block.
void DequantIQ2_XS(const void* src, float* dst, int64_t nb) {
  const auto* blocks = static_cast<const BlockIQ2_XS*>(src);
  for (int64_t i = 0; i < nb; ++i) {
    const BlockIQ2_XS& b = blocks[i];
    const float d = Half(b.d);
    for (int j = 0; j < kQkK / 32; ++j, dst += 32) {
      const float db[2] = {d * (0.5f + static_cast<float>(b.scales[j] & 0xF)) * 0.25f,
                           d * (0.5f + static_cast<float>(b.scales[j] >> 4)) * 0.25f};
      for (int g = 0; g < 4; ++g) {
        const uint16_t q = b.qs[4 * j + g];
        SignedGroup<8>(db[g / 2], kIq2XsGrid[q & 511], Iq2SignByte(q >> 9), dst + 8 * g);
      }
    }
  }
}

// 82 B -> 256 values. 10-bit grid index per group (8 bits in qs, 2 in qh), 8 explicit signs.
void DequantIQ2_S(const void* src, float* dst, int64_t nb) {
  const auto* blocks = static_cast<const BlockIQ2_S*>(src);
  for (int64_t i = 0; i < nb; ++i) {
    const BlockIQ2_S& b = blocks[i];
    const float d = Half(b.d);
    const uint8_t* signs = b.qs + kQkK / 8;
    for (int j = 0; j < kQkK / 32; ++j, dst += 32) {
      const float db[2] = {d * (0.5f + static_cast<float>(b.scales[j] & 0xF)) * 0.25f,
                           d * (0.5f + static_cast<float>(b.scales[j] >> 4)) * 0.25f};
      for (int g = 0; g < 4; ++g) {
        const int idx = b.qs[4 * j + g] | (((b.qh[j] >> (2 * g)) & 3) << 8);
        SignedGroup<8>(db[g / 2], kIq2SGrid[idx], signs[4 * j + g], dst + 8 * g);
      }
    }
  }
}

// 98 B -> 256 values. 64 grid indices of 4 values, then per sub-block a uint32 of 4 x 7 sign
// bits and the scale.
void DequantIQ3_XXS(const void* src, float* dst, int64_t nb) {
  const auto* blocks = static_cast<const BlockIQ3_XXS*>(src);
  for (int64_t i = 0; i < nb; ++i) {
    const BlockIQ3_XXS& b = blocks[i];
    const float d = Half(b.d);
    const uint8_t* qs = b.qs;
    for (int j = 0; j < kQkK / 32; ++j, dst += 32, qs += 8) {
      const uint32_t aux = LoadU32(b.qs + kQkK / 4 + 4 * j);
      const float db = d * (0.5f + static_cast<float>(aux >> 28)) * 0.5f;
      for (int g = 0; g < 4; ++g) {
        const unsigned signs = Iq2SignByte((aux >> (7 * g)) & 127);
        SignedGroup<4>(db, kIq3XxsGrid[qs[2 * g]], signs, dst + 8 * g);
        SignedGroup<4>(db, kIq3XxsGrid[qs[2 * g + 1]], signs >> 4, dst + 8 * g + 4);
      }
    }
  }
}

// 110 B -> 256 values. 9-bit grid index per 4 values (8 bits in qs, 1 in qh), one sign bit
// per value, a 4-bit scale per sub-block.
void DequantIQ3_S(const void* src, float* dst, int64_t nb) {
  const auto* blocks = static_cast<const BlockIQ3_S*>(src);
  for (int64_t i = 0; i < nb; ++i) {
    const BlockIQ3_S& b = blocks[i];
    const float d = Half(b.d);
    for (int j = 0; j < kQkK / 32; ++j, dst += 32) {
      const int s = (b.scales[j / 2] >> (4 * (j % 2))) & 0xF;
      const float db = d * static_cast<float>(1 + 2 * s);
      for (int k = 8 * j; k < 8 * j + 8; ++k) {  // 4-value group k of the block
        const int idx = b.qs[k] | (((b.qh[k / 8] >> (k % 8)) & 1) << 8);
        SignedGroup<4>(db, kIq3SGrid[idx], b.signs[k / 2] >> (4 * (k % 2)), dst + 4 * (k % 8));
      }
    }
  }
}

// 50 B -> 256 values. 11-bit grid index per group (8 bits in qs, 3 in qh); qh[j] also holds
// the sub-block's 3-bit scale and the sign of its delta.
void DequantIQ1_S(const void* src, float* dst, int64_t nb) {
  const auto* blocks = static_cast<const BlockIQ1_S*>(src);
  for (int64_t i = 0; i < nb; ++i) {
    const BlockIQ1_S& b = blocks[i];
    const float d = Half(b.d);
    for (int j = 0; j < kQkK / 32; ++j, dst += 32) {
      const uint16_t qh = b.qh[j];
      const float dl = d * static_cast<float>(2 * ((qh >> 12) & 7) + 1);
      const float delta = (qh & 0x8000) ? -kIq1Delta : kIq1Delta;
      for (int g = 0; g < 4; ++g) {
        const int idx = b.qs[4 * j + g] | (((qh >> (3 * g)) & 7) << 8);
        Iq1Group(dl, kIq1SGrid[idx], delta, dst + 8 * g);
      }
    }
  }
}

// 56 B -> 256 values. As IQ1_S with a 3-bit scale per 16 values and a delta sign per group;
// the f16 super-scale is gathered from the top nibbles of the four scale words.
void DequantIQ1_M(const void* src, float* dst, int64_t nb) {
  const auto* blocks = static_cast<const BlockIQ1_M*>(src);
  for (int64_t i = 0; i < nb; ++i) {
    const BlockIQ1_M& b = blocks[i];
    uint16_t sc[4];
    std::memcpy(sc, b.scales, sizeof(sc));
    const uint16_t d_bits = static_cast<uint16_t>((sc[0] >> 12) | ((sc[1] >> 8) & 0x00F0) |
                                                  ((sc[2] >> 4) & 0x0F00) | (sc[3] & 0xF000));
    const float d = Half(d_bits);
    for (int j = 0; j < kQkK / 32; ++j, dst += 32) {
      const int shift = 6 * (j % 2);
      const float dl[2] = {d * static_cast<float>(2 * ((sc[j / 2] >> shift) & 7) + 1),
                           d * static_cast<float>(2 * ((sc[j / 2] >> (shift + 3)) & 7) + 1)};
      for (int g = 0; g < 4; ++g) {
        const int nibble = (b.qh[2 * j + g / 2] >> (4 * (g % 2))) & 0xF;
        const int idx = b.qs[4 * j + g] | ((nibble & 7) << 8);
        const float delta = (nibble & 8) ? -kIq1Delta : kIq1Delta;
        Iq1Group(dl[g / 2], kIq1SGrid[idx], delta, dst + 8 * g);
      }
    }
  }
}

// 17 B -> 32 values: kMxfp4Values[q] * 2^(e - 128) (the table is doubled, the scale halved).
void DequantMXFP4(const void* src, float* dst, int64_t nb) {
  const auto* blocks = static_cast<const BlockMXFP4*>(src);
  for (int64_t i = 0; i < nb; ++i, dst += kQk) {
    const BlockMXFP4& b = blocks[i];
    const float d = Mxfp4HalfScale(b.e);
    for (int j = 0; j < kQk / 2; ++j) {
      dst[j] = static_cast<float>(kMxfp4Values[b.qs[j] & 0xF]) * d;
      dst[j + kQk / 2] = static_cast<float>(kMxfp4Values[b.qs[j] >> 4]) * d;
    }
  }
}

}  // namespace moesplit::quant::internal
