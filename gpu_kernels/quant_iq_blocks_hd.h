// Unit decoders (quant_blocks_hd.h's contract: out[0..32) = values 32j .. 32j + 31 of the block
// at b, bit for bit as cpu_kernels' DequantizeRow / ggml's dequantize_row_*) of the lattice
// types and MXFP4, on both sides:
//   type     block values  block bytes  units/block  value
//   IQ2_XXS      256           66            8       ((d (0.5 + s_j)) / 4) grid8 +/-
//   IQ2_XS       256           74            8       ((d (0.5 + s)) / 4) grid8 +/-  (2 scales)
//   IQ2_S        256           82            8       the same, 1024-entry grid, explicit signs
//   IQ3_XXS      256           98            8       ((d (0.5 + s_j)) / 2) grid4 +/-
//   IQ3_S        256          110            8       (d (1 + 2 s_j)) grid4 +/-
//   IQ1_S        256           50            8       (d (2 s_j + 1)) (grid +/- 1/8)
//   IQ1_M        256           56            8       the same, 2 scales, a delta sign per group
//   MXFP4         32           17            1       2^(e - 128) kMxfp4Values[q]
// Unit j is sub-block j of the lattice types (32 values: 4 groups of 8, IQ3 8 groups of 4).
// The grids (core/base/iq_grid.h) are read from the constexpr objects on the host and from
// __device__ copies made of them at compile time on the GPU: global memory through the L1, not
// __constant__ memory, which serialises a warp whose lanes read different entries (they do:
// each lane decodes its own unit). The products are rounded alone (HdMul / HdAdd), in ggml's
// operand order: e.g. IQ2_XXS's scale is (d * (0.5f + s)) * 0.25f, then (scale * magnitude) *
// sign; another order is another number.
#pragma once

#include <cstdint>

#include "core/base/iq_grid.h"
#include "core/base/iq_grids_iq1_iq3.h"
#include "core/base/iq_grids_iq2.h"
#include "gpu_kernels/hd.h"
#include "gpu_kernels/hd_bits.h"

