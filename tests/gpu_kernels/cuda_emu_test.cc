// The emulated CUDA device itself (gpu_kernels/emu): warp operations against CUDA's documented
// semantics, barriers and the thread schedules, shared memory and allocation poisoning, launch
// limits, faults, stream ordering with events and host functions, copies, cuBLAS's rules. A
// fault is sticky for the process (as on a GPU), so the tests that provoke one run in a child
// (death tests).
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "gpu_kernels/kernel_macros.h"

namespace {

using moesplit::emu::Schedule;

template <typename T>
T* DevAlloc(size_t n) {
  void* p = nullptr;
  EXPECT_EQ(cudaMalloc(&p, n * sizeof(T)), cudaSuccess);
  return static_cast<T*>(p);
}

template <typename T>
std::vector<T> Get(const T* d, size_t n) {
  std::vector<T> v(n);
  EXPECT_EQ(cudaMemcpy(v.data(), d, n * sizeof(T), cudaMemcpyDeviceToHost), cudaSuccess);
  return v;
}

// --- Warp operations -----------------------------------------------------------------------------

enum Op { kIdx, kUp, kDown, kXor };

__global__ void ShuffleKernel(int op, int arg, int width, int* out) {
  const int lane = threadIdx.x;
  int v = 100 + lane;
  switch (op) {
    case kIdx:
      v = __shfl_sync(0xffffffffu, v, arg, width);
      break;
    case kUp:
      v = __shfl_up_sync(0xffffffffu, v, arg, width);
      break;
    case kDown:
      v = __shfl_down_sync(0xffffffffu, v, arg, width);
      break;
    default:
      v = __shfl_xor_sync(0xffffffffu, v, arg, width);
  }
  out[lane] = v;
}

// The CUDA C++ Programming Guide's description of each shuffle (width w, a power of two):
// idx reads lane (srcLane mod w) of the caller's segment; up reads lane - delta unless that
// leaves the segment (then its own value); down likewise upwards; xor reads lane ^ laneMask,
// and its own value when that lane is in a higher segment.
int Expected(int op, int lane, int arg, int w) {
  const int seg0 = lane / w * w;
  switch (op) {
    case kIdx:
      return 100 + seg0 + (arg % w);
    case kUp:
      return 100 + (lane - seg0 >= arg ? lane - arg : lane);
    case kDown:
      return 100 + (lane - seg0 + arg < w ? lane + arg : lane);
    default: {
      const int j = lane ^ arg;
      return 100 + (j >= seg0 + w ? lane : j);
    }
  }
}

TEST(CudaEmuWarp, ShufflesFollowCudaSemantics) {
  int* out = DevAlloc<int>(32);
  for (int op : {kIdx, kUp, kDown, kXor}) {
    for (int w : {32, 16, 8, 4, 2, 1}) {
      for (int arg : {0, 1, 2, 3, 5, 8, 16, 31}) {
        MOESPLIT_LAUNCH(1, 32, 0, nullptr, ShuffleKernel)(op, arg, w, out);
        ASSERT_EQ(cudaGetLastError(), cudaSuccess);
        const std::vector<int> got = Get(out, 32);
        for (int l = 0; l < 32; ++l) {
          ASSERT_EQ(got[l], Expected(op, l, arg, w))
              << "op " << op << " width " << w << " arg " << arg << " lane " << l;
        }
      }
    }
  }
  cudaFree(out);
}

// Two half-warps vote and synchronise with disjoint masks at the same time.
__global__ void VoteKernel(unsigned* ballot, int* any, int* all) {
  const int lane = threadIdx.x;
  const unsigned half = lane < 16 ? 0x0000ffffu : 0xffff0000u;
  __syncwarp(half);
  ballot[lane] = __ballot_sync(half, lane % 3 == 0);
  any[lane] = __any_sync(half, lane == 20);
  all[lane] = __all_sync(half, lane < 16 || lane != 25);
}

TEST(CudaEmuWarp, VotesOverPartialMasks) {
  unsigned* ballot = DevAlloc<unsigned>(32);
  int* any = DevAlloc<int>(32);
  int* all = DevAlloc<int>(32);
  MOESPLIT_LAUNCH(1, 32, 0, nullptr, VoteKernel)(ballot, any, all);
  const auto b = Get(ballot, 32);
  const auto an = Get(any, 32);
  const auto al = Get(all, 32);
  unsigned lo = 0, hi = 0;
  for (int l = 0; l < 32; ++l) (l < 16 ? lo : hi) |= (l % 3 == 0 ? 1u << l : 0u);
  for (int l = 0; l < 32; ++l) {
    EXPECT_EQ(b[l], l < 16 ? lo : hi) << l;
    EXPECT_EQ(an[l], l < 16 ? 0 : 1) << l;
    EXPECT_EQ(al[l], l < 16 ? 1 : 0) << l;
  }
  cudaFree(ballot);
  cudaFree(any);
  cudaFree(all);
}

// Every thread of every block adds, maximises and counts by compare-and-swap on one word each.
__global__ void AtomicsKernel(int* sum, unsigned* max, float* fsum, int* cas_count) {
  const int g = blockIdx.x * blockDim.x + threadIdx.x;
  atomicAdd(sum, g);
  atomicMax(max, static_cast<unsigned>(g * 7 % 1000));
  atomicAdd(fsum, 0.5f);
  int old = *cas_count;
  for (;;) {
    const int seen = atomicCAS(cas_count, old, old + 1);
    if (seen == old) break;
    old = seen;
  }
  __syncthreads();  // (a barrier between the atomics: other threads interleave here)
  atomicSub(sum, 0);
}

TEST(CudaEmuAtomics, AddMaxCasOverBlocks) {
  int* sum = DevAlloc<int>(1);
  unsigned* max = DevAlloc<unsigned>(1);
  float* fsum = DevAlloc<float>(1);
  int* cas = DevAlloc<int>(1);
  ASSERT_EQ(cudaMemset(sum, 0, 4), cudaSuccess);
  ASSERT_EQ(cudaMemset(max, 0, 4), cudaSuccess);
  ASSERT_EQ(cudaMemset(fsum, 0, 4), cudaSuccess);
  ASSERT_EQ(cudaMemset(cas, 0, 4), cudaSuccess);
  MOESPLIT_LAUNCH(4, 96, 0, nullptr, AtomicsKernel)(sum, max, fsum, cas);
  const int n = 4 * 96;
  EXPECT_EQ(Get(sum, 1)[0], n * (n - 1) / 2);
  unsigned want = 0;
  for (int g = 0; g < n; ++g) want = std::max(want, static_cast<unsigned>(g * 7 % 1000));
  EXPECT_EQ(Get(max, 1)[0], want);
  EXPECT_EQ(Get(fsum, 1)[0], 0.5f * n);
  EXPECT_EQ(Get(cas, 1)[0], n);
  cudaFree(sum);
  cudaFree(max);
  cudaFree(fsum);
  cudaFree(cas);
}

// --- Barriers, schedules, shared memory ----------------------------------------------------------

// Thread 0 publishes a value in shared memory; the others read it, with or without a barrier.
__global__ void PublishKernel(int with_barrier, float* out) {
  MOESPLIT_SHARED(float, v, );
  if (threadIdx.x == 0) v = 42.0f;
  if (with_barrier) __syncthreads();
  out[threadIdx.x] = v;
}

int CountCorrect(int with_barrier, Schedule s) {
  moesplit::emu::SetSchedulesForTesting(s, s, 7);
  float* out = DevAlloc<float>(256);
  MOESPLIT_LAUNCH(1, 256, 0, nullptr, PublishKernel)(with_barrier, out);
  const auto got = Get(out, 256);
  cudaFree(out);
  int n = 0;
  for (float f : got) n += f == 42.0f;
  return n;
}

TEST(CudaEmuBlock, MissingBarrierReadsPoisonInSomeSchedule) {
  for (Schedule s : {Schedule::kInOrder, Schedule::kReverse, Schedule::kRandom}) {
    EXPECT_EQ(CountCorrect(1, s), 256);
  }
  // Without the barrier: in order, thread 0 writes first and the race goes unseen; reversed,
  // every other thread reads the 0xFF poison (NaN) before thread 0 writes.
  EXPECT_EQ(CountCorrect(0, Schedule::kInOrder), 256);
  EXPECT_EQ(CountCorrect(0, Schedule::kReverse), 1);
  EXPECT_LT(CountCorrect(0, Schedule::kRandom), 256);
}

// Each block sees fresh (poisoned) shared memory and its own copy.
__global__ void SharedPerBlockKernel(uint32_t* first, int* dyn_ok) {
  MOESPLIT_SHARED(uint32_t, s, [64]);
  MOESPLIT_DYNAMIC_SHARED(uint32_t, d);
  if (threadIdx.x == 0) {
    first[blockIdx.x] = s[5];
    dyn_ok[blockIdx.x] = d[100] == 0xFFFFFFFFu;
  }
  __syncthreads();
  s[threadIdx.x] = blockIdx.x;
  d[threadIdx.x] = blockIdx.x;
}

TEST(CudaEmuBlock, SharedMemoryIsPerBlockAndPoisoned) {
  uint32_t* first = DevAlloc<uint32_t>(8);
  int* dyn_ok = DevAlloc<int>(8);
  MOESPLIT_LAUNCH(8, 64, 1024, nullptr, SharedPerBlockKernel)(first, dyn_ok);
  for (uint32_t v : Get(first, 8)) EXPECT_EQ(v, 0xFFFFFFFFu);
  for (int v : Get(dyn_ok, 8)) EXPECT_EQ(v, 1);
  cudaFree(first);
  cudaFree(dyn_ok);
}

TEST(CudaEmuMemory, AllocationsArePoisoned) {
  float* p = DevAlloc<float>(100);
  for (float f : Get(p, 100)) EXPECT_TRUE(std::isnan(f));
  cudaFree(p);
}

// --- Launch limits -------------------------------------------------------------------------------

__global__ void EmptyKernel(int) {}

TEST(CudaEmuLaunch, ConfigurationLimitsAreTheHardwares) {
  MOESPLIT_LAUNCH(1, 1024, 0, nullptr, EmptyKernel)(0);
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
  MOESPLIT_LAUNCH(1, 1025, 0, nullptr, EmptyKernel)(0);
  EXPECT_EQ(cudaGetLastError(), cudaErrorInvalidConfiguration);
  MOESPLIT_LAUNCH(dim3(1, 65536), 32, 0, nullptr, EmptyKernel)(0);
  EXPECT_EQ(cudaGetLastError(), cudaErrorInvalidConfiguration);
  MOESPLIT_LAUNCH(dim3(1, 1, 65535), 32, 0, nullptr, EmptyKernel)(0);
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
  MOESPLIT_LAUNCH(1, dim3(1, 1, 65), 0, nullptr, EmptyKernel)(0);
  EXPECT_EQ(cudaGetLastError(), cudaErrorInvalidConfiguration);
  MOESPLIT_LAUNCH(0, 32, 0, nullptr, EmptyKernel)(0);
  EXPECT_EQ(cudaGetLastError(), cudaErrorInvalidConfiguration);
  // Dynamic shared memory above 48 KiB only with the attribute.
  MOESPLIT_LAUNCH(1, 32, 64 * 1024, nullptr, EmptyKernel)(0);
  EXPECT_EQ(cudaGetLastError(), cudaErrorInvalidValue);
  ASSERT_EQ(
      cudaFuncSetAttribute(EmptyKernel, cudaFuncAttributeMaxDynamicSharedMemorySize, 64 * 1024),
      cudaSuccess);
  MOESPLIT_LAUNCH(1, 32, 64 * 1024, nullptr, EmptyKernel)(0);
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
  EXPECT_EQ(
      cudaFuncSetAttribute(EmptyKernel, cudaFuncAttributeMaxDynamicSharedMemorySize, 200 * 1024),
      cudaErrorInvalidValue);
  (void)cudaGetLastError();
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
}

// --- Faults (sticky: in a child process) ---------------------------------------------------------

__global__ void DivergentBarrierKernel(int) {
  if (threadIdx.x < 16) __syncthreads();
  if (threadIdx.x >= 16) __syncwarp();
}

__global__ void BadMaskKernel(int) { (void)__shfl_xor_sync(0x0000ffffu, 1, 1); }

// Half the warp shuffles, half synchronises, both naming the whole warp.
__global__ void MismatchedMaskKernel(int) {
  if (threadIdx.x < 16) {
    (void)__shfl_xor_sync(0xffffffffu, 1, 1);
  } else {
    __syncwarp();
  }
}

__global__ void BigStaticSharedKernel(int) {
  MOESPLIT_SHARED(float, a, [8192]);
  MOESPLIT_SHARED(float, b, [8192]);
  a[threadIdx.x] = b[threadIdx.x];
}

// The emulated device's stream workers do not survive a fork: the death tests re-execute the
// test program instead of forking a process that may already have them.
class CudaEmuFaultDeathTest : public ::testing::Test {
 protected:
  void SetUp() override { GTEST_FLAG_SET(death_test_style, "threadsafe"); }
};

template <typename K>
void RunAndExit(K kernel, int threads) {
  MOESPLIT_LAUNCH(1, threads, 0, nullptr, kernel)(0);
  const cudaError_t launch = cudaGetLastError();
  const cudaError_t sync = cudaDeviceSynchronize();
  // Sticky: every later call reports it.
  const cudaError_t later = cudaMemset(nullptr, 0, 0);
  std::exit(launch == cudaSuccess && sync == cudaErrorLaunchFailure &&
                    later == cudaErrorLaunchFailure
                ? 0
                : 1);
}

TEST_F(CudaEmuFaultDeathTest, DivergentBarrierIsADeadlock) {
  EXPECT_EXIT(RunAndExit(DivergentBarrierKernel, 64), ::testing::ExitedWithCode(0), "deadlock");
}

TEST_F(CudaEmuFaultDeathTest, MaskWithoutTheCallingLane) {
  EXPECT_EXIT(RunAndExit(BadMaskKernel, 32), ::testing::ExitedWithCode(0), "does not name");
}

TEST_F(CudaEmuFaultDeathTest, LanesInDifferentWarpOperations) {
  EXPECT_EXIT(RunAndExit(MismatchedMaskKernel, 32), ::testing::ExitedWithCode(0),
              "same operation with the same mask");
}

TEST_F(CudaEmuFaultDeathTest, StaticSharedMemoryOver48KiB) {
  EXPECT_EXIT(RunAndExit(BigStaticSharedKernel, 32), ::testing::ExitedWithCode(0), "48 KiB");
}

// --- Streams, events, host functions, copies
// ------------------------------------------------------

__global__ void FillKernel(float v, float* p) { p[threadIdx.x] = v; }
__global__ void CopyKernel(const float* a, float* b) { b[threadIdx.x] = a[threadIdx.x]; }

// Stream 1 writes a, stream 2 copies a to b: ordered only by the event.
bool CopySeesWrite(Schedule streams, bool with_event) {
  moesplit::emu::SetSchedulesForTesting(Schedule::kInOrder, streams, 3);
  cudaStream_t s1 = nullptr, s2 = nullptr;
  cudaEvent_t e = nullptr;
  EXPECT_EQ(cudaStreamCreateWithFlags(&s1, cudaStreamNonBlocking), cudaSuccess);
  EXPECT_EQ(cudaStreamCreateWithFlags(&s2, cudaStreamNonBlocking), cudaSuccess);
  EXPECT_EQ(cudaEventCreateWithFlags(&e, cudaEventDisableTiming), cudaSuccess);
  float* a = DevAlloc<float>(32);
  float* b = DevAlloc<float>(32);
  MOESPLIT_LAUNCH(1, 32, 0, s1, FillKernel)(5.0f, a);
  EXPECT_EQ(cudaEventRecord(e, s1), cudaSuccess);
  if (with_event) {
    EXPECT_EQ(cudaStreamWaitEvent(s2, e, 0), cudaSuccess);
  }
  MOESPLIT_LAUNCH(1, 32, 0, s2, CopyKernel)(a, b);
  EXPECT_EQ(cudaStreamSynchronize(s2), cudaSuccess);
  const auto got = Get(b, 32);
  cudaFree(a);
  cudaFree(b);
  cudaEventDestroy(e);
  cudaStreamDestroy(s1);
  cudaStreamDestroy(s2);
  return got[7] == 5.0f;
}

TEST(CudaEmuStreams, EventsOrderStreamsAndTheirAbsenceShows) {
  for (Schedule s : {Schedule::kInOrder, Schedule::kReverse, Schedule::kRandom}) {
    EXPECT_TRUE(CopySeesWrite(s, true));
  }
  EXPECT_TRUE(CopySeesWrite(Schedule::kInOrder, false));   // s1 created first, runs first
  EXPECT_FALSE(CopySeesWrite(Schedule::kReverse, false));  // s2 first: reads the poison
}

struct HostCtx {
  float* pinned;
  float seen;
  cudaError_t inside;
};

void ReadPinned(void* p) {
  auto* c = static_cast<HostCtx*>(p);
  c->seen = c->pinned[3];
  void* q = nullptr;
  c->inside = cudaMalloc(&q, 4);  // CUDA calls are not permitted in a host function
}

TEST(CudaEmuStreams, HostFunctionRunsInStreamOrder) {
  cudaStream_t s = nullptr;
  ASSERT_EQ(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), cudaSuccess);
  float* d = DevAlloc<float>(32);
  void* hp = nullptr;
  ASSERT_EQ(cudaHostAlloc(&hp, 32 * sizeof(float), cudaHostAllocDefault), cudaSuccess);
  HostCtx ctx{static_cast<float*>(hp), 0.0f, cudaSuccess};
  MOESPLIT_LAUNCH(1, 32, 0, s, FillKernel)(9.0f, d);
  ASSERT_EQ(cudaMemcpyAsync(hp, d, 32 * sizeof(float), cudaMemcpyDeviceToHost, s), cudaSuccess);
  ASSERT_EQ(cudaLaunchHostFunc(s, ReadPinned, &ctx), cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
  EXPECT_EQ(ctx.seen, 9.0f);
  EXPECT_EQ(ctx.inside, cudaErrorNotPermitted);
  cudaFreeHost(hp);
  cudaFree(d);
  cudaStreamDestroy(s);
}

TEST(CudaEmuMemory, CopiesCheckDirectionAndStagePageableSources) {
  float* d = DevAlloc<float>(4);
  std::vector<float> h = {1, 2, 3, 4};
  EXPECT_EQ(cudaMemcpy(d, h.data(), 16, cudaMemcpyDeviceToHost), cudaErrorInvalidMemcpyDirection);
  EXPECT_EQ(cudaMemcpy(h.data(), d, 16, cudaMemcpyHostToDevice), cudaErrorInvalidMemcpyDirection);
  EXPECT_EQ(cudaMemcpy(d, h.data(), 32, cudaMemcpyHostToDevice), cudaErrorInvalidValue);  // overrun
  (void)cudaGetLastError();
  // A pageable source is copied when the call is made: changing it afterwards changes nothing.
  cudaStream_t s = nullptr;
  ASSERT_EQ(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), cudaSuccess);
  ASSERT_EQ(cudaMemcpyAsync(d, h.data(), 16, cudaMemcpyHostToDevice, s), cudaSuccess);
  h[0] = 100;
  ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
  EXPECT_EQ(Get(d, 4)[0], 1.0f);
  // A pinned source is read when the stream gets there.
  void* hp = nullptr;
  ASSERT_EQ(cudaHostAlloc(&hp, 16, cudaHostAllocDefault), cudaSuccess);
  static_cast<float*>(hp)[0] = 1;
  ASSERT_EQ(cudaMemcpyAsync(d, hp, 16, cudaMemcpyHostToDevice, s), cudaSuccess);
  static_cast<float*>(hp)[0] = 200;
  ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
  EXPECT_EQ(Get(d, 4)[0], 200.0f);
  size_t free_b = 0, total_b = 0;
  ASSERT_EQ(cudaMemGetInfo(&free_b, &total_b), cudaSuccess);
  void* huge = nullptr;
  EXPECT_EQ(cudaMalloc(&huge, total_b + 1), cudaErrorMemoryAllocation);
  (void)cudaGetLastError();
  cudaFreeHost(hp);
  cudaFree(d);
  cudaStreamDestroy(s);
}

