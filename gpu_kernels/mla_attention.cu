// MLA attention kernels (see mla_attention.h for the maths, mla_hd.h for the online softmax).
//
// Work split. One block of 256 threads (8 warps) handles one query token, a group of 16 heads
// and one split of positions; it walks its positions in tiles of 32. The cache is shared by all
// heads (MLA's point): a tile of 32 positions x 576 values x 2 B = 36,864 B (1152 B a position)
// is read from global memory once per block and used by its 16 heads from shared memory, so the
// cache is read n_head / 16 times per token (the repeats of one tile by the head-group blocks of
// a token run close together and mostly hit L2). Per tile, for the block's 16 heads:
//   1. load: 2304 16-byte loads (9 a thread), coalesced (rows are contiguous 1152 B);
//   2. scores S[16 x 32] = Q[16 x 576] C^T: 16 x 32 x 576 = 294,912 FMAs, 1152 a thread; each
//      thread owns 4 heads x 4 positions over an eighth of the 576 values (8-lane reduction);
//   3. online softmax: one warp per 2 heads, lane = position (warp max, warp sum);
//   4. O[16 x 512] = alpha O + P[16 x 32] C[32 x 512]: 262,144 FMAs, 1024 a thread; each
//      thread owns 4 heads x 8 values of O (32 f32 accumulators in registers).
// Shared memory: q [16 x 576] f32 36,864 B + tile [32 x 592] 16-bit (rows padded by 16 values so
// that the 8-lane slices of 4 rows hit 32 distinct banks) 37,888 B + P [16 x 32] f32 2,048 B +
// alpha, (m, l) 192 B = 76,992 B (dynamic; opt-in above 48 KB, allowed on sm_80..sm_90).
// Accumulation is f32 throughout; the cache values are exact in f32.
//
// Flash-decoding: when tokens x head groups give few blocks (decode), the positions are split
// over blockIdx.x (mla_hd.h MlaPlanSplits); each split writes its unnormalised partial
// (m, l, acc[512]) to the workspace and MlaMergeKernel combines them (weights exp(m_i - M) / L).
// With one split the attention kernel writes acc / l directly.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cmath>
#include <cstring>

#include "gpu_kernels/cuda_check.h"
#include "gpu_kernels/kernel_macros.h"
#include "gpu_kernels/mla_attention.h"
#include "gpu_kernels/mla_hd.h"

namespace moesplit::gpu {
namespace {

constexpr int kThreads = 256;
constexpr int kHb = kMlaHeadsPerBlock;           // 16 heads a block
constexpr int kTs = kMlaTile;                    // 32 positions a tile
constexpr int kRowWords = kMlaRowDim / 2;        // 288 32-bit words (value pairs) a row
constexpr int kLatentWords = kMlaLatentDim / 2;  // 256 words: the c part
constexpr int kTileStride = kRowWords + 8;       // 296 words a row in shared memory
constexpr int kQFloats = kHb * kMlaRowDim;       // 9216: q [16 x 576] f32
constexpr int kTileWords = kTs * kTileStride;    // 9472: tile [32 x 296] words
constexpr int kPFloats = kHb * kTs;              // 512: P [16 x 32] f32
constexpr int kSmemFloats = kQFloats + kTileWords + kPFloats + 3 * kHb;
constexpr size_t kSmemBytes = kSmemFloats * sizeof(float);  // 76,992 B
constexpr int kMergeThreads = 128;

static_assert(kHb == 2 * (kThreads / 32), "softmax: one warp per two heads");
static_assert(kTs == 32, "softmax: one lane per position");
static_assert((kHb / 4) * 8 * 8 == kThreads, "scores: 4 head quads x 8 position octets x 8 slices");
static_assert((kHb / 4) * (kLatentWords / 4) == kThreads, "output: 4 head quads x 64 word lanes");
static_assert(kRowWords % 8 == 0 && (kTileStride * 4) % 16 == 0, "tile rows: 16-byte aligned");
static_assert(kTileStride % 32 == 8, "bank offset 8 per row: 4 rows x 8 lanes = 32 banks");

// Two cache values packed in a word, low half first, as floats.
template <LatentCacheType T>
__device__ __forceinline__ float2 Unpack2(uint32_t w);
template <>
__device__ __forceinline__ float2 Unpack2<LatentCacheType::kF16>(uint32_t w) {
  __half2 h;
  memcpy(&h, &w, 4);
  return __half22float2(h);
}
template <>
__device__ __forceinline__ float2 Unpack2<LatentCacheType::kBF16>(uint32_t w) {
  const MlaFloatPair p = MlaBf16PairToFloats(w);
  return make_float2(p.x, p.y);
}

// Two floats as the cache's packed pair (round to nearest even).
template <LatentCacheType T>
__device__ __forceinline__ uint32_t Pack2(float2 v);
template <>
__device__ __forceinline__ uint32_t Pack2<LatentCacheType::kF16>(float2 v) {
  const __half2 h = __floats2half2_rn(v.x, v.y);
  uint32_t w;
  memcpy(&w, &h, 4);
  return w;
}
template <>
__device__ __forceinline__ uint32_t Pack2<LatentCacheType::kBF16>(float2 v) {
  const __nv_bfloat162 h = __floats2bfloat162_rn(v.x, v.y);
  uint32_t w;
  memcpy(&w, &h, 4);
  return w;
}

// rows [n_pairs] f32 pairs -> dst [n_pairs] packed pairs (the cache rows from position p0 on).
template <LatentCacheType T>
__global__ void AppendLatentKernel(const float2* __restrict__ rows, uint32_t* __restrict__ dst,
                                   int64_t n_pairs) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n_pairs) dst[i] = Pack2<T>(rows[i]);
}

