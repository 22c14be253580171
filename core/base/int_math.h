// Integer helpers for work splitting and buffer sizing (tasks per thread, rows per block).
// Not for the per-ISA kernel files (cpu_kernels/gemv/*_avx*.cc): they must not call inline
// functions from shared headers (see gemv_internal.h).
#pragma once

#include <cstdint>

namespace moesplit {

// ceil(a / b) for a >= 0, b > 0.
constexpr int64_t CeilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

// The smallest multiple of m that is >= a (a >= 0, m > 0).
constexpr int64_t RoundUp(int64_t a, int64_t m) { return CeilDiv(a, m) * m; }

}  // namespace moesplit