namespace moesplit::gpu {

#if defined(__CUDACC__)
// Device copies of the grids (2 + 4 + 8 + 1 + 2 + 16 KiB per translation unit that decodes).
static __device__ const IqGrid<uint64_t, 256> kIq2XxsGridDev = kIq2XxsGridData;
static __device__ const IqGrid<uint64_t, 512> kIq2XsGridDev = kIq2XsGridData;
static __device__ const IqGrid<uint64_t, 1024> kIq2SGridDev = kIq2SGridData;
static __device__ const IqGrid<uint32_t, 256> kIq3XxsGridDev = kIq3XxsGridData;
static __device__ const IqGrid<uint32_t, 512> kIq3SGridDev = kIq3SGridData;
static __device__ const IqGrid<uint64_t, 2048> kIq1SGridDev = kIq1SGridData;
#endif

// Entry i of grid `name` (kIq2XxsGrid, ...) on this side.
#if defined(__CUDA_ARCH__)
#define MOESPLIT_HD_GRID(name, i) (name##Dev.v[(i)])
#else
#define MOESPLIT_HD_GRID(name, i) (name##Data.v[(i)])
#endif

// n values out[k] = (scale * magnitude_k) * (bit k of signs ? -1 : 1), magnitude k = byte k of
// the grid entry.
template <int n>
MOESPLIT_HD void HdSignedGroup(float scale, uint64_t entry, uint32_t signs, float* out) {
  MOESPLIT_HD_UNROLL
  for (int k = 0; k < n; ++k) {
    const float mag = static_cast<float>((entry >> (8 * k)) & 0xFF);
    out[k] = HdMul(HdMul(scale, mag), ((signs >> k) & 1) ? -1.0f : 1.0f);
  }
}

// 8 values out[k] = scale * (grid_k + delta), grid_k the signed byte k in {-1, 0, 1}: IQ1.
MOESPLIT_HD void HdIq1Group(float scale, uint64_t entry, float delta, float* out) {
  MOESPLIT_HD_UNROLL
  for (int k = 0; k < 8; ++k) {
    const int g = static_cast<int>(static_cast<int8_t>(static_cast<uint8_t>(entry >> (8 * k))));
    out[k] = HdMul(scale, HdAdd(static_cast<float>(g), delta));
  }
}

// (d * (0.5f + s)) * factor: the IQ2 (factor 0.25) / IQ3_XXS (0.5) sub-block scale.
MOESPLIT_HD float HdIqHalfStepScale(float d, uint32_t s, float factor) {
  return HdMul(HdMul(d, HdAdd(0.5f, static_cast<float>(s))), factor);
}

// 66 B: d at 0; sub-block j at 2 + 8 j: 4 grid-index bytes, then a u32 of 4 x 7 sign bits and
// the 4-bit scale (bits 28-31).
MOESPLIT_HD void HdDecodeIQ2_XXS(const uint8_t* b, int j, float* out) {
  const float d = HdHalfToFloat(HdLoadU16(b));
  const uint8_t* q = b + 2 + 8 * j;
  const uint32_t aux = HdLoadU32(q + 4);
  const float db = HdIqHalfStepScale(d, aux >> 28, 0.25f);
  MOESPLIT_HD_UNROLL
  for (int g = 0; g < 4; ++g) {
    HdSignedGroup<8>(db, MOESPLIT_HD_GRID(kIq2XxsGrid, q[g]), Iq2SignByte((aux >> (7 * g)) & 127),
                     out + 8 * g);
  }
}

// 74 B: d at 0; u16 qs[32] at 2 (group g of sub-block j: qs[4 j + g] = 9-bit grid index | 7-bit
// sign index << 9); scales[8] at 66 (groups 0-1: low nibble, 2-3: high).
MOESPLIT_HD void HdDecodeIQ2_XS(const uint8_t* b, int j, float* out) {
  const float d = HdHalfToFloat(HdLoadU16(b));
  const uint32_t sc = b[66 + j];
  const float db[2] = {HdIqHalfStepScale(d, sc & 0xF, 0.25f), HdIqHalfStepScale(d, sc >> 4, 0.25f)};
  MOESPLIT_HD_UNROLL
  for (int g = 0; g < 4; ++g) {
    const uint32_t q = HdLoadU16(b + 2 + 2 * (4 * j + g));
    HdSignedGroup<8>(db[g / 2], MOESPLIT_HD_GRID(kIq2XsGrid, q & 511), Iq2SignByte(q >> 9),
                     out + 8 * g);
  }
}

// 82 B: d at 0; qs[64] at 2 (32 low grid-index bytes, then 32 sign bytes); qh[8] at 66 (bits
// 2 g, 2 g + 1: index bits 8-9 of group g); scales[8] at 74 (as IQ2_XS).
MOESPLIT_HD void HdDecodeIQ2_S(const uint8_t* b, int j, float* out) {
  const float d = HdHalfToFloat(HdLoadU16(b));
  const uint32_t sc = b[74 + j], qh = b[66 + j];
  const float db[2] = {HdIqHalfStepScale(d, sc & 0xF, 0.25f), HdIqHalfStepScale(d, sc >> 4, 0.25f)};
  MOESPLIT_HD_UNROLL
  for (int g = 0; g < 4; ++g) {
    const uint32_t idx = b[2 + 4 * j + g] | (((qh >> (2 * g)) & 3) << 8);
    HdSignedGroup<8>(db[g / 2], MOESPLIT_HD_GRID(kIq2SGrid, idx), b[34 + 4 * j + g], out + 8 * g);
  }
}

// 98 B: d at 0; 64 grid indices (4 values each) at 2; at 66 + 4 j a u32 of sub-block j's 4 x 7
// sign bits (one sign byte per 8 values) and its scale (bits 28-31).
MOESPLIT_HD void HdDecodeIQ3_XXS(const uint8_t* b, int j, float* out) {
  const float d = HdHalfToFloat(HdLoadU16(b));
  const uint8_t* q = b + 2 + 8 * j;
  const uint32_t aux = HdLoadU32(b + 66 + 4 * j);
  const float db = HdIqHalfStepScale(d, aux >> 28, 0.5f);
  MOESPLIT_HD_UNROLL
  for (int g = 0; g < 4; ++g) {
    const uint32_t signs = Iq2SignByte((aux >> (7 * g)) & 127);
    HdSignedGroup<4>(db, MOESPLIT_HD_GRID(kIq3XxsGrid, q[2 * g]), signs, out + 8 * g);
    HdSignedGroup<4>(db, MOESPLIT_HD_GRID(kIq3XxsGrid, q[2 * g + 1]), signs >> 4, out + 8 * g + 4);
  }
}

// 110 B: d at 0; qs[64] at 2 (low 8 bits of the grid index of values 4 k .. 4 k + 3); qh[8] at
// 66 (bit k % 8 of qh[k / 8]: the 9th); signs[32] at 74 (bit 4 (k % 2) + i of signs[k / 2]:
// value 4 k + i); scales[4] at 106 (nibble j % 2 of scales[j / 2]).
MOESPLIT_HD void HdDecodeIQ3_S(const uint8_t* b, int j, float* out) {
  const float d = HdHalfToFloat(HdLoadU16(b));
  const uint32_t s = (b[106 + j / 2] >> (4 * (j % 2))) & 0xF;
  const float db = HdMul(d, static_cast<float>(1 + 2 * s));
  const uint32_t qh = b[66 + j];
  MOESPLIT_HD_UNROLL
  for (int i = 0; i < 8; ++i) {  // 4-value group k = 8 j + i of the block
    const uint32_t idx = b[2 + 8 * j + i] | (((qh >> i) & 1) << 8);
    const uint32_t signs = b[74 + 4 * j + i / 2] >> (4 * (i % 2));
    HdSignedGroup<4>(db, MOESPLIT_HD_GRID(kIq3SGrid, idx), signs, out + 4 * i);
  }
}

// 50 B: d at 0; qs[32] at 2 (low 8 bits of the grid indices); u16 qh[8] at 34 (sub-block j:
// 3 index bits per group, the 3-bit scale at bits 12-14, the delta's sign at bit 15).
MOESPLIT_HD void HdDecodeIQ1_S(const uint8_t* b, int j, float* out) {
  const float d = HdHalfToFloat(HdLoadU16(b));
  const uint32_t qh = HdLoadU16(b + 34 + 2 * j);
  const float dl = HdMul(d, static_cast<float>(2 * ((qh >> 12) & 7) + 1));
  const float delta = (qh & 0x8000) ? -kIq1Delta : kIq1Delta;
  MOESPLIT_HD_UNROLL
  for (int g = 0; g < 4; ++g) {
    const uint32_t idx = b[2 + 4 * j + g] | (((qh >> (3 * g)) & 7) << 8);
    HdIq1Group(dl, MOESPLIT_HD_GRID(kIq1SGrid, idx), delta, out + 8 * g);
  }
}

// 56 B: qs[32] at 0; qh[16] at 32 (a nibble per group: 3 index bits, the delta's sign); 4 u16
// scale words at 48 (word w: 3-bit scales of sub-blocks 2 w, 2 w + 1 at bits 0-5 / 6-11 (one
// per 16 values), and nibble w of the f16 super-scale at bits 12-15).
MOESPLIT_HD void HdDecodeIQ1_M(const uint8_t* b, int j, float* out) {
  uint32_t sc[4];
  MOESPLIT_HD_UNROLL
  for (int w = 0; w < 4; ++w) sc[w] = HdLoadU16(b + 48 + 2 * w);
  const float d = HdHalfToFloat((sc[0] >> 12) | ((sc[1] >> 8) & 0x00F0) | ((sc[2] >> 4) & 0x0F00) |
                                (sc[3] & 0xF000));
  const int shift = 6 * (j % 2);
  const float dl[2] = {HdMul(d, static_cast<float>(2 * ((sc[j / 2] >> shift) & 7) + 1)),
                       HdMul(d, static_cast<float>(2 * ((sc[j / 2] >> (shift + 3)) & 7) + 1))};
  MOESPLIT_HD_UNROLL
  for (int g = 0; g < 4; ++g) {
    const uint32_t nibble = (b[32 + 2 * j + g / 2] >> (4 * (g % 2))) & 0xF;
    const uint32_t idx = b[4 * j + g] | ((nibble & 7) << 8);
    HdIq1Group(dl[g / 2], MOESPLIT_HD_GRID(kIq1SGrid, idx), (nibble & 8) ? -kIq1Delta : kIq1Delta,
               out + 8 * g);
  }
}

// E2M1 code q (sign bit 3) doubled, as ggml's kvalues_mxfp4: 0, 1, 2, 3, 4, 6, 8, 12 and their
// negatives. Computed, so that no table is needed on either side.
MOESPLIT_HD float HdMxfp4Level(uint32_t q) {
  const int m = static_cast<int>(q & 7);
  const int mag = m < 4 ? m : m < 6 ? 4 + 2 * (m - 4) : 8 + 4 * (m - 6);
  return static_cast<float>((q & 8) ? -mag : mag);  // code 8 is +0 in ggml's table, not -0
}

// 17 B: the E8M0 exponent e at 0, qs[16] at 1 (byte l: value l low nibble, l + 16 high). The
// scale 2^(e - 128) from its bits as ggml's GGML_E8M0_TO_FP32_HALF (e < 2: subnormal).
MOESPLIT_HD void HdDecodeMXFP4(const uint8_t* b, float* out) {
  const uint32_t e = b[0];
  const float d = HdBitsToFloat(e < 2 ? 0x00200000u << e : (e - 1) << 23);
  MOESPLIT_HD_UNROLL
  for (int l = 0; l < 16; ++l) {
    out[l] = HdMul(HdMxfp4Level(b[1 + l]), d);
    out[l + 16] = HdMul(HdMxfp4Level(b[1 + l] >> 4), d);
  }
}

}  // namespace moesplit::gpu