struct AttnArgs {
  const float* q;      // [n_tok x n_head x 576] f32
  const uint4* cache;  // [n_kv x 72] 16-byte chunks: [n_kv x 576] 16-bit values
  float* out;          // [n_tok x n_head x 512] f32 (n_split == 1)
  float* part_acc;     // [n_tok x n_head x n_split x 512] f32 (n_split > 1)
  float* part_ml;      // [n_tok x n_head x n_split x 2] f32: (m, l)
  int n_head;
  int n_split;
  int64_t pos0;
  int64_t chunk;  // positions a split
  float scale;
};

// q rows of token t, heads h0 .. h0 + 15 -> q_s [16 x 576] f32 (zeros for heads >= n_head).
// 16 x 576 / 4 = 2304 float4 loads, 9 a thread, consecutive threads on consecutive chunks.
__device__ void LoadQ(float* q_s, const AttnArgs& a, int t, int h0) {
  constexpr int kChunks = kMlaRowDim / 4;  // 144 float4 a row
  for (int i = threadIdx.x; i < kHb * kChunks; i += kThreads) {
    const int h = i / kChunks, c = i % kChunks;
    float4 v = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    if (h0 + h < a.n_head) {
      const int64_t row = static_cast<int64_t>(t) * a.n_head + h0 + h;
      v = reinterpret_cast<const float4*>(a.q + row * kMlaRowDim)[c];
    }
    reinterpret_cast<float4*>(q_s + h * kMlaRowDim)[c] = v;
  }
}

// Cache rows tile0 .. tile0 + n_rows - 1 -> tile_s [32 x 296] words; rows >= n_rows are zeroed
// (their probability is 0, and 0 x garbage could be NaN). 32 x 72 = 2304 uint4, 9 a thread.
__device__ void LoadTile(uint32_t* tile_s, const uint4* __restrict__ cache, int64_t tile0,
                         int n_rows) {
  constexpr int kChunks = kRowWords / 4;  // 72 uint4 a row
  for (int i = threadIdx.x; i < kTs * kChunks; i += kThreads) {
    const int r = i / kChunks, c = i % kChunks;
    uint4 v = make_uint4(0u, 0u, 0u, 0u);
    if (r < n_rows) v = cache[(tile0 + r) * kChunks + c];
    *reinterpret_cast<uint4*>(tile_s + r * kTileStride + 4 * c) = v;
  }
}