// --- cuBLAS
// ----------------------------------------------------------------------------------------

TEST(CudaEmuCublas, GemmExMatchesAndEnforcesArgumentRules) {
  cublasHandle_t h = nullptr;
  ASSERT_EQ(cublasCreate(&h), CUBLAS_STATUS_SUCCESS);
  const int m = 3, n = 2, k = 4;
  // A: k x m stored column-major with lda = k (op T), B: k x n (op N), C: m x n, ldc = m.
  std::vector<float> a(k * m), b(k * n), c(m * n, NAN);
  for (int i = 0; i < k * m; ++i) a[i] = 0.5f * i;
  for (int i = 0; i < k * n; ++i) b[i] = 1.0f - 0.25f * i;
  float *da = DevAlloc<float>(a.size()), *db = DevAlloc<float>(b.size()),
        *dc = DevAlloc<float>(c.size());
  cudaMemcpy(da, a.data(), a.size() * 4, cudaMemcpyHostToDevice);
  cudaMemcpy(db, b.data(), b.size() * 4, cudaMemcpyHostToDevice);
  cudaMemcpy(dc, c.data(), c.size() * 4, cudaMemcpyHostToDevice);  // NaN: beta = 0 ignores it
  const float one = 1.0f, zero = 0.0f;
  ASSERT_EQ(
      cublasGemmEx(h, CUBLAS_OP_T, CUBLAS_OP_N, m, n, k, &one, da, CUDA_R_32F, k, db, CUDA_R_32F, k,
                   &zero, dc, CUDA_R_32F, m, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
      CUBLAS_STATUS_SUCCESS);
  const auto got = Get(dc, m * n);
  for (int j = 0; j < n; ++j) {
    for (int i = 0; i < m; ++i) {
      double s = 0;
      for (int p = 0; p < k; ++p) s += double(a[i * k + p]) * b[j * k + p];
      EXPECT_FLOAT_EQ(got[j * m + i], static_cast<float>(s)) << i << "," << j;
    }
  }
  // lda < k for op T, ldc < m, negative sizes: invalid; mixed input types: not supported.
  EXPECT_EQ(cublasGemmEx(h, CUBLAS_OP_T, CUBLAS_OP_N, m, n, k, &one, da, CUDA_R_32F, k - 1, db,
                         CUDA_R_32F, k, &zero, dc, CUDA_R_32F, m, CUBLAS_COMPUTE_32F,
                         CUBLAS_GEMM_DEFAULT),
            CUBLAS_STATUS_INVALID_VALUE);
  EXPECT_EQ(
      cublasGemmEx(h, CUBLAS_OP_T, CUBLAS_OP_N, m, n, k, &one, da, CUDA_R_32F, k, db, CUDA_R_32F, k,
                   &zero, dc, CUDA_R_32F, m - 1, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
      CUBLAS_STATUS_INVALID_VALUE);
  EXPECT_EQ(
      cublasGemmEx(h, CUBLAS_OP_T, CUBLAS_OP_N, -1, n, k, &one, da, CUDA_R_32F, k, db, CUDA_R_32F,
                   k, &zero, dc, CUDA_R_32F, m, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
      CUBLAS_STATUS_INVALID_VALUE);
  EXPECT_EQ(
      cublasGemmEx(h, CUBLAS_OP_T, CUBLAS_OP_N, m, n, k, &one, da, CUDA_R_16BF, k, db, CUDA_R_32F,
                   k, &zero, dc, CUDA_R_32F, m, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
      CUBLAS_STATUS_NOT_SUPPORTED);
  cublasDestroy(h);
  cudaFree(da);
  cudaFree(db);
  cudaFree(dc);
}

}  // namespace
