// The lattice tables of ggml's IQ1 / IQ2 / IQ3 families (facts of the formats, transcribed as
// data from ggml-common.h into iq_grids_iq2.cc and iq_grids_iq1_iq3.cc). A block stores, per
// group of 8 (IQ2, IQ1) or 4 (IQ3) values, an index into one of these tables; the entry's bytes
// are the group's magnitudes, value j in byte j (little-endian). Signs are stored separately
// (IQ2, IQ3: 7 bits a group, see kIq2Signs) or are part of the entry (IQ1: signed bytes).
// Internal to cpu_kernels/: the reference (quant/) and the IQ kernels (gemv/gemv_iq_*) read
// the same tables, so a grid exists once.
#pragma once

#include <cstdint>

namespace moesplit::quant::internal {

// ggml name        entries  bytes per entry  byte values
// iq2xxs_grid        256          8          8, 25, 43
// iq2xs_grid         512          8          8, 25, 43
// iq2s_grid         1024          8          8, 25, 43
// iq3xxs_grid        256          4          4, 12, 20, 28, 36, 44, 52, 62
// iq3s_grid          512          4          1, 3, 5, .., 15
// iq1s_grid         2048          8          -1, 0, +1 (int8)
inline constexpr int kIq2XxsGridSize = 256;
inline constexpr int kIq2XsGridSize = 512;
inline constexpr int kIq2SGridSize = 1024;
inline constexpr int kIq3XxsGridSize = 256;
inline constexpr int kIq3SGridSize = 512;
inline constexpr int kIq1SGridSize = 2048;

extern const uint64_t kIq2XxsGrid[kIq2XxsGridSize];
extern const uint64_t kIq2XsGrid[kIq2XsGridSize];
extern const uint64_t kIq2SGrid[kIq2SGridSize];
extern const uint32_t kIq3XxsGrid[kIq3XxsGridSize];
extern const uint32_t kIq3SGrid[kIq3SGridSize];
extern const uint64_t kIq1SGrid[kIq1SGridSize];

// ggml's ksigns_iq2xs: IQ2_XXS / IQ2_XS / IQ3_XXS store the signs of 8 values in 7 bits, the
// 8th sign chosen so that the number of negative values is even (the quantizer flips the
// smallest value to make it so). Entry s is s with bit 7 set when s has an odd number of ones;
// bit j set means value j is negative. Computed, not transcribed: it is that rule.
inline constexpr uint8_t Iq2SignByte(int s) {
  int ones = 0;
  for (int b = 0; b < 7; ++b) ones += (s >> b) & 1;
  return static_cast<uint8_t>(s | ((ones & 1) << 7));
}

// The offset IQ1_S / IQ1_M add to every grid value (+/- IQ1S_DELTA, IQ1M_DELTA in ggml; both
// 0.125), the sign chosen per group by one bit.
inline constexpr float kIq1Delta = 0.125f;

}  // namespace moesplit::quant::internal
