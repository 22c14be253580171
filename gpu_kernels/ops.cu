// Element-wise GPU ops: RmsNorm, SwiGlu, Add, Softmax, Rope, WeightedSum (see ops.h for the
// contracts and the agreement with the CPU reference). Row ops run one block per row; element ops
// (and WeightedSum, one output element per thread) a grid-stride loop; RoPE one block per token
// with the token's cos/sin table in shared memory.
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "gpu_kernels/cuda_check.h"
#include "gpu_kernels/kernel_macros.h"
#include "gpu_kernels/ops.h"
#include "gpu_kernels/ops_hd.h"
#include "gpu_kernels/rope_hd.h"

namespace moesplit::gpu {
namespace {

constexpr int kMaxRowThreads = 256;        // threads per row block (RmsNorm, Softmax)
constexpr int kEltThreads = 256;           // threads per element-op block
constexpr int64_t kMaxEltBlocks = 8192;    // element ops: grid-stride beyond this many blocks
constexpr int kRopeThreads = 128;          // threads per token (RoPE)
constexpr int64_t kMaxGridX = 2147483647;  // gridDim.x limit: rows / tokens per launch

// ---------------------------------------------------------------------------------------------
// Reductions. blockDim.x is a multiple of 32; every thread receives the result.
// ---------------------------------------------------------------------------------------------

__device__ double WarpSum(double v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

__device__ float WarpMax(float v) {
  for (int o = 16; o > 0; o >>= 1) {
    const float u = __shfl_xor_sync(0xffffffffu, v, o);
    v = (v < u) ? u : v;  // std::max(v, u)
  }
  return v;
}

// shm: [32] partials, one per warp. Each warp then reduces all partials in the same order, so
// every thread holds the same value without a broadcast.
__device__ double BlockSum(double v, double* shm) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, n_warps = blockDim.x >> 5;
  v = WarpSum(v);
  if (lane == 0) shm[warp] = v;
  __syncthreads();
  v = WarpSum(lane < n_warps ? shm[lane] : 0.0);
  __syncthreads();  // shm is free again
  return v;
}

__device__ float BlockMax(float v, float* shm) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, n_warps = blockDim.x >> 5;
  v = WarpMax(v);
  if (lane == 0) shm[warp] = v;
  __syncthreads();
  v = WarpMax(lane < n_warps ? shm[lane] : -INFINITY);
  __syncthreads();
  return v;
}

// ---------------------------------------------------------------------------------------------
// Kernels
// ---------------------------------------------------------------------------------------------

// One block per row r: x row [n] at x + r * x_stride, y row [n] at y + r * y_stride; w: [n] or
// null. sum = sum x^2 (double), scale = 1 / sqrt(float(sum / n) + eps), y = x * scale * w.
__global__ void RmsNormKernel(const float* x, int64_t x_stride, const float* w, int64_t n,
                              float eps, float* y, int64_t y_stride) {
  MOESPLIT_SHARED(double, shm, [32]);
  const float* xr = x + static_cast<int64_t>(blockIdx.x) * x_stride;
  float* yr = y + static_cast<int64_t>(blockIdx.x) * y_stride;
  double sum = 0.0;
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) sum += static_cast<double>(xr[i]) * xr[i];
  sum = BlockSum(sum, shm);  // every read of xr is done before any write of yr (y may be x)
  const float scale = RmsNormScale(sum, n, eps);
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) yr[i] = RmsNormApply(xr[i], scale, w, i);
}

// One block per row of x: [rows x n]: max, e = exp(x - max), sum e (double), x = e * (1 / sum).
__global__ void SoftmaxKernel(float* x, int64_t n) {
  MOESPLIT_SHARED(float, shm_max, [32]);
  MOESPLIT_SHARED(double, shm_sum, [32]);
  float* xr = x + static_cast<int64_t>(blockIdx.x) * n;
  float max = -INFINITY;
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) max = (max < xr[i]) ? xr[i] : max;
  max = BlockMax(max, shm_max);
  double sum = 0.0;
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
    const float e = SoftmaxExp(xr[i], max);
    xr[i] = e;
    sum += e;
  }
  const float inv = SoftmaxInv(BlockSum(sum, shm_sum));
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) xr[i] *= inv;
}

