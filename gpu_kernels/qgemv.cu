// Quantized GEMV (decode): one warp per weight row, 4 rows per 128-thread block; grid.y is the
// batch (QuantGemvBatched: matrix b, its strided x and y rows; QuantGemv: one batch; QuantGemvIds:
// pair p = batch0 + blockIdx.y, matrix ids[p], x row p / x_div, y row p).
//
// The warp walks its row in chunks of 32 units (a unit = 32 values, see quant_blocks_hd.h): a
// chunk is 32 legacy blocks (Q8_0: 32 x 34 = 1088 B), 4 K-quant super-blocks (Q4_K: 4 x 144 =
// 576 B, Q6_K: 4 x 210 = 840 B) or 1024 float elements. Each chunk is
//   1. staged into shared memory with coalesced 16-byte loads (lane i loads segment i, i + 32,
//      ...). Only Q4_K/Q5_K rows are 16-byte aligned; Q6_K (210 B) and the legacy blocks (18,
//      22, 34 B) are 2-byte aligned, so the copy keeps the chunk's offset from a 16-byte
//      boundary and loads the (at most two) partial end segments byte by byte: nothing outside
//      the weights is read. Weights are streamed once per call: ld.global.cs (evict first), so
//      x stays in cache;
//   2. decoded from shared memory, one unit per lane, bit-exactly as the CPU would;
//   3. dotted with the 32 matching values of every token (8 float4 loads of x per token, x is
//      small and L1/L2 resident): the weights are read once for all n_tok tokens.
// Finally the 32 partial sums of each token are added with a butterfly of warp shuffles.
//
// Shared memory: 4 warps x (chunk + 16..31 B of alignment slack) <= 4 x 4112 B (F32).
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <utility>

#include "gpu_kernels/cuda_check.h"
#include "gpu_kernels/kernel_macros.h"
#include "gpu_kernels/qgemv.h"
#include "gpu_kernels/quant_blocks_hd.h"

