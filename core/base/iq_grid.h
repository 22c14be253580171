// The lattice tables of ggml's IQ1 / IQ2 / IQ3 families are facts of the GGUF formats, needed
// by the CPU reference and kernels (cpu_kernels/quant/iq_grids.h) and by the GPU decoders
// (gpu_kernels/quant_iq_blocks_hd.h), so the data lives here, at the ground both may use, as
// constexpr values: a GPU translation unit copies them into device memory at compile time
// (a __device__ variable initialised from the constexpr object), so a grid is written once.
//
// A block stores, per group of 8 (IQ2, IQ1) or 4 (IQ3) values, an index into one of these
// tables; the entry's bytes are the group's magnitudes, value j in byte j (little-endian).
// Signs are stored separately (IQ2, IQ3: 7 bits a group, see Iq2SignByte) or are part of the
// entry (IQ1: signed bytes).
//   ggml name        entries  bytes per entry  byte values       here
//   iq2xxs_grid        256          8          8, 25, 43        kIq2XxsGridData
//   iq2xs_grid         512          8          8, 25, 43        kIq2XsGridData
//   iq2s_grid         1024          8          8, 25, 43        kIq2SGridData
//   iq3xxs_grid        256          4          4, 12, .., 52, 62 kIq3XxsGridData
//   iq3s_grid          512          4          1, 3, 5, .., 15  kIq3SGridData
//   iq1s_grid         2048          8          -1, 0, +1 (int8) kIq1SGridData
// (core/base/iq_grids_iq2.h, core/base/iq_grids_iq1_iq3.h).
#pragma once

#include <cstdint>

namespace moesplit {

// A grid as one object (not a bare array), so that a __device__ copy can be initialised from it.
template <typename T, int N>
struct IqGrid {
  T v[N];  // [N] entries
};

// ggml's ksigns_iq2xs: IQ2_XXS / IQ2_XS / IQ3_XXS store the signs of 8 values in 7 bits, the
// 8th sign chosen so that the number of negative values is even (the quantizer flips the
// smallest value to make it so). Entry s is s with bit 7 set when s has an odd number of ones;
// bit j set means value j is negative. Computed, not transcribed: it is that rule. Plain
// arithmetic, so the GPU decoders compute it too.
#if defined(__CUDACC__)
__host__ __device__
#endif
    inline constexpr uint8_t
    Iq2SignByte(int s) {
  int ones = 0;
  for (int b = 0; b < 7; ++b) ones += (s >> b) & 1;
  return static_cast<uint8_t>(s | ((ones & 1) << 7));
}

// The offset IQ1_S / IQ1_M add to every grid value (+/- IQ1S_DELTA, IQ1M_DELTA in ggml; both
// 0.125), the sign chosen per group by one bit. A scalar constexpr: device code reads it too.
inline constexpr float kIq1Delta = 0.125f;

}  // namespace moesplit
