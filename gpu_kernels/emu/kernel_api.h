// What CUDA kernel source sees on the emulated device: the qualifiers (empty), the built-in
// variables (the current fiber's, block.h), barriers, warp shuffles and votes, atomics and the
// device intrinsics the project's kernels use, with CUDA's semantics.
#pragma once

#include <atomic>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "gpu_kernels/emu/block.h"
#include "gpu_kernels/emu/types.h"

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __launch_bounds__(...)
#define __align__(n) __attribute__((aligned(n)))
#define __constant__
#define __CUDACC_EMU__ 1  // (not __CUDACC__: the sources take their host paths, e.g. hd.h)

#define threadIdx (::moesplit::emu::tls_ids->thread_idx)
#define blockIdx (::moesplit::emu::tls_ids->block_idx)
#define blockDim (::moesplit::emu::tls_ids->block_dim)
#define gridDim (::moesplit::emu::tls_ids->grid_dim)
constexpr int warpSize = 32;

inline void __syncthreads() { ::moesplit::emu::SyncThreads(); }
inline void __syncwarp(unsigned mask = 0xffffffffu) {
  (void)::moesplit::emu::WarpOp(::moesplit::emu::WarpOpKind::kSync, mask, 0, 0, 32);
}
// Fibers of one block share an OS thread; blocks of concurrent kernels (two streams) run on two
// OS threads, hence a real fence.
inline void __threadfence() { std::atomic_thread_fence(std::memory_order_seq_cst); }
inline void __threadfence_block() { std::atomic_signal_fence(std::memory_order_seq_cst); }

namespace moesplit::emu::detail {

template <typename T>
inline uint64_t ToBits(T v) {
  static_assert(std::is_trivially_copyable_v<T> && sizeof(T) <= 8, "shuffle of this type");
  uint64_t b = 0;
  std::memcpy(&b, &v, sizeof(T));
  return b;
}
template <typename T>
inline T FromBits(uint64_t b) {
  T v;
  std::memcpy(&v, &b, sizeof(T));
  return v;
}
template <typename T>
inline T Shuffle(WarpOpKind kind, unsigned mask, T var, int arg, int width) {
  return FromBits<T>(WarpOp(kind, mask, ToBits(var), arg, width));
}

}  // namespace moesplit::emu::detail

template <typename T>
inline T __shfl_sync(unsigned mask, T var, int src_lane, int width = 32) {
  return ::moesplit::emu::detail::Shuffle(::moesplit::emu::WarpOpKind::kShflIdx, mask, var,
                                          src_lane, width);
}
template <typename T>
inline T __shfl_up_sync(unsigned mask, T var, unsigned delta, int width = 32) {
  return ::moesplit::emu::detail::Shuffle(::moesplit::emu::WarpOpKind::kShflUp, mask, var,
                                          static_cast<int>(delta), width);
}
template <typename T>
inline T __shfl_down_sync(unsigned mask, T var, unsigned delta, int width = 32) {
  return ::moesplit::emu::detail::Shuffle(::moesplit::emu::WarpOpKind::kShflDown, mask, var,
                                          static_cast<int>(delta), width);
}
template <typename T>
inline T __shfl_xor_sync(unsigned mask, T var, int lane_mask, int width = 32) {
  return ::moesplit::emu::detail::Shuffle(::moesplit::emu::WarpOpKind::kShflXor, mask, var,
                                          lane_mask, width);
}
inline unsigned __ballot_sync(unsigned mask, int pred) {
  return static_cast<unsigned>(
      ::moesplit::emu::WarpOp(::moesplit::emu::WarpOpKind::kBallot, mask, pred != 0, 0, 32));
}
inline int __any_sync(unsigned mask, int pred) {
  return static_cast<int>(
      ::moesplit::emu::WarpOp(::moesplit::emu::WarpOpKind::kAny, mask, pred != 0, 0, 32));
}
inline int __all_sync(unsigned mask, int pred) {
  return static_cast<int>(
      ::moesplit::emu::WarpOp(::moesplit::emu::WarpOpKind::kAll, mask, pred != 0, 0, 32));
}