// gate, up: [count]; gate = silu(gate) * up.
__global__ void SwiGluKernel(float* gate, const float* up, int64_t count) {
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < count;
       i += step) {
    gate[i] = SiluMul(gate[i], up[i]);
  }
}

// x, y: [count]; y += x.
__global__ void AddKernel(const float* x, float* y, int64_t count) {
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < count;
       i += step) {
    y[i] += x[i];
  }
}

// Element e = t * n + i of out: [n_tok x n] (count = n_tok * n); y: [n_tok * k x n], w:
// [n_tok x k]. Consecutive threads take consecutive i: the y rows are read coalesced, the k
// weights of a token are the same for the whole warp (broadcast).
__global__ void WeightedSumKernel(const float* __restrict__ y, const float* __restrict__ w,
                                  int64_t k, int64_t n, int64_t count, float* __restrict__ out) {
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t e = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; e < count;
       e += step) {
    const int64_t t = e / n;
    const int64_t i = e - t * n;
    const float* wt = w + t * k;          // [k]
    const float* yt = y + t * k * n + i;  // column i of the token's k rows of n
    float acc = 0.0f;
    for (int64_t j = 0; j < k; ++j) acc = fmaf(wt[j], yt[j * n], acc);  // j order, as stated
    out[e] = acc;
  }
}

// One block per token t: x: [n_tok x n_head x head_dim], pos: [n_tok]. Dynamic shared memory
// cs: [n_dims] = (cos, sin) * mscale of each pair at pos[t] (rope_hd.h), then every head's pairs.
__global__ void RopeKernel(ops::RopeParams p, RopeConsts k, const int32_t* pos, int64_t n_head,
                           int64_t head_dim, float* x) {
  MOESPLIT_DYNAMIC_SHARED(float, cs);
  const int64_t t = blockIdx.x;
  const int64_t position = pos[t];
  const int half = p.n_dims / 2;
  for (int i = threadIdx.x; i < half; i += blockDim.x) {
    RopeCosSinAt(p, k, position, i, &cs[2 * i], &cs[2 * i + 1]);
  }
  __syncthreads();
  float* xt = x + t * n_head * head_dim;
  const int64_t n_pairs = n_head * half;
  for (int64_t j = threadIdx.x; j < n_pairs; j += blockDim.x) {
    const int64_t h = j / half;
    const int i = static_cast<int>(j - h * half);
    int a = 0, b = 0;
    RopePair(p, i, &a, &b);
    float* xh = xt + h * head_dim;
    RopeRotate(cs[2 * i], cs[2 * i + 1], &xh[a], &xh[b]);
  }
}

// ---------------------------------------------------------------------------------------------
// Validation (no CUDA calls) and launch shapes
// ---------------------------------------------------------------------------------------------

Status CheckCount(const char* fn, const char* what, int64_t v, int64_t max) {
  if (v < 0 || v > max) {
    return InvalidArgumentError("gpu::", fn, ": ", what, " = ", v, " (must be in [0, ", max, "])");
  }
  return Status::Ok();
}

Status CheckPtr(const char* fn, const char* what, const void* ptr, int64_t count) {
  if (count > 0 && ptr == nullptr) {
    return InvalidArgumentError("gpu::", fn, ": ", what, " is null for ", count, " values");
  }
  return Status::Ok();
}

// Row blocks: n rounded up to a warp multiple, at most kMaxRowThreads.
int RowThreads(int64_t n) {
  return static_cast<int>(std::clamp<int64_t>((n + 31) / 32 * 32, 32, kMaxRowThreads));
}

int EltBlocks(int64_t count) {
  return static_cast<int>(
      std::min<int64_t>((count + kEltThreads - 1) / kEltThreads, kMaxEltBlocks));
}

// rows x n element-op shapes: both >= 0, product without overflow.
Status CheckElt(const char* fn, int64_t rows, int64_t n) {
  MOESPLIT_RETURN_IF_ERROR(CheckCount(fn, "rows", rows, kMaxGridX));
  MOESPLIT_RETURN_IF_ERROR(CheckCount(fn, "n", n, int64_t{1} << 40));
  return Status::Ok();
}

