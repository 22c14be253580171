// Q3_K x Q8_K, the kQ3_K_R16 kernel of the Avx512Vnni tier on CPUs with GFNI: its level
// extractions are vgf2p8affineqb bit picks (one op each, where shift + AND are two) instead of
// shifts. Compiled with MOESPLIT_FLAGS_AVX512VNNI + -mgfni (gemv/kquants.cmake); reached only
// through KernelsFor(IsaTier::kAvx512Vnni / kAmx) where Q3KUsesGfni(DetectCpuFeatures()) (not
// on Zen 4, where the picks share vpdpbusd's pipes). The bodies are in gemv_q23k_avx512.inc
// (kQ2_K_R16's kernel, shifts and ANDs only, and the file-layout dots stay the plain VNNI
// file's).
#include <immintrin.h>

#include <cstddef>
#include <cstdint>
#include <type_traits>
#include <utility>

#include "cpu_kernels/gemv/gemv_internal.h"
#include "cpu_kernels/gemv/gemv_isa_common.h"
#include "cpu_kernels/quant/blocks.h"
#include "cpu_kernels/quant/repack.h"

namespace moesplit::gemv::internal {

#define Q23_NAME(x) x##_Avx512Gfni
#define Q23_R16_ONLY 1
#include "cpu_kernels/gemv/gemv_q23k_avx512.inc"
#undef Q23_R16_ONLY
#undef Q23_NAME

}  // namespace moesplit::gemv::internal
