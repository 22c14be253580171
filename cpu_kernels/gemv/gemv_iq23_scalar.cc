// Lattice types x Q8_K, scalar tier: the reference dots of IQ3_XXS, IQ3_S, IQ2_XS and IQ2_S,
// written from the dequantization's semantics (quant/dequant_iq.cc) in integers. Generic flags.
//
// Per 256-value block, with d the f16 super-scale, d_a the Q8_K scale, s the 4-bit scale of
// the sub-block (IQ3: 32 values; IQ2_XS / IQ2_S: 16 values) and grid * sign the signed lattice
// magnitude of value i:
//   IQ3_XXS value = d (0.5 + s) 0.5 grid sign = (d / 4) (2 s + 1) grid sign, grid <= 62:
//     sum_i w_i a_i = (d d_a / 4) sum_j (2 s_j + 1) sum_{i in j} grid_i sign_i q8_i
//     |block integer| <= 256 * 62 * 127 * 31 < 2^26.
//   IQ3_S value = d (1 + 2 s) grid sign, grid <= 15:
//     sum_i w_i a_i = d d_a sum_j (2 s_j + 1) sum_{i in j} grid_i sign_i q8_i
//     |block integer| <= 256 * 15 * 127 * 31 < 2^24.
//   IQ2_XS / IQ2_S value = d (0.5 + s) 0.25 grid sign = (d / 8) (2 s + 1) grid sign, grid <= 43:
//     sum_i w_i a_i = (d d_a / 8) sum_h (2 s_h + 1) sum_{i in h} grid_i sign_i q8_i
//     (h: 16 values); |block integer| <= 256 * 43 * 127 * 31 < 2^26.
// The float step is one multiply-add per block, in block order.
#include <cstdint>
#include <cstring>

#include "core/base/status.h"
#include "cpu_kernels/gemv/gemv_internal.h"
#include "cpu_kernels/gemv/gemv_isa_common.h"
#include "cpu_kernels/quant/blocks.h"
#include "cpu_kernels/quant/blocks_iq.h"
#include "cpu_kernels/quant/iq_grids.h"