// p_s[h][p] = scale * q_h . row_p (576 values) for the tile, -inf for p >= n_rows.
// Thread: ks = tid & 7 takes value pairs ks, ks + 8, .. (36 pairs, 72 values); pq = (tid >> 3)
// & 7 positions pq + 8 r (r < 4); hq = tid >> 6 heads 4 hq + i (i < 4). A warp is 8 slices x 4
// position octets of one head quad: q reads are 8 consecutive float2 broadcast to 4 lane groups;
// row reads hit banks 8 pq + ks + const (row stride 296 = 8 mod 32): conflict-free.
template <LatentCacheType T>
__device__ void ScoreTile(const float* q_s, const uint32_t* tile_s, float* p_s, float scale,
                          int n_rows) {
  const int ks = threadIdx.x & 7, pq = (threadIdx.x >> 3) & 7, hq = threadIdx.x >> 6;
  const float2* q2 = reinterpret_cast<const float2*>(q_s);
  float s[4][4] = {};
#pragma unroll 4
  for (int j = 0; j < kRowWords / 8; ++j) {
    const int kp = ks + 8 * j;
    float2 qv[4], cv[4];
#pragma unroll
    for (int i = 0; i < 4; ++i) qv[i] = q2[(4 * hq + i) * kRowWords + kp];
#pragma unroll
    for (int r = 0; r < 4; ++r) cv[r] = Unpack2<T>(tile_s[(pq + 8 * r) * kTileStride + kp]);
#pragma unroll
    for (int i = 0; i < 4; ++i) {
#pragma unroll
      for (int r = 0; r < 4; ++r) s[i][r] = fmaf(qv[i].x, cv[r].x, fmaf(qv[i].y, cv[r].y, s[i][r]));
    }
  }
  // Sum the 8 slices (lanes differing in bits 0..2); lane ks then stores the values v = 4 i + r
  // with v % 8 == ks (2 each).
#pragma unroll
  for (int i = 0; i < 4; ++i) {
#pragma unroll
    for (int r = 0; r < 4; ++r) {
      float v = s[i][r];
      v += __shfl_xor_sync(0xffffffffu, v, 1);
      v += __shfl_xor_sync(0xffffffffu, v, 2);
      v += __shfl_xor_sync(0xffffffffu, v, 4);
      const int p = pq + 8 * r;
      if (((4 * i + r) & 7) == ks) p_s[(4 * hq + i) * kTs + p] = p < n_rows ? scale * v : -INFINITY;
    }
  }
}

__device__ __forceinline__ float WarpMax(float v) {
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}
__device__ __forceinline__ float WarpSum(float v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

// Online softmax step: warp w owns heads 2w, 2w + 1 (its lanes hold identical copies of their
// states st[2]); lane = position. Scores in p_s become probabilities exp(s - m) (unnormalised),
// alpha_s[h] the rescale of the head's accumulator.
__device__ void SoftmaxTile(float* p_s, float* alpha_s, MlaSoftmaxState* st) {
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
#pragma unroll
  for (int k = 0; k < 2; ++k) {
    const int h = 2 * warp + k;
    const float x = p_s[h * kTs + lane];
    const float alpha = MlaOnlineRescale(&st[k], WarpMax(x));
    const float p = MlaExpShift(x, st[k].m);
    st[k].l += WarpSum(p);
    p_s[h * kTs + lane] = p;
    if (lane == 0) alpha_s[h] = alpha;
  }
}

// acc = alpha acc + P C for the thread's 4 heads (4 hq + i) and 8 latent values: word lanes
// wl = tid & 63 take words wl + 64 j (j < 4), i.e. values 2 wl + 128 j and + 1. Row reads are 32
// consecutive words a warp (conflict-free), P reads broadcasts.
template <LatentCacheType T>
__device__ void AccumulateTile(const uint32_t* tile_s, const float* p_s, const float* alpha_s,
                               float2 (&acc)[4][4]) {
  const int wl = threadIdx.x & 63, hq = threadIdx.x >> 6;
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const float a = alpha_s[4 * hq + i];
#pragma unroll
    for (int j = 0; j < 4; ++j) acc[i][j] = make_float2(acc[i][j].x * a, acc[i][j].y * a);
  }
#pragma unroll 4
  for (int p = 0; p < kTs; ++p) {
    float2 cv[4];
#pragma unroll
    for (int j = 0; j < 4; ++j) cv[j] = Unpack2<T>(tile_s[p * kTileStride + wl + 64 * j]);
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const float w = p_s[(4 * hq + i) * kTs + p];
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        acc[i][j].x = fmaf(w, cv[j].x, acc[i][j].x);
        acc[i][j].y = fmaf(w, cv[j].y, acc[i][j].y);
      }
    }
  }
}