namespace moesplit::gpu {
namespace {

constexpr int kWarp = 32;
constexpr int kRowsPerCta = 4;                     // one warp per row
constexpr int kThreads = kWarp * kRowsPerCta;      // 128
constexpr int64_t kMaxRows = int64_t{1} << 31;     // grid.x = rows / 4 stays well inside 2^31 - 1
constexpr int64_t kMaxIdsCols = int64_t{1} << 36;  // QuantGemvIds (see its check)

template <GgmlType kT>
struct Geometry {
  static constexpr int kBlockValues = HdBlockValues(kT);
  static constexpr int kBlockBytes = HdBlockBytes(kT);
  static constexpr int kUnitsPerBlock = kBlockValues / kUnitValues;
  static constexpr int kBlocksPerChunk = kWarp / kUnitsPerBlock;  // one unit per lane
  static constexpr int kChunkBytes = kBlocksPerChunk * kBlockBytes;
  // Head slack (chunk start mod 16, <= 15) plus the chunk, in whole 16-byte segments.
  static constexpr int kStageBytes = (kChunkBytes + 15 + 15) / 16 * 16;
};

// Copies bytes [src, src + n) to dst + (src mod 16) and returns that offset (see the top).
// dst is 16-byte aligned, so aligned global segments land on aligned shared segments.
__device__ __forceinline__ int StageChunk(const uint8_t* src, int n, uint8_t* dst, int lane) {
  const int head = static_cast<int>(reinterpret_cast<uintptr_t>(src) & 15u);
  const uint8_t* base = src - head;
  const int end = head + n;
  const int nseg = (end + 15) / 16;
  for (int s = lane; s < nseg; s += kWarp) {
    const int lo = 16 * s;
    const int hi = lo + 16;
    if (lo >= head && hi <= end) {
      *reinterpret_cast<uint4*>(dst + lo) = __ldcs(reinterpret_cast<const uint4*>(base + lo));
    } else {
      for (int i = max(lo, head); i < min(hi, end); ++i) dst[i] = base[i];
    }
  }
  return head;
}

// acc[t] += sum_i v[i] * x[t * x_tok + i], i < 32, for t < n_tok. xc and x_tok * 4 bytes are
// multiples of 16 bytes (checked on the host), so every token's 32 values load as 8 float4.
template <int kMaxTok>
__device__ __forceinline__ void DotUnit(const float* v, const float* xc, int64_t x_tok, int n_tok,
                                        float* acc) {
#pragma unroll
  for (int t = 0; t < kMaxTok; ++t) {
    if (t < n_tok) {
      const float4* xp = reinterpret_cast<const float4*>(xc + t * x_tok);
      float s = 0.0f;
#pragma unroll
      for (int i = 0; i < kUnitValues / 4; ++i) {
        const float4 q = __ldg(xp + i);
        s = fmaf(v[4 * i], q.x, s);
        s = fmaf(v[4 * i + 1], q.y, s);
        s = fmaf(v[4 * i + 2], q.z, s);
        s = fmaf(v[4 * i + 3], q.w, s);
      }
      acc[t] += s;
    }
  }
}

// Batch b = batch0 + blockIdx.y, matrix m = ids ? ids[b] : b: weights w + m * rows * row_bytes
// ([rows] rows of row_bytes), x rows x + (b / x_div) * x_batch + t * x_tok ([cols] floats each),
// y rows y + b * y_batch + t * y_tok ([rows] floats each), t < n_tok; strides in floats. With ids,
// an m outside [0, n_expert) writes NaN to the batch's y rows and reads no weights.
template <GgmlType kT, int kMaxTok>
__global__ void __launch_bounds__(kThreads)
    QGemvKernel(const uint8_t* __restrict__ w, int64_t rows, int64_t cols, int64_t row_bytes,
                const int32_t* __restrict__ ids, int64_t n_expert, int64_t batch0,
                const float* __restrict__ x, int64_t x_tok, int64_t x_batch, int64_t x_div,
                int n_tok, float* __restrict__ y, int64_t y_tok, int64_t y_batch) {
  using G = Geometry<kT>;
  MOESPLIT_SHARED(uint8_t, stage, [kRowsPerCta][G::kStageBytes]);
  const int warp = static_cast<int>(threadIdx.x) / kWarp;
  const int lane = static_cast<int>(threadIdx.x) % kWarp;
  const int64_t row = static_cast<int64_t>(blockIdx.x) * kRowsPerCta + warp;
  if (row >= rows) return;  // the whole warp leaves together: no block-wide barrier below
  const int64_t batch = batch0 + blockIdx.y;
  float* yb = y + batch * y_batch;
  int64_t mat = batch;
  if (ids != nullptr) {
    mat = __ldg(ids + batch);  // the same for the whole block: the early return is uniform
    if (mat < 0 || mat >= n_expert) {
      if (lane == 0) {
        for (int t = 0; t < n_tok; ++t) yb[t * y_tok + row] = __int_as_float(0x7fffffff);
      }
      return;
    }
  }
  const uint8_t* wrow = w + (mat * rows + row) * row_bytes;
  const float* xb = x + (batch / x_div) * x_batch;
  const int64_t nblocks = cols / G::kBlockValues;
  float acc[kMaxTok];
#pragma unroll
  for (int t = 0; t < kMaxTok; ++t) acc[t] = 0.0f;

  for (int64_t b0 = 0; b0 < nblocks; b0 += G::kBlocksPerChunk) {
    const int nb = static_cast<int>(min(static_cast<int64_t>(G::kBlocksPerChunk), nblocks - b0));
    const int head = StageChunk(wrow + b0 * G::kBlockBytes, nb * G::kBlockBytes, stage[warp], lane);
    __syncwarp();
    if (lane < nb * G::kUnitsPerBlock) {
      // Unit `lane` of the chunk holds values 32 * lane .. 32 * lane + 31 of the chunk.
      float v[kUnitValues];
      HdDecodeUnit<kT>(stage[warp] + head + (lane / G::kUnitsPerBlock) * G::kBlockBytes,
                       lane % G::kUnitsPerBlock, v);
      DotUnit<kMaxTok>(v, xb + b0 * G::kBlockValues + lane * kUnitValues, x_tok, n_tok, acc);
    }
    __syncwarp();  // the next chunk overwrites the stage
  }

#pragma unroll
  for (int t = 0; t < kMaxTok; ++t) {
    if (t < n_tok) {
      float s = acc[t];
#pragma unroll
      for (int off = kWarp / 2; off > 0; off /= 2) s += __shfl_xor_sync(0xffffffffu, s, off);
      if (lane == 0) yb[t * y_tok + row] = s;
    }
  }
}

// One (batched) product, already checked; strides in floats. The batches launched are batch0 ..
// batch0 + n_batch - 1 (n_batch <= kQGemvMaxBatch: grid.y). The defaults of the last four are
// QuantGemv / QuantGemvBatched: matrix b for batch b, x_div 1.
struct GemvJob {
  const void* w;
  int64_t rows, cols, n_batch;
  const float* x;
  int64_t x_tok, x_batch;
  int n_tok;
  float* y;
  int64_t y_tok, y_batch;
  Stream stream;
  const int32_t* ids = nullptr;  // [batch0 + n_batch] (QuantGemvIds) or null
  int64_t n_expert = 0;          // matrices at w (ids only)
  int64_t x_div = 1;             // x row of batch b: b / x_div
  int64_t batch0 = 0;
};

template <GgmlType kT, int kMaxTok>
Status Launch(const GemvJob& j) {
  const dim3 grid(static_cast<unsigned>((j.rows + kRowsPerCta - 1) / kRowsPerCta),
                  static_cast<unsigned>(j.n_batch));
  MOESPLIT_LAUNCH(grid, kThreads, 0, j.stream, QGemvKernel<kT, kMaxTok>)
  (static_cast<const uint8_t*>(j.w), j.rows, j.cols, RowBytes(kT, j.cols), j.ids, j.n_expert,
   j.batch0, j.x, j.x_tok, j.x_batch, j.x_div, j.n_tok, j.y, j.y_tok, j.y_batch);
  CUDA_CHECK_LAUNCH();
  return Status::Ok();
}

// Token counts are rounded up to 1, 2, 4 or 8 accumulators (4 instantiations per type, not 8).
template <GgmlType kT>
Status LaunchType(const GemvJob& j) {
  if (j.n_tok <= 1) return Launch<kT, 1>(j);
  if (j.n_tok <= 2) return Launch<kT, 2>(j);
  if (j.n_tok <= 4) return Launch<kT, 4>(j);
  return Launch<kT, 8>(j);
}

Status Dispatch(GgmlType type, const GemvJob& j) {
  switch (type) {
#define MOESPLIT_LAUNCH_CASE(T) \
  case GgmlType::T:             \
    return LaunchType<GgmlType::T>(j);
    MOESPLIT_HD_DECODABLE_TYPES(MOESPLIT_LAUNCH_CASE)
#undef MOESPLIT_LAUNCH_CASE
    default:
      MOESPLIT_CHECK(false, "unreachable: ", TypeName(type));
      return Status::Ok();
  }
}

// CheckQuantGemvArgs' rules, with `fn` ("QuantGemv" / "QuantGemvBatched") in the messages.
Status CheckCommon(const char* fn, GgmlType type, int64_t rows, int64_t cols, const float* x,
                   int n_tok) {
  if (!QuantGemvSupports(type)) {
    return InvalidArgumentError(fn, ": weight type ", TypeName(type),
                                " is not supported (", kHdDecodableTypes, " are)");
  }
  const int bv = HdBlockValues(type);
  if (cols < 1 || cols % bv != 0) {
    return InvalidArgumentError(fn, ": cols = ", cols, " must be a positive multiple of ", bv,
                                " for ", TypeName(type));
  }
  if (rows < 1 || rows > kMaxRows) {
    return InvalidArgumentError(fn, ": rows = ", rows, " must be in [1, ", kMaxRows, "]");
  }
  if (n_tok < 1 || n_tok > kQGemvMaxTokens) {
    return InvalidArgumentError(fn, ": n_tok = ", n_tok, " must be in [1, ", kQGemvMaxTokens, "]");
  }
  if (reinterpret_cast<uintptr_t>(x) % 16 != 0) {
    return InvalidArgumentError(fn, ": x must be 16-byte aligned (float4 loads)");
  }
  return Status::Ok();
}

// The y rows [rows floats at t * y_tok + b * y_batch] are pairwise disjoint: the dimensions that
// repeat (count > 1), innermost (smaller stride) first, each step past the previous one's extent.
Status CheckOutputRowsDisjoint(int64_t rows, int n_tok, int64_t y_tok, int64_t n_batch,
                               int64_t y_batch) {
  struct Dim {
    int64_t stride, count;
  };
  Dim dims[2];
  int n = 0;
  if (n_tok > 1) dims[n++] = {y_tok, n_tok};
  if (n_batch > 1) dims[n++] = {y_batch, n_batch};
  if (n == 2 && dims[1].stride < dims[0].stride) std::swap(dims[0], dims[1]);
  int64_t extent = rows;  // floats spanned by the dimensions handled so far
  for (int i = 0; i < n; ++i) {
    if (dims[i].stride < extent) {
      return InvalidArgumentError(
          "QuantGemvBatched: output rows overlap: y_tok = ", y_tok, " (n_tok = ", n_tok,
          "), y_batch = ", y_batch, " (n_batch = ", n_batch, ") for rows = ", rows,
          " (each repeated dimension's stride must be >= the extent of the ones inside it)");
    }
    extent = dims[i].stride * (dims[i].count - 1) + extent;
  }
  return Status::Ok();
}

}  // namespace

bool QuantGemvSupports(GgmlType type) { return HdCanDecode(type); }

Status CheckQuantGemvArgs(GgmlType type, int64_t rows, int64_t cols, const float* x, int n_tok) {
  return CheckCommon("QuantGemv", type, rows, cols, x, n_tok);
}

Status CheckQuantGemvBatchedArgs(GgmlType type, int64_t rows, int64_t cols, int64_t n_batch,
                                 const float* x, int64_t x_tok, int64_t x_batch, int n_tok,
                                 int64_t y_tok, int64_t y_batch) {
  MOESPLIT_RETURN_IF_ERROR(CheckCommon("QuantGemvBatched", type, rows, cols, x, n_tok));
  if (n_batch < 1 || n_batch > kQGemvMaxBatch) {
    return InvalidArgumentError("QuantGemvBatched: n_batch = ", n_batch, " must be in [1, ",
                                kQGemvMaxBatch, "]");
  }
  const struct {
    const char* name;
    int64_t value;
  } strides[] = {{"x_tok", x_tok}, {"x_batch", x_batch}, {"y_tok", y_tok}, {"y_batch", y_batch}};
  for (const auto& s : strides) {
    if (s.value < 0 || s.value > kQGemvMaxStride) {
      return InvalidArgumentError("QuantGemvBatched: ", s.name, " = ", s.value, " must be in [0, ",
                                  kQGemvMaxStride, "] floats");
    }
  }
  if ((n_tok > 1 && x_tok % 4 != 0) || (n_batch > 1 && x_batch % 4 != 0)) {
    return InvalidArgumentError("QuantGemvBatched: x_tok = ", x_tok, " / x_batch = ", x_batch,
                                " must be multiples of 4 floats (every row of x starts 16-byte "
                                "aligned: float4 loads)");
  }
  return CheckOutputRowsDisjoint(rows, n_tok, y_tok, n_batch, y_batch);
}

Status CheckQuantGemvIdsArgs(GgmlType type, int64_t rows, int64_t cols, int64_t n_expert,
                             const int32_t* ids, int64_t n_pairs, const float* x, int64_t x_div) {
  MOESPLIT_RETURN_IF_ERROR(CheckCommon("QuantGemvIds", type, rows, cols, x, 1));
  constexpr int64_t kMaxExpert = std::numeric_limits<int32_t>::max();
  if (n_expert < 1 || n_expert > kMaxExpert) {
    return InvalidArgumentError("QuantGemvIds: n_expert = ", n_expert, " must be in [1, ",
                                kMaxExpert, "] (int32 ids)");
  }
  // x offsets (p / x_div) * cols < 2^24 * 2^36 and RowBytes below stay far from 2^63.
  if (cols > kMaxIdsCols) {
    return InvalidArgumentError("QuantGemvIds: cols = ", cols, " must be <= ", kMaxIdsCols);
  }
  // The kernel's byte offset (e * rows + row) * row_bytes, e < n_expert, must not overflow.
  constexpr int64_t kMaxBytes = std::numeric_limits<int64_t>::max();
  const int64_t row_bytes = RowBytes(type, cols);
  if (row_bytes < 1 || rows > kMaxBytes / row_bytes || n_expert > kMaxBytes / (rows * row_bytes)) {
    return InvalidArgumentError("QuantGemvIds: n_expert = ", n_expert, " matrices of ", rows,
                                " rows x ", row_bytes, " bytes span 2^63 bytes or more");
  }
  if (n_pairs < 0 || n_pairs > kQGemvMaxPairs) {
    return InvalidArgumentError("QuantGemvIds: n_pairs = ", n_pairs, " must be in [0, ",
                                kQGemvMaxPairs, "]");
  }
  if (x_div < 1) {
    return InvalidArgumentError("QuantGemvIds: x_div = ", x_div, " must be >= 1 (pairs per x row)");
  }
  if (n_pairs > 0 && ids == nullptr) {
    return InvalidArgumentError("QuantGemvIds: ids is null for n_pairs = ", n_pairs);
  }
  return Status::Ok();
}

Status QuantGemv(GgmlType type, const void* w, int64_t rows, int64_t cols, const float* x,
                 int n_tok, float* y, Stream stream) {
  MOESPLIT_RETURN_IF_ERROR(CheckQuantGemvArgs(type, rows, cols, x, n_tok));
  // One batch; x_tok = cols and y_tok = rows: contiguous n_tok x cols and n_tok x rows.
  return Dispatch(type, GemvJob{w, rows, cols, 1, x, cols, 0, n_tok, y, rows, 0, stream});
}

Status QuantGemvBatched(GgmlType type, const void* w, int64_t rows, int64_t cols, int64_t n_batch,
                        const float* x, int64_t x_tok, int64_t x_batch, int n_tok, float* y,
                        int64_t y_tok, int64_t y_batch, Stream stream) {
  MOESPLIT_RETURN_IF_ERROR(CheckQuantGemvBatchedArgs(type, rows, cols, n_batch, x, x_tok, x_batch,
                                                     n_tok, y_tok, y_batch));
  return Dispatch(
      type, GemvJob{w, rows, cols, n_batch, x, x_tok, x_batch, n_tok, y, y_tok, y_batch, stream});
}

Status QuantGemvIds(GgmlType type, const void* w, int64_t rows, int64_t cols, int64_t n_expert,
                    const int32_t* ids, int64_t n_pairs, const float* x, int64_t x_div, float* y,
                    Stream stream) {
  MOESPLIT_RETURN_IF_ERROR(
      CheckQuantGemvIdsArgs(type, rows, cols, n_expert, ids, n_pairs, x, x_div));
  // One token per pair: n_tok = 1 (x_tok, y_tok unused), x rows cols floats apart (x_batch =
  // cols, divided by x_div in the kernel), y rows rows floats apart. The pairs go in chunks of
  // grid.y; the kernel indexes ids, x and y with the absolute pair batch0 + blockIdx.y, so the
  // pointers stay as checked (16-byte aligned x).
  for (int64_t p0 = 0; p0 < n_pairs; p0 += kQGemvMaxBatch) {
    const int64_t n = std::min(kQGemvMaxBatch, n_pairs - p0);
    GemvJob j{w, rows, cols, n, x, cols, cols, 1, y, rows, rows, stream};
    j.ids = ids;
    j.n_expert = n_expert;
    j.x_div = x_div;
    j.batch0 = p0;
    MOESPLIT_RETURN_IF_ERROR(Dispatch(type, j));
  }
  return Status::Ok();
}

}  // namespace moesplit::gpu