namespace moesplit::gemv::internal {

using quant::BlockIQ2_S;
using quant::BlockIQ2_XS;
using quant::BlockIQ3_S;
using quant::BlockIQ3_XXS;
using quant::BlockQ8_K;
using quant::kQkK;
namespace qi = quant::internal;

namespace {

// The level (0..7) of an IQ3 grid byte, -1 if it is none: IQ3_XXS levels 4, 12, 20, 28, 36, 44,
// 52, 62; IQ3_S levels 1, 3, .., 15 (iq_grids.h).
int Iq3XxsLevel(int v) {
  if (v == 62) return 7;
  return v % 8 == 4 && v <= 52 ? (v - 4) / 8 : -1;
}
int Iq3SLevel(int v) { return v % 2 == 1 && v <= 15 ? (v - 1) / 2 : -1; }

// entry -> 12-bit code of 3-bit levels (value k in bits 3k..3k+2); level(v) maps a grid byte.
template <typename Level>
void Iq3Codes(const uint32_t* grid, int size, Level level, uint8_t* lo, uint8_t* hi) {
  for (int e = 0; e < size; ++e) {
    uint32_t code = 0;
    for (int k = 0; k < 4; ++k) {
      const int v = static_cast<uint8_t>(grid[e] >> (8 * k));
      const int l = level(v);
      MOESPLIT_CHECK(l >= 0 && l < 8, "iq3 grid byte ", v);
      code |= static_cast<uint32_t>(l) << (3 * k);
    }
    lo[e] = static_cast<uint8_t>(code);
    hi[e] = static_cast<uint8_t>(code >> 8);
  }
}

}  // namespace

void Iq2LevelCodes(const uint64_t* grid, int size, uint8_t* lo, uint8_t* hi) {
  for (int e = 0; e < size; ++e) {
    uint32_t code = 0;
    for (int k = 0; k < 8; ++k) {
      const int v = static_cast<uint8_t>(grid[e] >> (8 * k));
      MOESPLIT_CHECK(v == 8 || v == 25 || v == 43, "iq2 grid byte ", v);
      code |= static_cast<uint32_t>(v == 8 ? 0 : v == 25 ? 1 : 2) << (2 * k);
    }
    lo[e] = static_cast<uint8_t>(code);
    hi[e] = static_cast<uint8_t>(code >> 8);
  }
}

void AddIq23Codes(IqTables* t) {
  Iq2LevelCodes(qi::kIq2XsGrid, qi::kIq2XsGridSize, t->iq2xs_lo, t->iq2xs_hi);
  Iq2LevelCodes(qi::kIq2SGrid, qi::kIq2SGridSize, t->iq2s_lo, t->iq2s_hi);
  Iq3Codes(qi::kIq3XxsGrid, qi::kIq3XxsGridSize, Iq3XxsLevel, t->iq3xxs_lo, t->iq3xxs_hi);
  for (int e = 0; e < qi::kIq3XxsGridSize; ++e) {
    t->iq3xxs_b[e] = static_cast<uint8_t>(t->iq3xxs_lo[e] >> 6 | t->iq3xxs_hi[e] << 2);
  }
  Iq3Codes(qi::kIq3SGrid, qi::kIq3SGridSize, Iq3SLevel, t->iq3s_lo, t->iq3s_hi);
  for (int e = 0; e < qi::kIq3SGridSize; ++e) {
    t->iq3s_b[e] = static_cast<uint8_t>(t->iq3s_lo[e] >> 6 | t->iq3s_hi[e] << 2);
  }
}

float DotIQ3XXS_Q8K_Scalar(const void* w_row, const void* a_row, int64_t n) {
  const auto* w = static_cast<const BlockIQ3_XXS*>(w_row);  // [n / 256]
  const auto* a = static_cast<const BlockQ8_K*>(a_row);     // [n / 256]
  float sum = 0.0f;
  for (int64_t b = 0; b < n / kQkK; ++b) {
    int32_t isum = 0;
    for (int j = 0; j < kQkK / 32; ++j) {
      const uint8_t* idx = w[b].qs + 8 * j;                      // 8 grid indices
      const uint32_t aux = LoadU32(w[b].qs + kQkK / 4 + 4 * j);  // 4 x 7 sign bits, s << 28
      int32_t sub = 0;
      for (int g = 0; g < 4; ++g) {  // 8 values: two 4-value entries, one sign byte
        const unsigned signs = qi::Iq2SignByte((aux >> (7 * g)) & 127);
        const int8_t* q8 = a[b].qs + 32 * j + 8 * g;
        sub += SignedGroup<4>(qi::kIq3XxsGrid[idx[2 * g]], signs, q8);
        sub += SignedGroup<4>(qi::kIq3XxsGrid[idx[2 * g + 1]], signs >> 4, q8 + 4);
      }
      isum += static_cast<int32_t>(2 * (aux >> 28) + 1) * sub;
    }
    sum += 0.25f * HalfToFloat(w[b].d) * a[b].d * static_cast<float>(isum);
  }
  return sum;
}

float DotIQ3S_Q8K_Scalar(const void* w_row, const void* a_row, int64_t n) {
  const auto* w = static_cast<const BlockIQ3_S*>(w_row);  // [n / 256]
  const auto* a = static_cast<const BlockQ8_K*>(a_row);   // [n / 256]
  float sum = 0.0f;
  for (int64_t b = 0; b < n / kQkK; ++b) {
    int32_t isum = 0;
    for (int j = 0; j < kQkK / 32; ++j) {
      const int s = (w[b].scales[j / 2] >> (4 * (j % 2))) & 0xF;
      int32_t sub = 0;
      for (int k = 8 * j; k < 8 * j + 8; ++k) {  // 4-value group k of the block
        const int idx = w[b].qs[k] | (((w[b].qh[k / 8] >> (k % 8)) & 1) << 8);
        const unsigned signs = w[b].signs[k / 2] >> (4 * (k % 2));
        sub += SignedGroup<4>(qi::kIq3SGrid[idx], signs, a[b].qs + 4 * k);
      }
      isum += (2 * s + 1) * sub;
    }
    sum += HalfToFloat(w[b].d) * a[b].d * static_cast<float>(isum);
  }
  return sum;
}

float DotIQ2XS_Q8K_Scalar(const void* w_row, const void* a_row, int64_t n) {
  const auto* w = static_cast<const BlockIQ2_XS*>(w_row);  // [n / 256]
  const auto* a = static_cast<const BlockQ8_K*>(a_row);    // [n / 256]
  float sum = 0.0f;
  for (int64_t b = 0; b < n / kQkK; ++b) {
    int32_t isum = 0;
    for (int h = 0; h < kQkK / 16; ++h) {  // 16 values: groups 2h, 2h + 1; scale 4 bits
      const int s = (w[b].scales[h / 2] >> (4 * (h % 2))) & 0xF;
      int32_t sub = 0;
      for (int g = 2 * h; g < 2 * h + 2; ++g) {  // group g of the block: values 8g .. 8g + 7
        const uint16_t q = w[b].qs[g];
        sub += SignedGroup<8>(qi::kIq2XsGrid[q & 511], qi::Iq2SignByte(q >> 9), a[b].qs + 8 * g);
      }
      isum += (2 * s + 1) * sub;
    }
    sum += 0.125f * HalfToFloat(w[b].d) * a[b].d * static_cast<float>(isum);
  }
  return sum;
}

float DotIQ2S_Q8K_Scalar(const void* w_row, const void* a_row, int64_t n) {
  const auto* w = static_cast<const BlockIQ2_S*>(w_row);  // [n / 256]
  const auto* a = static_cast<const BlockQ8_K*>(a_row);   // [n / 256]
  float sum = 0.0f;
  for (int64_t b = 0; b < n / kQkK; ++b) {
    const uint8_t* signs = w[b].qs + kQkK / 8;  // [32] one explicit sign byte per group
    int32_t isum = 0;
    for (int h = 0; h < kQkK / 16; ++h) {  // 16 values: groups 2h, 2h + 1; scale 4 bits
      const int s = (w[b].scales[h / 2] >> (4 * (h % 2))) & 0xF;
      int32_t sub = 0;
      for (int g = 2 * h; g < 2 * h + 2; ++g) {  // group g of the block: values 8g .. 8g + 7
        const int idx = w[b].qs[g] | (((w[b].qh[g / 4] >> (2 * (g % 4))) & 3) << 8);
        sub += SignedGroup<8>(qi::kIq2SGrid[idx], signs[g], a[b].qs + 8 * g);
      }
      isum += (2 * s + 1) * sub;
    }
    sum += 0.125f * HalfToFloat(w[b].d) * a[b].d * static_cast<float>(isum);
  }
  return sum;
}

}  // namespace moesplit::gemv::internal
