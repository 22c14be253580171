// Lattice types x Q8_K, scalar tier: the reference dots of IQ2_XXS, IQ1_S and IQ1_M, written
// from the dequantization's semantics (quant/dequant_iq.cc) in integers, and the lookup tables
// the SIMD tiers derive from the grids (gemv_internal.h IqTables). Generic flags.
//
// Per 256-value block, with d the f16 super-scale and d_a the Q8_K scale:
//   IQ2_XXS value = d (0.5 + s_j) 0.25 grid sign = (d / 8) (2 s_j + 1) grid sign, so
//     sum_i w_i a_i = (d d_a / 8) sum_j (2 s_j + 1) sum_{i in j} grid_i sign_i q8_i
//     |inner| <= 32 * 43 * 127; |block integer| <= 256 * 43 * 127 * 31 < 2^26.
//   IQ1_S / IQ1_M value = d (2 s + 1) (grid + delta), delta = +-1/8, so with
//     8 (grid + delta) = 8 grid +- 1 (an integer in [-9, 9]):
//     sum_i w_i a_i = (d d_a / 8) sum_h (2 s_h + 1) sum_{i in h} (8 grid_i +- 1) q8_i
//     (h: the scale's span: IQ1_S 32 values, IQ1_M 16); |block integer| <= 256 * 9 * 127 * 15.
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

using quant::BlockIQ1_M;
using quant::BlockIQ1_S;
using quant::BlockIQ2_XXS;
using quant::BlockQ8_K;
using quant::Iq1mD;
using quant::kQkK;
namespace qi = quant::internal;

namespace {

// sum_k (8 grid_k + delta8) q8_k over one group of 8 (grid_k = int8 byte k of the IQ1 entry,
// delta8 = +-1).
int32_t Iq1Group(uint64_t entry, int delta8, const int8_t* q8) {
  int32_t s = 0;
  for (int k = 0; k < 8; ++k) {
    const int g = static_cast<int8_t>(entry >> (8 * k));
    s += (8 * g + delta8) * q8[k];
  }
  return s;
}

IqTables BuildIqTables() {
  IqTables t{};
  Iq2LevelCodes(qi::kIq2XxsGrid, qi::kIq2XxsGridSize, t.iq2xxs_lo, t.iq2xxs_hi);
  for (int s = 0; s < 128; ++s) {
    t.ksigns[s] = qi::Iq2SignByte(s);
    uint64_t m = 0;
    for (int k = 0; k < 8; ++k) {
      if ((t.ksigns[s] >> k) & 1) m |= uint64_t{0xFF} << (8 * k);
    }
    t.sign_mask[s] = m;
  }
  for (int e = 0; e < qi::kIq1SGridSize; ++e) {
    for (int k = 0; k < 8; ++k) {
      const int g = static_cast<int8_t>(qi::kIq1SGrid[e] >> (8 * k));
      MOESPLIT_CHECK(g >= -1 && g <= 1, "iq1s grid value ", g);
      t.iq1_levels[e] |= static_cast<uint64_t>(8 * g + 16) << (8 * k);
    }
  }
  AddIq23Codes(&t);
  return t;
}

}  // namespace

const IqTables& GetIqTables() {
  static const IqTables tables = BuildIqTables();
  return tables;
}

float DotIQ2XXS_Q8K_Scalar(const void* w_row, const void* a_row, int64_t n) {
  const auto* w = static_cast<const BlockIQ2_XXS*>(w_row);  // [n / 256]
  const auto* a = static_cast<const BlockQ8_K*>(a_row);     // [n / 256]
  float sum = 0.0f;
  for (int64_t b = 0; b < n / kQkK; ++b) {
    int32_t isum = 0;
    for (int j = 0; j < kQkK / 32; ++j) {
      const uint32_t idx = LoadU32(&w[b].qs[4 * j]);      // 4 grid indices
      const uint32_t aux = LoadU32(&w[b].qs[4 * j + 2]);  // 4 x 7 sign bits, scale << 28
      int32_t sub = 0;
      for (int g = 0; g < 4; ++g) {
        sub += SignedGroup<8>(qi::kIq2XxsGrid[(idx >> (8 * g)) & 0xFF],
                              qi::Iq2SignByte((aux >> (7 * g)) & 127), a[b].qs + 32 * j + 8 * g);
      }
      isum += static_cast<int32_t>(2 * (aux >> 28) + 1) * sub;
    }
    sum += 0.125f * HalfToFloat(w[b].d) * a[b].d * static_cast<float>(isum);
  }
  return sum;
}

float DotIQ1S_Q8K_Scalar(const void* w_row, const void* a_row, int64_t n) {
  const auto* w = static_cast<const BlockIQ1_S*>(w_row);  // [n / 256]
  const auto* a = static_cast<const BlockQ8_K*>(a_row);   // [n / 256]
  float sum = 0.0f;
  for (int64_t b = 0; b < n / kQkK; ++b) {
    int32_t isum = 0;
    for (int j = 0; j < kQkK / 32; ++j) {
      const uint16_t qh = w[b].qh[j];
      const int delta8 = (qh & 0x8000) ? -1 : 1;
      int32_t sub = 0;
      for (int g = 0; g < 4; ++g) {
        const int idx = w[b].qs[4 * j + g] | (((qh >> (3 * g)) & 7) << 8);
        sub += Iq1Group(qi::kIq1SGrid[idx], delta8, a[b].qs + 32 * j + 8 * g);
      }
      isum += (2 * ((qh >> 12) & 7) + 1) * sub;
    }
    sum += 0.125f * HalfToFloat(w[b].d) * a[b].d * static_cast<float>(isum);
  }
  return sum;
}

float DotIQ1M_Q8K_Scalar(const void* w_row, const void* a_row, int64_t n) {
  const auto* w = static_cast<const BlockIQ1_M*>(w_row);  // [n / 256]
  const auto* a = static_cast<const BlockQ8_K*>(a_row);   // [n / 256]
  float sum = 0.0f;
  for (int64_t b = 0; b < n / kQkK; ++b) {
    uint16_t sc[4];
    std::memcpy(sc, w[b].scales, sizeof(sc));
    int32_t isum = 0;
    for (int h = 0; h < kQkK / 16; ++h) {  // 16 values: groups 2h, 2h + 1; scale 3 bits
      const int s = (sc[h / 4] >> (3 * (h % 4))) & 7;
      int32_t sub = 0;
      for (int g = 2 * h; g < 2 * h + 2; ++g) {  // group g of the block: values 8g .. 8g + 7
        const int nibble = (w[b].qh[g / 2] >> (4 * (g % 2))) & 0xF;
        const int idx = w[b].qs[g] | ((nibble & 7) << 8);
        sub += Iq1Group(qi::kIq1SGrid[idx], (nibble & 8) ? -1 : 1, a[b].qs + 8 * g);
      }
      isum += (2 * s + 1) * sub;
    }
    sum += 0.125f * HalfToFloat(Iq1mD(sc)) * a[b].d * static_cast<float>(isum);
  }
  return sum;
}

}  // namespace moesplit::gemv::internal