// The block's result: out = acc / l (one split) or the partial (acc, m, l) of split `split`.
// ml_s [16 x 2] holds the heads' final (m, l). Writes are 32 consecutive float2 a warp.
__device__ void WriteResult(const AttnArgs& a, const float* ml_s, const float2 (&acc)[4][4], int t,
                            int h0, int split) {
  const int wl = threadIdx.x & 63, hq = threadIdx.x >> 6;
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const int hl = 4 * hq + i;
    if (h0 + hl >= a.n_head) continue;
    const int64_t row = static_cast<int64_t>(t) * a.n_head + h0 + hl;
    float inv = 1.0f;
    float* dst = nullptr;
    if (a.n_split == 1) {
      inv = MlaSafeInverse(ml_s[2 * hl + 1]);
      dst = a.out + row * kMlaLatentDim;
    } else {
      const int64_t part = row * a.n_split + split;
      dst = a.part_acc + part * kMlaLatentDim;
      if (wl == 0) {
        a.part_ml[2 * part] = ml_s[2 * hl];
        a.part_ml[2 * part + 1] = ml_s[2 * hl + 1];
      }
    }
    float2* dst2 = reinterpret_cast<float2*>(dst);
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      dst2[wl + 64 * j] = make_float2(acc[i][j].x * inv, acc[i][j].y * inv);
    }
  }
}

// grid (n_split, ceil(n_head / 16), n_tok), kThreads threads, kSmemBytes dynamic shared memory.
template <LatentCacheType T>
__global__ void __launch_bounds__(kThreads) MlaAttentionKernel(AttnArgs a) {
  MOESPLIT_DYNAMIC_SHARED(float4, smem4);
  float* q_s = reinterpret_cast<float*>(smem4);                    // [16 x 576] f32
  uint32_t* tile_s = reinterpret_cast<uint32_t*>(q_s + kQFloats);  // [32 x 296] words
  float* p_s = reinterpret_cast<float*>(tile_s + kTileWords);      // [16 x 32] f32
  float* alpha_s = p_s + kPFloats;                                 // [16] f32
  float* ml_s = alpha_s + kHb;                                     // [16 x 2] f32
  const int split = blockIdx.x, h0 = blockIdx.y * kHb, t = blockIdx.z;
  const int64_t n_valid = a.pos0 + t + 1;  // causal: positions 0 .. pos0 + t
  const int64_t begin = split * a.chunk;
  const int64_t end = begin + a.chunk < n_valid ? begin + a.chunk : n_valid;  // may be <= begin
  LoadQ(q_s, a, t, h0);
  MlaSoftmaxState st[2] = {MlaEmptyState(), MlaEmptyState()};  // heads 2 warp, 2 warp + 1
  float2 acc[4][4];
#pragma unroll
  for (int i = 0; i < 4; ++i) {
#pragma unroll
    for (int j = 0; j < 4; ++j) acc[i][j] = make_float2(0.0f, 0.0f);
  }
  for (int64_t tile0 = begin; tile0 < end; tile0 += kTs) {
    const int n_rows = static_cast<int>(end - tile0 < kTs ? end - tile0 : kTs);
    __syncthreads();  // the previous tile's readers are done with tile_s, p_s and alpha_s
    LoadTile(tile_s, a.cache, tile0, n_rows);
    __syncthreads();  // tile_s (and, the first time, q_s) complete
    ScoreTile<T>(q_s, tile_s, p_s, a.scale, n_rows);
    __syncthreads();
    SoftmaxTile(p_s, alpha_s, st);
    __syncthreads();
    AccumulateTile<T>(tile_s, p_s, alpha_s, acc);
  }
  if ((threadIdx.x & 31) == 0) {
    const int warp = threadIdx.x >> 5;
    for (int k = 0; k < 2; ++k) {
      ml_s[2 * (2 * warp + k)] = st[k].m;
      ml_s[2 * (2 * warp + k) + 1] = st[k].l;
    }
  }
  __syncthreads();
  WriteResult(a, ml_s, acc, t, h0, split);
}

// grid (n_head, n_tok), kMergeThreads threads: out[t][h] = sum_i w_i part_acc[t][h][i] with the
// weights of MlaMergeWeights. Reads n_split x 512 f32 (coalesced, thread d on value d + 128 k).
__global__ void __launch_bounds__(kMergeThreads)
    MlaMergeKernel(const float* __restrict__ part_acc, const float* __restrict__ part_ml,
                   int n_split, float* __restrict__ out) {
  MOESPLIT_SHARED(float, w_s, [kMlaMaxSplits]);
  const int64_t row = static_cast<int64_t>(blockIdx.y) * gridDim.x + blockIdx.x;  // t n_head + h
  if (threadIdx.x == 0) MlaMergeWeights(part_ml + row * n_split * 2, n_split, w_s);
  __syncthreads();
  const float* acc = part_acc + row * n_split * kMlaLatentDim;
  for (int d = threadIdx.x; d < kMlaLatentDim; d += kMergeThreads) {
    float sum = 0.0f;
    for (int i = 0; i < n_split; ++i) sum = fmaf(w_s[i], acc[i * kMlaLatentDim + d], sum);
    out[row * kMlaLatentDim + d] = sum;
  }
}

