// MOESPLIT_HD marks a function that runs on both sides: in a .cu file it is compiled for the GPU
// (and the host), in plain C++ it is an ordinary inline function. The per-block arithmetic of the
// GPU kernels (decoding a Q4_K block, a RoPE rotation) lives in such functions so that the CPU
// test suite checks it against cpu_kernels' reference even on machines without a GPU.
#pragma once

#if defined(__CUDACC__)
#define MOESPLIT_HD __host__ __device__ inline
#else
#define MOESPLIT_HD inline
#endif

// nvcc's unroll hint, in the device pass only (g++ warns about an unknown pragma).
#if defined(__CUDA_ARCH__)
#define MOESPLIT_HD_UNROLL _Pragma("unroll")
#else
#define MOESPLIT_HD_UNROLL
#endif

// Rounded-alone float arithmetic: each result is rounded on its own, as the CPU references round
// it. nvcc contracts a * b + c into one FMA by default (a different number); __fmul_rn /
// __fadd_rn / __fsub_rn are never contracted. On the host the project's default flags target
// x86-64 without FMA, so the plain operators round the same way.
MOESPLIT_HD float HdMul(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fmul_rn(a, b);
#else
  return a * b;
#endif
}
MOESPLIT_HD float HdAdd(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fadd_rn(a, b);
#else
  return a + b;
#endif
}
MOESPLIT_HD float HdSub(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fsub_rn(a, b);
#else
  return a - b;
#endif
}
