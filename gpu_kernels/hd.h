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