bool Aligned(const void* p, size_t a) { return reinterpret_cast<uintptr_t>(p) % a == 0; }

bool ValidType(LatentCacheType t) {
  return t == LatentCacheType::kF16 || t == LatentCacheType::kBF16;
}

// Shape checks of MlaAttention / MlaAttentionWorkspaceBytes (no CUDA call).
Status ValidateParams(const MlaAttentionParams& p) {
  if (p.n_tok < 1 || p.n_tok > 65535) {
    return InvalidArgumentError("MlaAttention: n_tok ", p.n_tok, " not in [1, 65535]");
  }
  if (p.n_head < 1 || p.n_head > 4096) {
    return InvalidArgumentError("MlaAttention: n_head ", p.n_head, " not in [1, 4096]");
  }
  if (p.pos0 < 0) return InvalidArgumentError("MlaAttention: pos0 ", p.pos0, " < 0");
  if (p.n_kv < 1 || p.pos0 + p.n_tok > p.n_kv) {
    return OutOfRangeError("MlaAttention: pos0 ", p.pos0, " + n_tok ", p.n_tok,
                           " exceeds the cache's n_kv ", p.n_kv, " rows");
  }
  if (!std::isfinite(p.scale)) return InvalidArgumentError("MlaAttention: scale ", p.scale);
  if (!ValidType(p.cache_type)) {
    return InvalidArgumentError("MlaAttention: cache type ", static_cast<int>(p.cache_type),
                                " (F16 or BF16)");
  }
  if (p.n_split < 0 || p.n_split > kMlaMaxSplits) {
    return InvalidArgumentError("MlaAttention: n_split ", p.n_split, " not in [0, ", kMlaMaxSplits,
                                "]");
  }
  return Status::Ok();
}

size_t PartAccFloats(const MlaAttentionParams& p, int64_t n_split) {
  return static_cast<size_t>(p.n_tok * p.n_head * n_split * kMlaLatentDim);
}

template <LatentCacheType T>
Status LaunchAttention(const AttnArgs& a, dim3 grid, Stream stream) {
  CUDA_CHECK(cudaFuncSetAttribute(MlaAttentionKernel<T>,
                                  cudaFuncAttributeMaxDynamicSharedMemorySize,
                                  static_cast<int>(kSmemBytes)));
  MOESPLIT_LAUNCH(grid, kThreads, kSmemBytes, stream, MlaAttentionKernel<T>)(a);
  CUDA_CHECK_LAUNCH();
  return Status::Ok();
}

}  // namespace

Status AppendLatent(const float* rows, int64_t n_tok, int64_t p0, void* cache, LatentCacheType type,
                    int64_t n_ctx, Stream stream) {
  if (n_tok < 1) return InvalidArgumentError("AppendLatent: n_tok ", n_tok, " < 1");
  if (p0 < 0 || n_ctx < 0 || p0 + n_tok > n_ctx) {
    return OutOfRangeError("AppendLatent: positions ", p0, " .. ", p0 + n_tok - 1,
                           " outside the cache's ", n_ctx, " rows");
  }
  if (!ValidType(type)) {
    return InvalidArgumentError("AppendLatent: cache type ", static_cast<int>(type));
  }
  if (rows == nullptr || cache == nullptr) {
    return InvalidArgumentError("AppendLatent: null pointer (rows ", rows, ", cache ", cache, ")");
  }
  if (!Aligned(rows, 8) || !Aligned(cache, 4)) {
    return InvalidArgumentError("AppendLatent: rows ", rows, " not 8-byte or cache ", cache,
                                " not 4-byte aligned");
  }
  const int64_t n_pairs = n_tok * kRowWords;  // [n_tok x 288] pairs
  uint32_t* dst = static_cast<uint32_t*>(cache) + p0 * kRowWords;
  const auto* src = reinterpret_cast<const float2*>(rows);
  const unsigned blocks = static_cast<unsigned>((n_pairs + 255) / 256);
  if (type == LatentCacheType::kF16) {
    MOESPLIT_LAUNCH(blocks, 256, 0, stream, AppendLatentKernel<LatentCacheType::kF16>)
    (src, dst, n_pairs);
  } else {
    MOESPLIT_LAUNCH(blocks, 256, 0, stream, AppendLatentKernel<LatentCacheType::kBF16>)
    (src, dst, n_pairs);
  }
  CUDA_CHECK_LAUNCH();
  return Status::Ok();
}