// True when [a, a + a_count) and [b, b + b_count) floats share an address (both counts > 0).
bool Overlap(const float* a, int64_t a_count, const float* b, int64_t b_count) {
  const uintptr_t a0 = reinterpret_cast<uintptr_t>(a), b0 = reinterpret_cast<uintptr_t>(b);
  const uintptr_t a1 = a0 + static_cast<uintptr_t>(a_count) * sizeof(float);
  const uintptr_t b1 = b0 + static_cast<uintptr_t>(b_count) * sizeof(float);
  return a_count > 0 && b_count > 0 && a0 < b1 && b0 < a1;
}

}  // namespace

Status RmsNormStrided(const float* x, int64_t x_stride, const float* w, int64_t rows, int64_t n,
                      float eps, float* y, int64_t y_stride, Stream stream) {
  MOESPLIT_RETURN_IF_ERROR(CheckCount("RmsNorm", "rows", rows, kMaxGridX));
  MOESPLIT_RETURN_IF_ERROR(CheckCount("RmsNorm", "n", n, int64_t{1} << 40));
  if (rows > 0 && n == 0) return InvalidArgumentError("gpu::RmsNorm: n = 0 for ", rows, " rows");
  if (x_stride < n || y_stride < n) {
    return InvalidArgumentError("gpu::RmsNorm: strides ", x_stride, " / ", y_stride,
                                " shorter than a row of n = ", n);
  }
  MOESPLIT_RETURN_IF_ERROR(CheckPtr("RmsNorm", "x", x, rows * n));
  MOESPLIT_RETURN_IF_ERROR(CheckPtr("RmsNorm", "y", y, rows * n));
  if (rows == 0) return Status::Ok();
  MOESPLIT_LAUNCH(static_cast<unsigned>(rows), RowThreads(n), 0, stream, RmsNormKernel)
  (x, x_stride, w, n, eps, y, y_stride);
  CUDA_CHECK_LAUNCH();
  return Status::Ok();
}

Status RmsNorm(const float* x, const float* w, int64_t rows, int64_t n, float eps, float* y,
               Stream stream) {
  return RmsNormStrided(x, n, w, rows, n, eps, y, n, stream);
}

Status SwiGlu(float* gate, const float* up, int64_t rows, int64_t n, Stream stream) {
  MOESPLIT_RETURN_IF_ERROR(CheckElt("SwiGlu", rows, n));
  const int64_t count = rows * n;
  MOESPLIT_RETURN_IF_ERROR(CheckPtr("SwiGlu", "gate", gate, count));
  MOESPLIT_RETURN_IF_ERROR(CheckPtr("SwiGlu", "up", up, count));
  if (count == 0) return Status::Ok();
  MOESPLIT_LAUNCH(EltBlocks(count), kEltThreads, 0, stream, SwiGluKernel)(gate, up, count);
  CUDA_CHECK_LAUNCH();
  return Status::Ok();
}

Status Add(const float* x, float* y, int64_t rows, int64_t n, Stream stream) {
  MOESPLIT_RETURN_IF_ERROR(CheckElt("Add", rows, n));
  const int64_t count = rows * n;
  MOESPLIT_RETURN_IF_ERROR(CheckPtr("Add", "x", x, count));
  MOESPLIT_RETURN_IF_ERROR(CheckPtr("Add", "y", y, count));
  if (count == 0) return Status::Ok();
  MOESPLIT_LAUNCH(EltBlocks(count), kEltThreads, 0, stream, AddKernel)(x, y, count);
  CUDA_CHECK_LAUNCH();
  return Status::Ok();
}

Status Softmax(float* x, int64_t rows, int64_t n, Stream stream) {
  MOESPLIT_RETURN_IF_ERROR(CheckCount("Softmax", "rows", rows, kMaxGridX));
  MOESPLIT_RETURN_IF_ERROR(CheckCount("Softmax", "n", n, int64_t{1} << 40));
  if (rows > 0 && n == 0) return InvalidArgumentError("gpu::Softmax: n = 0 for ", rows, " rows");
  MOESPLIT_RETURN_IF_ERROR(CheckPtr("Softmax", "x", x, rows * n));
  if (rows == 0) return Status::Ok();
  MOESPLIT_LAUNCH(static_cast<unsigned>(rows), RowThreads(n), 0, stream, SoftmaxKernel)(x, n);
  CUDA_CHECK_LAUNCH();
  return Status::Ok();
}

