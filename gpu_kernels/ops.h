// Element-wise ops of the forward pass on the GPU, f32 in and out, with the CPU reference's
// arithmetic (cpu_kernels/ops/ops.h; per-element formulas in gpu_kernels/ops_hd.h and
// rope_hd.h). Plain C++ interface: all pointers are device pointers, work is queued on `stream`
// (nothing is synchronized). Every function validates its shapes first and returns
// InvalidArgument before any CUDA call; a CUDA failure after that aborts (CUDA_CHECK).
//
// Agreement with the CPU reference (what the GPU tests check):
//   RmsNorm  the sum of squares is accumulated in double as on the CPU, in a different order
//            (block tree); the float mean square can round differently only when the two double
//            sums straddle a float rounding boundary (rare): |y - y_cpu| <= 4 ulp(y_cpu).
//   SwiGlu   CUDA expf (<= 2 ulp) in place of glibc's: <= 8 ulp.
//   Softmax  CUDA expf, the double sum in tree order: <= 8 ulp.
//   Add      bit-exact.
//   Rope     theta bit-exact (no FMA on the device for it); CUDA cosf / sinf (<= 2 ulp):
//            |y - y_cpu| <= 1e-6 * (|x_a| + |x_b|) per rotated pair (mscale <= 1); dims beyond
//            n_dims untouched.
//   WeightedSum  f32 fused multiply-adds in j order (k roundings of partial sums each bounded by
//            sum_j |w_j y_j|): |out - exact| <= k * FLT_EPSILON * sum_j |w_j y_j| against a
//            double-precision reference.
#pragma once

#include <cstdint>

#include "core/base/status.h"
#include "cpu_kernels/ops/ops.h"  // ops::RopeParams (header-only struct)
#include "gpu_kernels/device_buffer.h"

namespace moesplit::gpu {

// y[r, i] = x[r, i] / sqrt(mean_i(x[r, :]^2) + eps) * w[i]; x, y: [rows x n] (y may be x);
// w: [n] or nullptr (no weight).
Status RmsNorm(const float* x, const float* w, int64_t rows, int64_t n, float eps, float* y,
               Stream stream);
// The same over rows `x_stride` / `y_stride` floats apart (>= n): row r is x + r * x_stride. The
// MLA latent row [L + R] is normalised over its first L values with n = L, stride = L + R.
Status RmsNormStrided(const float* x, int64_t x_stride, const float* w, int64_t rows, int64_t n,
                      float eps, float* y, int64_t y_stride, Stream stream);

// gate[i] = silu(gate[i]) * up[i]; gate, up: [rows x n].
Status SwiGlu(float* gate, const float* up, int64_t rows, int64_t n, Stream stream);

// y[i] += x[i]; x, y: [rows x n].
Status Add(const float* x, float* y, int64_t rows, int64_t n, Stream stream);

// In-place softmax of every row of x: [rows x n] (-inf entries become 0).
Status Softmax(float* x, int64_t rows, int64_t n, Stream stream);

// The routed experts' combination: out[t*n + i] = sum_j w[t*k + j] * y[(t*k + j)*n + i] for
// t < n_tok, i < n, summed over j < k in order (f32 fmaf). y: [n_tok*k x n] (one row per (token,
// expert) pair, the pairs of a token together), w: [n_tok x k], out: [n_tok x n]. out must not
// overlap y or w (one thread's out element would be another's input). Errors: n_tok, n
// negative or too large, k outside [1, kWeightedSumMaxK], a null pointer with values to cover,
// overlap.
inline constexpr int64_t kWeightedSumMaxK = 1024;
Status WeightedSum(const float* y, const float* w, int64_t n_tok, int64_t k, int64_t n, float* out,
                   Stream stream);

// RoPE (with YaRN when p.ext_factor != 0), in place: x: [n_tok x n_head x head_dim], the first
// p.n_dims values of each head rotated at position pos[t] (pos: [n_tok] int32, device memory),
// pairs as p.style says. head_dim is the distance between heads: to rotate the last R values of
// heads of width hk (MLA's q_pe), pass x + (hk - R) with head_dim = hk and p.n_dims = R.
// Errors: n_dims odd, <= 0, > head_dim or > kRopeMaxDims; negative counts.
inline constexpr int kRopeMaxDims = 8192;
Status Rope(const ops::RopeParams& p, const int32_t* pos, int64_t n_tok, int64_t n_head,
            int64_t head_dim, float* x, Stream stream);

}  // namespace moesplit::gpu