StatusOr<size_t> MlaAttentionWorkspaceBytes(const MlaAttentionParams& p) {
  MOESPLIT_RETURN_IF_ERROR(ValidateParams(p));
  const MlaSplitPlan plan = MlaPlanSplits(p.n_tok, p.n_head, p.pos0, p.n_split);
  if (plan.n_split == 1) return size_t{0};
  // part_acc [n_tok x n_head x n_split x 512] then part_ml [n_tok x n_head x n_split x 2].
  return (PartAccFloats(p, plan.n_split) +
          static_cast<size_t>(p.n_tok * p.n_head * plan.n_split * 2)) *
         sizeof(float);
}

Status MlaAttention(const MlaAttentionParams& p, const float* q, const void* cache, float* out,
                    void* workspace, size_t workspace_bytes, Stream stream) {
  MOESPLIT_ASSIGN_OR_RETURN(const size_t need, MlaAttentionWorkspaceBytes(p));
  if (q == nullptr || cache == nullptr || out == nullptr) {
    return InvalidArgumentError("MlaAttention: null pointer (q ", q, ", cache ", cache, ", out ",
                                out, ")");
  }
  if (!Aligned(q, 16) || !Aligned(cache, 16) || !Aligned(out, 16) || !Aligned(workspace, 16)) {
    return InvalidArgumentError("MlaAttention: q ", q, ", cache ", cache, ", out ", out,
                                ", workspace ", workspace, " must be 16-byte aligned");
  }
  if (need > 0 && (workspace == nullptr || workspace_bytes < need)) {
    return InvalidArgumentError("MlaAttention: workspace of ", workspace_bytes, " bytes at ",
                                workspace, "; ", need, " needed");
  }
  const MlaSplitPlan plan = MlaPlanSplits(p.n_tok, p.n_head, p.pos0, p.n_split);
  AttnArgs a;
  a.q = q;
  a.cache = static_cast<const uint4*>(cache);
  a.out = out;
  a.part_acc = plan.n_split > 1 ? static_cast<float*>(workspace) : nullptr;
  a.part_ml = plan.n_split > 1 ? a.part_acc + PartAccFloats(p, plan.n_split) : nullptr;
  a.n_head = static_cast<int>(p.n_head);
  a.n_split = static_cast<int>(plan.n_split);
  a.pos0 = p.pos0;
  a.chunk = plan.chunk;
  a.scale = p.scale;
  const dim3 grid(static_cast<unsigned>(plan.n_split),
                  static_cast<unsigned>((p.n_head + kHb - 1) / kHb),
                  static_cast<unsigned>(p.n_tok));
  MOESPLIT_RETURN_IF_ERROR(p.cache_type == LatentCacheType::kF16
                               ? LaunchAttention<LatentCacheType::kF16>(a, grid, stream)
                               : LaunchAttention<LatentCacheType::kBF16>(a, grid, stream));
  if (plan.n_split > 1) {
    const dim3 merge_grid(static_cast<unsigned>(p.n_head), static_cast<unsigned>(p.n_tok));
    MOESPLIT_LAUNCH(merge_grid, kMergeThreads, 0, stream, MlaMergeKernel)
    (a.part_acc, a.part_ml, a.n_split, out);
    CUDA_CHECK_LAUNCH();
  }
  return Status::Ok();
}

Status MlaAttentionDecode(const float* q, int64_t n_head, const void* cache,
                          LatentCacheType cache_type, int64_t n_kv, float scale, float* out,
                          void* workspace, size_t workspace_bytes, Stream stream) {
  if (n_kv < 1) return OutOfRangeError("MlaAttentionDecode: n_kv ", n_kv, ": no position");
  MlaAttentionParams p;
  p.n_tok = 1;
  p.n_head = n_head;
  p.n_kv = n_kv;
  p.pos0 = n_kv - 1;
  p.scale = scale;
  p.cache_type = cache_type;
  return MlaAttention(p, q, cache, out, workspace, workspace_bytes, stream);
}

}  // namespace moesplit::gpu
