// Scalar reference dots of the legacy-block weights Q4_0 / Q4_1 / Q5_0 / Q5_1 / IQ4_NL / MXFP4
// against Q8_0 activations: the twins every SIMD tier is tested against (the Q8_0 x Q8_0 one is
// DotQ8_0_Q8_0_Scalar in gemv_scalar.cc). Per block the integer sum is exact; the float terms d_w *
// d_a * isum are accumulated in block order.
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "cpu_kernels/gemv/gemv_internal.h"
#include "cpu_kernels/gemv/gemv_isa_common.h"
#include "cpu_kernels/quant/blocks.h"
#include "cpu_kernels/quant/blocks_iq.h"

namespace moesplit::gemv::internal {

using quant::BlockQ4_0;
using quant::BlockQ5_0;
using quant::BlockQ8_0;
using quant::kQk;

namespace {

// The unsigned 5-bit quant u in [0, 31] of value j (Q5_0 / Q5_1): the nibble of qs (low for
// j < 16, high for j >= 16) with bit j of the little-endian qh word as its 5th bit.
int Q5Quant(const uint8_t* qs, uint32_t qh, int j) {
  const int nibble = j < kQk / 2 ? qs[j] & 0xF : qs[j - kQk / 2] >> 4;
  return nibble | static_cast<int>((qh >> j) & 1) << 4;
}

}  // namespace

// Q4_0 value j = d * (q_j - 8), q_j = qs[j] & 15 (j < 16), qs[j - 16] >> 4 (j >= 16).
//   sum_j w_j a_j = d_w * d_a * sum_j (q_j - 8) * a_j,  |isum| <= 32 * 8 * 127
float DotQ4_0_Q8_0_Scalar(const void* w_row, const void* a_row, int64_t n) {
  const auto* w = static_cast<const BlockQ4_0*>(w_row);  // [n / 32]
  const auto* a = static_cast<const BlockQ8_0*>(a_row);  // [n / 32]
  const int64_t nb = n / kQk;
  float sum = 0.0f;
  for (int64_t b = 0; b < nb; ++b) {
    int32_t isum = 0;
    for (int l = 0; l < kQk / 2; ++l) {
      isum += ((w[b].qs[l] & 0xF) - 8) * a[b].qs[l];
      isum += ((w[b].qs[l] >> 4) - 8) * a[b].qs[l + kQk / 2];
    }
    sum += HalfToFloat(w[b].d) * HalfToFloat(a[b].d) * static_cast<float>(isum);
  }
  return sum;
}

// Q5_0 value j = d * ((q_j | h_j << 4) - 16), q_j the nibble as in Q4_0, h_j = bit j of qh.
//   |isum| <= 32 * 16 * 127
float DotQ5_0_Q8_0_Scalar(const void* w_row, const void* a_row, int64_t n) {
  const auto* w = static_cast<const BlockQ5_0*>(w_row);  // [n / 32]
  const auto* a = static_cast<const BlockQ8_0*>(a_row);  // [n / 32]
  const int64_t nb = n / kQk;
  float sum = 0.0f;
  for (int64_t b = 0; b < nb; ++b) {
    uint32_t qh;
    std::memcpy(&qh, w[b].qh, 4);
    int32_t isum = 0;
    for (int j = 0; j < kQk; ++j) isum += (Q5Quant(w[b].qs, qh, j) - 16) * a[b].qs[j];
    sum += HalfToFloat(w[b].d) * HalfToFloat(a[b].d) * static_cast<float>(isum);
  }
  return sum;
}

// Q4_1 / Q5_1 value j = d * u_j + m: u_j the nibble as in Q4_0 (in [0, 15]; Q5_1: with bit j
// of qh as its 5th bit, in [0, 31] as Q5_0's quant), with no offset: m is the block's. With d_a
// the Q8_0 scale:
//   sum_j w_j a_j = d d_a sum_j u_j a_j + m d_a sum_j a_j,
//   |sum u a| <= 32 * 31 * 127, |sum a| <= 32 * 127: two integers and two multiply-adds a block.
namespace {

template <class Block>
float DotWithMin(const void* w_row, const void* a_row, int64_t n) {
  constexpr bool kQ5 = std::is_same_v<Block, quant::BlockQ5_1>;
  const auto* w = static_cast<const Block*>(w_row);      // [n / 32]
  const auto* a = static_cast<const BlockQ8_0*>(a_row);  // [n / 32]
  const int64_t nb = n / kQk;
  float sum = 0.0f;
  for (int64_t b = 0; b < nb; ++b) {
    uint32_t qh = 0;
    if constexpr (kQ5) std::memcpy(&qh, w[b].qh, 4);
    int32_t isum = 0, asum = 0;
    for (int j = 0; j < kQk; ++j) {
      isum += Q5Quant(w[b].qs, qh, j) * a[b].qs[j];  // qh = 0: the nibble alone (Q4_1)
      asum += a[b].qs[j];
    }
    const float da = HalfToFloat(a[b].d);
    sum += HalfToFloat(w[b].d) * da * static_cast<float>(isum);
    sum += HalfToFloat(w[b].m) * da * static_cast<float>(asum);
  }
  return sum;
}

}  // namespace

float DotQ4_1_Q8_0_Scalar(const void* w_row, const void* a_row, int64_t n) {
  return DotWithMin<quant::BlockQ4_1>(w_row, a_row, n);
}

float DotQ5_1_Q8_0_Scalar(const void* w_row, const void* a_row, int64_t n) {
  return DotWithMin<quant::BlockQ5_1>(w_row, a_row, n);
}

// The 4-bit non-linear blocks: value j = scale * kValues[q_j], q_j the nibble as in Q4_0, and
//   sum_j w_j a_j = scale * d_a * sum_j kValues[q_j] * a_j
// IQ4_NL: kIq4Values (|q| <= 127: |isum| <= 32 * 127 * 127), scale the f16 d; MXFP4: the doubled
// E2M1 levels kMxfp4Values (|q| <= 12), scale 2^(e - 128) from the E8M0 byte e.
template <class Block>
float DotNonLinear4(const void* w_row, const void* a_row, int64_t n) {
  constexpr bool kMx = std::is_same_v<Block, quant::BlockMXFP4>;
  const int8_t* values = kMx ? quant::kMxfp4Values : quant::kIq4Values;
  const auto* w = static_cast<const Block*>(w_row);      // [n / 32]
  const auto* a = static_cast<const BlockQ8_0*>(a_row);  // [n / 32]
  const int64_t nb = n / kQk;
  float sum = 0.0f;
  for (int64_t b = 0; b < nb; ++b) {
    int32_t isum = 0;
    for (int l = 0; l < kQk / 2; ++l) {
      isum += values[w[b].qs[l] & 0xF] * a[b].qs[l];
      isum += values[w[b].qs[l] >> 4] * a[b].qs[l + kQk / 2];
    }
    float scale;
    if constexpr (kMx) {
      scale = quant::Mxfp4HalfScale(w[b].e);
    } else {
      scale = HalfToFloat(w[b].d);
    }
    sum += scale * HalfToFloat(a[b].d) * static_cast<float>(isum);
  }
  return sum;
}

float DotIQ4NL_Q8_0_Scalar(const void* w_row, const void* a_row, int64_t n) {
  return DotNonLinear4<quant::BlockIQ4_NL>(w_row, a_row, n);
}

float DotMXFP4_Q8_0_Scalar(const void* w_row, const void* a_row, int64_t n) {
  return DotNonLinear4<quant::BlockMXFP4>(w_row, a_row, n);
}

}  // namespace moesplit::gemv::internal
