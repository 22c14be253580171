// Per-ISA kernel entry points behind GemvKernels. Internal to cpu_kernels/gemv/.
//
// Each ISA lives in its own .cc compiled with its own -m flags (cpu_kernels/CMakeLists.txt).
// Those files must not call inline or template functions from shared headers (float16.h,
// <algorithm>, ...): the linker keeps one copy of such a function, and it could be the copy
// compiled with AVX-512 flags, which would then run on a CPU without AVX-512. Helpers they need
// come from gemv_isa_common.h, whose functions have internal linkage.
#pragma once

#include <cstdint>

namespace moesplit::gemv::internal {

float DotQ4K_Q8K_Scalar(const void* w_row, const void* a_row, int64_t n);
float DotQ8_0_Q8_0_Scalar(const void* w_row, const void* a_row, int64_t n);

#if defined(MOESPLIT_GEMV_X86)
float DotQ4K_Q8K_Avx2(const void* w_row, const void* a_row, int64_t n);
float DotQ8_0_Q8_0_Avx2(const void* w_row, const void* a_row, int64_t n);
float DotQ4K_Q8K_Avx512(const void* w_row, const void* a_row, int64_t n);
float DotQ8_0_Q8_0_Avx512(const void* w_row, const void* a_row, int64_t n);
float DotQ4K_Q8K_Avx512Vnni(const void* w_row, const void* a_row, int64_t n);
float DotQ8_0_Q8_0_Avx512Vnni(const void* w_row, const void* a_row, int64_t n);
#endif

}  // namespace moesplit::gemv::internal
