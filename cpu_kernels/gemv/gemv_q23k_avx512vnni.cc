// Q2_K / Q3_K x Q8_K, Avx512Vnni tier: the file-layout dots (vpdpwssd) and the kQ2_K_R16 /
// kQ3_K_R16 kernels. Compiled with MOESPLIT_FLAGS_AVX512VNNI (gemv/kquants.cmake); reached only
// through KernelsFor(IsaTier::kAvx512Vnni / kAmx). The bodies are in gemv_q23k_avx512.inc.
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

#define Q23_NAME(x) x##_Avx512Vnni
#include "cpu_kernels/gemv/gemv_q23k_avx512.inc"
#undef Q23_NAME

}  // namespace moesplit::gemv::internal
