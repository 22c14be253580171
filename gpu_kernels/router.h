// MoE routing on the GPU: moe::Route (moe/routing.h) for a batch of tokens, with the same steps,
// tie-breaking and float/double precision (the arithmetic is gpu_kernels/router_hd.h). Plain C++
// interface; pointers are device pointers; work is queued on `stream`.
//
// Agreement with moe::Route: the scores use CUDA's expf (<= 2 ulp) and, for softmax, the double
// sum in tree order, so scores differ by a few ulp; selection, renormalisation and scaling are
// then the CPU's exact operations. ids are identical except where two candidates' select values
// are within those few ulp of each other (exact ties are broken identically: lower index first);
// weights agree to ~1e-6 relative.
#pragma once

#include <cstdint>

#include "core/base/status.h"
#include "gpu_kernels/device_buffer.h"
#include "gpu_kernels/router_hd.h"  // gpu::RouterConfig (mirrors moe::RouterConfig)

namespace moesplit::gpu {

// Errors (InvalidArgument, naming the value): E outside [1, kRouterMaxExperts], k outside
// [1, min(E, kRouterMaxUsed)], with n_group > 1: E not a multiple of n_group or n_group_used
// outside [1, n_group]; an unknown gating.
Status ValidateRouterConfig(const RouterConfig& config);

// logits: [n_tok x E] f32; bias: [E] or nullptr (selection only); ids: [n_tok x k] int32;
// weights: [n_tok x k] f32. One warp per token.
Status Route(const RouterConfig& config, const float* logits, const float* bias, int64_t n_tok,
             int32_t* ids, float* weights, Stream stream);

}  // namespace moesplit::gpu
