// The lattice tables of ggml's IQ1 / IQ2 / IQ3 families under the names the CPU reference
// (quant/) and the IQ kernels (gemv/gemv_iq_*) read. The data, its shapes and byte values are
// in core/base/iq_grid.h (shared with the GPU decoders, so a grid exists once).
#pragma once

#include <cstdint>

#include "core/base/iq_grid.h"
#include "core/base/iq_grids_iq1_iq3.h"
#include "core/base/iq_grids_iq2.h"

namespace moesplit::quant::internal {

inline constexpr int kIq2XxsGridSize = 256;
inline constexpr int kIq2XsGridSize = 512;
inline constexpr int kIq2SGridSize = 1024;
inline constexpr int kIq3XxsGridSize = 256;
inline constexpr int kIq3SGridSize = 512;
inline constexpr int kIq1SGridSize = 2048;

inline constexpr const uint64_t (&kIq2XxsGrid)[kIq2XxsGridSize] = kIq2XxsGridData.v;
inline constexpr const uint64_t (&kIq2XsGrid)[kIq2XsGridSize] = kIq2XsGridData.v;
inline constexpr const uint64_t (&kIq2SGrid)[kIq2SGridSize] = kIq2SGridData.v;
inline constexpr const uint32_t (&kIq3XxsGrid)[kIq3XxsGridSize] = kIq3XxsGridData.v;
inline constexpr const uint32_t (&kIq3SGrid)[kIq3SGridSize] = kIq3SGridData.v;
inline constexpr const uint64_t (&kIq1SGrid)[kIq1SGridSize] = kIq1SGridData.v;

using ::moesplit::Iq2SignByte;
using ::moesplit::kIq1Delta;

}  // namespace moesplit::quant::internal
