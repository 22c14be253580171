// IQ4_XS x Q8_K, AVX-512 VNNI tier on CPUs with AVX-512 VBMI (vpermb lookups). Compiled with
// MOESPLIT_FLAGS_AVX512VNNI + -mavx512vbmi (gemv/kquants.cmake); reached only through
// KernelsFor(IsaTier::kAvx512Vnni / kAmx), and only where DetectCpuFeatures() reports
// avx512vbmi. The bodies are in gemv_iq4xs_avx512.inc.
#include <immintrin.h>

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "cpu_kernels/gemv/gemv_internal.h"
#include "cpu_kernels/gemv/gemv_isa_common.h"
#include "cpu_kernels/quant/blocks.h"
#include "cpu_kernels/quant/repack.h"

namespace moesplit::gemv::internal {

#define IQ4_NAME(x) x##_Avx512Vbmi
#include "cpu_kernels/gemv/gemv_iq4xs_avx512.inc"
#undef IQ4_NAME

}  // namespace moesplit::gemv::internal
