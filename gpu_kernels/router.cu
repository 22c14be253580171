// MoE routing kernel: one warp (a 32-thread block) per token. The lanes compute the scores and
// the group scores in parallel, then pick the top-k in k rounds of a warp arg-max; lane 0 does
// the renormalisation (router_hd.h RouterWeights, the CPU's float order). See router.h.
#include <cuda_runtime.h>

#include <cmath>

#include "gpu_kernels/cuda_check.h"
#include "gpu_kernels/kernel_macros.h"
#include "gpu_kernels/router.h"

namespace moesplit::gpu {
namespace {

constexpr int kWarp = 32;
constexpr int64_t kMaxGridX = 2147483647;  // gridDim.x limit: tokens per launch
constexpr unsigned kFull = 0xffffffffu;

__device__ float WarpMax(float v) {
  for (int o = kWarp / 2; o > 0; o >>= 1) {
    const float u = __shfl_xor_sync(kFull, v, o);
    v = (v < u) ? u : v;  // std::max(v, u)
  }
  return v;
}

__device__ double WarpSum(double v) {
  for (int o = kWarp / 2; o > 0; o >>= 1) v += __shfl_xor_sync(kFull, v, o);
  return v;
}

// The best (value, index) over the warp by RouterBetter; index -1 = no candidate. A total order
// (for non-NaN values): any combination order gives the sequential scan's answer.
__device__ void WarpBest(float* v, int* idx) {
  for (int o = kWarp / 2; o > 0; o >>= 1) {
    const float ov = __shfl_xor_sync(kFull, *v, o);
    const int oi = __shfl_xor_sync(kFull, *idx, o);
    if (oi >= 0 && (*idx < 0 || RouterBetter(ov, oi, *v, *idx))) {
      *v = ov;
      *idx = oi;
    }
  }
}

// scores[e] for the token's logits lt: [E]; softmax (max, exp, double sum over the warp) or
// sigmoid. Lane l handles experts l, l + 32, ...
__device__ void WarpScores(const RouterConfig& c, const float* lt, float* scores) {
  const int lane = threadIdx.x, E = c.n_expert;
  if (c.gating == RouterGating::kSigmoid) {
    for (int e = lane; e < E; e += kWarp) scores[e] = RouterSigmoid(lt[e]);
    return;
  }
  float max = -INFINITY;
  for (int e = lane; e < E; e += kWarp) max = (max < lt[e]) ? lt[e] : max;
  max = WarpMax(max);
  double sum = 0.0;
  for (int e = lane; e < E; e += kWarp) {
    scores[e] = expf(lt[e] - max);
    sum += scores[e];
  }
  const float inv = static_cast<float>(1.0 / WarpSum(sum));
  for (int e = lane; e < E; e += kWarp) scores[e] *= inv;
}

// select: [E] in shared memory; experts outside the n_group_used best groups get -inf.
// group_score: [G] scratch; last: one shared int.
__device__ void WarpMaskGroups(const RouterConfig& c, float* select, float* group_score,
                               int* last) {
  const int lane = threadIdx.x, per_group = c.n_expert / c.n_group;
  for (int g = lane; g < c.n_group; g += kWarp) {
    group_score[g] = RouterGroupScore(select + g * per_group, per_group);
  }
  __syncwarp();
  if (lane == 0) *last = RouterLastKeptGroup(group_score, c.n_group, c.n_group_used);
  __syncwarp();
  for (int e = lane; e < c.n_expert; e += kWarp) {
    if (!RouterGroupKept(group_score, e / per_group, *last)) select[e] = -INFINITY;
  }
  __syncwarp();
}

// Block t = token t: logits [n_tok x E], bias [E] or null, ids / weights [n_tok x k].
__global__ void __launch_bounds__(kWarp)
    RouteKernel(RouterConfig c, const float* logits, const float* bias, int32_t* ids,
                float* weights) {
  MOESPLIT_SHARED(float, scores, [kRouterMaxExperts]);       // [E] unbiased
  MOESPLIT_SHARED(float, select, [kRouterMaxExperts]);       // [E] biased, group-masked
  MOESPLIT_SHARED(float, group_score, [kRouterMaxExperts]);  // [G]
  MOESPLIT_SHARED(int32_t, tok_ids, [kRouterMaxUsed]);       // [k]
  MOESPLIT_SHARED(int, last_group, );
  const int lane = threadIdx.x, E = c.n_expert, k = c.n_expert_used;
  const int64_t t = blockIdx.x;
  WarpScores(c, logits + t * E, scores);
  for (int e = lane; e < E; e += kWarp) select[e] = scores[e] + (bias ? bias[e] : 0.0f);
  __syncwarp();
  if (c.n_group > 1) WarpMaskGroups(c, select, group_score, &last_group);
  // Round j: every lane's best entry ranking after pick j - 1, then the warp's best of those.
  float prev_v = 0.0f;
  int prev_i = -1;
  for (int j = 0; j < k; ++j) {
    float v = 0.0f;
    int i = RouterBestAfter(select, lane, E, kWarp, prev_v, prev_i, &v);
    WarpBest(&v, &i);
    if (i < 0) {  // nothing ranks after pick j - 1: only with NaN scores (RouterNext's rule)
      i = prev_i < 0 ? 0 : prev_i;
      v = select[i];
    }
    if (lane == 0) tok_ids[j] = i;
    prev_v = v;
    prev_i = i;
  }
  __syncwarp();
  if (lane == 0) {
    float* tw = weights + t * k;
    RouterWeights(c, scores, tok_ids, tw);
    for (int j = 0; j < k; ++j) ids[t * k + j] = tok_ids[j];
  }
}

}  // namespace

Status ValidateRouterConfig(const RouterConfig& c) {
  if (c.n_expert < 1 || c.n_expert > kRouterMaxExperts) {
    return InvalidArgumentError("gpu::Route: n_expert = ", c.n_expert, " (must be in [1, ",
                                kRouterMaxExperts, "])");
  }
  const int max_used = c.n_expert < kRouterMaxUsed ? c.n_expert : kRouterMaxUsed;
  if (c.n_expert_used < 1 || c.n_expert_used > max_used) {
    return InvalidArgumentError("gpu::Route: n_expert_used = ", c.n_expert_used,
                                " (must be in [1, ", max_used, "])");
  }
  if (c.n_group > 1) {
    if (c.n_expert % c.n_group != 0) {
      return InvalidArgumentError("gpu::Route: n_expert = ", c.n_expert,
                                  " is not a multiple of n_group = ", c.n_group);
    }
    if (c.n_group_used < 1 || c.n_group_used > c.n_group) {
      return InvalidArgumentError("gpu::Route: n_group_used = ", c.n_group_used,
                                  " (must be in [1, n_group = ", c.n_group, "])");
    }
  } else if (c.n_group < 0) {
    return InvalidArgumentError("gpu::Route: n_group = ", c.n_group, " (must be >= 0)");
  }
  if (c.gating != RouterGating::kSoftmax && c.gating != RouterGating::kSigmoid) {
    return InvalidArgumentError("gpu::Route: unknown gating ", static_cast<int>(c.gating));
  }
  return Status::Ok();
}

Status Route(const RouterConfig& c, const float* logits, const float* bias, int64_t n_tok,
             int32_t* ids, float* weights, Stream stream) {
  MOESPLIT_RETURN_IF_ERROR(ValidateRouterConfig(c));
  if (n_tok < 0 || n_tok > kMaxGridX) {
    return InvalidArgumentError("gpu::Route: n_tok = ", n_tok, " (must be in [0, ", kMaxGridX,
                                "])");
  }
  if (n_tok > 0 && (logits == nullptr || ids == nullptr || weights == nullptr)) {
    return InvalidArgumentError("gpu::Route: null logits / ids / weights for n_tok = ", n_tok);
  }
  if (n_tok == 0) return Status::Ok();
  MOESPLIT_LAUNCH(static_cast<unsigned>(n_tok), kWarp, 0, stream, RouteKernel)
  (c, logits, bias, ids, weights);
  CUDA_CHECK_LAUNCH();
  return Status::Ok();
}

}  // namespace moesplit::gpu