Status WeightedSum(const float* y, const float* w, int64_t n_tok, int64_t k, int64_t n, float* out,
                   Stream stream) {
  MOESPLIT_RETURN_IF_ERROR(CheckCount("WeightedSum", "n_tok", n_tok, kMaxGridX));
  MOESPLIT_RETURN_IF_ERROR(CheckCount("WeightedSum", "n", n, int64_t{1} << 40));
  if (k < 1 || k > kWeightedSumMaxK) {
    return InvalidArgumentError("gpu::WeightedSum: k = ", k, " (must be in [1, ", kWeightedSumMaxK,
                                "])");
  }
  // n_tok * k <= 2^31 * 2^10 cannot overflow; y's n_tok * k * n floats must stay <= 2^62.
  if (n > 0 && n_tok * k > (int64_t{1} << 62) / n) {
    return InvalidArgumentError("gpu::WeightedSum: n_tok * k * n = ", n_tok, " * ", k, " * ", n,
                                " floats is too many");
  }
  const int64_t count = n_tok * n;
  MOESPLIT_RETURN_IF_ERROR(CheckPtr("WeightedSum", "y", y, n_tok * k * n));
  MOESPLIT_RETURN_IF_ERROR(CheckPtr("WeightedSum", "w", w, count > 0 ? n_tok * k : 0));
  MOESPLIT_RETURN_IF_ERROR(CheckPtr("WeightedSum", "out", out, count));
  if (count == 0) return Status::Ok();
  if (Overlap(out, count, y, n_tok * k * n) || Overlap(out, count, w, n_tok * k)) {
    return InvalidArgumentError("gpu::WeightedSum: out overlaps ",
                                Overlap(out, count, y, n_tok * k * n) ? "y" : "w");
  }
  MOESPLIT_LAUNCH(EltBlocks(count), kEltThreads, 0, stream, WeightedSumKernel)
  (y, w, k, n, count, out);
  CUDA_CHECK_LAUNCH();
  return Status::Ok();
}

Status Rope(const ops::RopeParams& p, const int32_t* pos, int64_t n_tok, int64_t n_head,
            int64_t head_dim, float* x, Stream stream) {
  MOESPLIT_RETURN_IF_ERROR(CheckCount("Rope", "n_tok", n_tok, kMaxGridX));
  MOESPLIT_RETURN_IF_ERROR(CheckCount("Rope", "n_head", n_head, int64_t{1} << 24));
  MOESPLIT_RETURN_IF_ERROR(CheckCount("Rope", "head_dim", head_dim, int64_t{1} << 24));
  if (p.n_dims <= 0 || p.n_dims % 2 != 0 || p.n_dims > head_dim || p.n_dims > kRopeMaxDims) {
    return InvalidArgumentError("gpu::Rope: n_dims = ", p.n_dims,
                                " (must be even, > 0, <= head_dim = ", head_dim,
                                " and <= ", kRopeMaxDims, ")");
  }
  if (p.style != ops::RopeStyle::kNormal && p.style != ops::RopeStyle::kNeox) {
    return InvalidArgumentError("gpu::Rope: unknown style ", static_cast<int>(p.style));
  }
  MOESPLIT_RETURN_IF_ERROR(CheckPtr("Rope", "pos", pos, n_tok));
  MOESPLIT_RETURN_IF_ERROR(CheckPtr("Rope", "x", x, n_tok * n_head));
  if (n_tok == 0 || n_head == 0) return Status::Ok();
  const RopeConsts k = RopeConstsFor(p);  // host libm: the CPU reference's exact constants
  const size_t shm = static_cast<size_t>(p.n_dims) * sizeof(float);
  MOESPLIT_LAUNCH(static_cast<unsigned>(n_tok), kRopeThreads, shm, stream, RopeKernel)
  (p, k, pos, n_head, head_dim, x);
  CUDA_CHECK_LAUNCH();
  return Status::Ok();
}

}  // namespace moesplit::gpu