// --- Atomics (device-wide: other streams' kernels run on other OS threads) ---------------------
template <typename T>
inline T atomicAdd(T* p, T v) {
  return std::atomic_ref<T>(*p).fetch_add(v);
}
template <typename T>
inline T atomicSub(T* p, T v) {
  return std::atomic_ref<T>(*p).fetch_sub(v);
}
template <typename T>
inline T atomicExch(T* p, T v) {
  return std::atomic_ref<T>(*p).exchange(v);
}
template <typename T>
inline T atomicCAS(T* p, T compare, T v) {
  std::atomic_ref<T>(*p).compare_exchange_strong(compare, v);
  return compare;  // the old value either way
}
template <typename T>
inline T atomicMax(T* p, T v) {
  std::atomic_ref<T> a(*p);
  T old = a.load();
  while (old < v && !a.compare_exchange_weak(old, v)) {
  }
  return old;
}
template <typename T>
inline T atomicMin(T* p, T v) {
  std::atomic_ref<T> a(*p);
  T old = a.load();
  while (v < old && !a.compare_exchange_weak(old, v)) {
  }
  return old;
}
template <typename T>
inline T atomicAnd(T* p, T v) {
  return std::atomic_ref<T>(*p).fetch_and(v);
}
template <typename T>
inline T atomicOr(T* p, T v) {
  return std::atomic_ref<T>(*p).fetch_or(v);
}
template <typename T>
inline T atomicXor(T* p, T v) {
  return std::atomic_ref<T>(*p).fetch_xor(v);
}

// --- Loads with cache hints: plain loads here --------------------------------------------------
template <typename T>
inline T __ldg(const T* p) {
  return *p;
}
template <typename T>
inline T __ldcs(const T* p) {
  return *p;
}
template <typename T>
inline T __ldcg(const T* p) {
  return *p;
}
template <typename T>
inline void __stcs(T* p, T v) {
  *p = v;
}

// --- Bit casts and integer intrinsics -----------------------------------------------------------
inline float __int_as_float(int i) {
  return ::moesplit::emu::detail::FromBits<float>(static_cast<uint32_t>(i));
}
inline float __uint_as_float(unsigned u) { return ::moesplit::emu::detail::FromBits<float>(u); }
inline int __float_as_int(float f) {
  return static_cast<int>(static_cast<uint32_t>(::moesplit::emu::detail::ToBits(f)));
}
inline unsigned __float_as_uint(float f) {
  return static_cast<uint32_t>(::moesplit::emu::detail::ToBits(f));
}
inline double __longlong_as_double(long long i) {
  return ::moesplit::emu::detail::FromBits<double>(static_cast<uint64_t>(i));
}
inline long long __double_as_longlong(double d) {
  return static_cast<long long>(::moesplit::emu::detail::ToBits(d));
}
inline int __popc(unsigned x) { return __builtin_popcount(x); }
inline int __popcll(unsigned long long x) { return __builtin_popcountll(x); }
inline int __clz(int x) { return x == 0 ? 32 : __builtin_clz(static_cast<unsigned>(x)); }
inline int __ffs(int x) { return __builtin_ffs(x); }
inline unsigned __brev(unsigned x) {
  unsigned r = 0;
  for (int i = 0; i < 32; ++i) r |= ((x >> i) & 1u) << (31 - i);
  return r;
}

// --- Float intrinsics: the correctly rounded operation (the GPU's fast-math variants differ in
// the last bits; the emulator cannot model their exact error) ----------------------------------
inline float __fmul_rn(float a, float b) { return a * b; }
inline float __fadd_rn(float a, float b) { return a + b; }
inline float __fsub_rn(float a, float b) { return a - b; }
inline float __fdiv_rn(float a, float b) { return a / b; }
inline float __fmaf_rn(float a, float b, float c) { return std::fma(a, b, c); }
inline float __frcp_rn(float a) { return 1.0f / a; }
inline float __expf(float a) { return std::exp(a); }
inline float __logf(float a) { return std::log(a); }
inline float __fdividef(float a, float b) { return a / b; }
inline float rsqrtf(float a) { return 1.0f / std::sqrt(a); }

// CUDA's min / max overloads for device code (floating point: fminf / fmaxf's NaN rule).
template <typename A, typename B,
          typename = std::enable_if_t<std::is_arithmetic_v<A> && std::is_arithmetic_v<B>>>
inline auto min(A a, B b) {
  using C = std::common_type_t<A, B>;
  if constexpr (std::is_floating_point_v<C>) {
    return std::fmin(static_cast<C>(a), static_cast<C>(b));
  } else {
    return static_cast<C>(a) < static_cast<C>(b) ? static_cast<C>(a) : static_cast<C>(b);
  }
}
template <typename A, typename B,
          typename = std::enable_if_t<std::is_arithmetic_v<A> && std::is_arithmetic_v<B>>>
inline auto max(A a, B b) {
  using C = std::common_type_t<A, B>;
  if constexpr (std::is_floating_point_v<C>) {
    return std::fmax(static_cast<C>(a), static_cast<C>(b));
  } else {
    return static_cast<C>(a) < static_cast<C>(b) ? static_cast<C>(b) : static_cast<C>(a);
  }
}
