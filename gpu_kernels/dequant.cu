// Row decoding kernels. One thread per 32-value unit (quant_blocks_hd.h) for the quantized types:
// thread u decodes unit u of the output in row-major order, so neighbouring threads read
// neighbouring bytes of the weights (a Q4_K super-block = 8 consecutive threads) and write
// neighbouring 64 B (bf16) or 128 B (f32) runs with 16-byte stores. The float types (F32, F16,
// BF16) go element by element, which also serves rows whose length is not a multiple of 32.
// These kernels feed the prefill GEMM, whose tensor-core product costs far more than the decode,
// so they favour simplicity over the shared-memory staging of qgemv.cu.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

#include "gpu_kernels/cuda_check.h"
#include "gpu_kernels/dequant.h"
#include "gpu_kernels/kernel_macros.h"
#include "gpu_kernels/quant_blocks_hd.h"

namespace moesplit::gpu {
namespace {

constexpr int kThreads = 256;
constexpr int64_t kMaxGrid = int64_t{1} << 20;  // grid-stride loops beyond 2^28 threads

unsigned GridFor(int64_t work) {
  return static_cast<unsigned>(std::clamp<int64_t>((work + kThreads - 1) / kThreads, 1, kMaxGrid));
}

__device__ __forceinline__ uint32_t PackBf16(float lo, float hi) {
  return static_cast<uint32_t>(HdFloatToBf16(lo)) | static_cast<uint32_t>(HdFloatToBf16(hi)) << 16;
}

// Decodes unit k (32 values from 32k) of weight row `row` of the rows starting at w.
template <GgmlType kT>
__device__ __forceinline__ void DecodeUnitAt(const uint8_t* w, int64_t row, int64_t row_bytes,
                                             int64_t k, float* v) {
  constexpr int kUnitsPerBlock = HdBlockValues(kT) / kUnitValues;
  HdDecodeUnit<kT>(w + row * row_bytes + (k / kUnitsPerBlock) * HdBlockBytes(kT),
                   static_cast<int>(k % kUnitsPerBlock), v);
}

template <GgmlType kT>
__global__ void __launch_bounds__(kThreads)
    DequantBf16Kernel(const uint8_t* __restrict__ w, int64_t row_bytes, int64_t units_per_row,
                      int64_t total_units, uint16_t* __restrict__ out) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t u = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; u < total_units;
       u += stride) {
    float v[kUnitValues];
    DecodeUnitAt<kT>(w, u / units_per_row, row_bytes, u % units_per_row, v);
    uint4* dst = reinterpret_cast<uint4*>(out + u * kUnitValues);  // 64 B per unit
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      dst[i] =
          make_uint4(PackBf16(v[8 * i], v[8 * i + 1]), PackBf16(v[8 * i + 2], v[8 * i + 3]),
                     PackBf16(v[8 * i + 4], v[8 * i + 5]), PackBf16(v[8 * i + 6], v[8 * i + 7]));
    }
  }
}

template <GgmlType kT>
__global__ void __launch_bounds__(kThreads)
    GetRowsKernel(const uint8_t* __restrict__ w, int64_t row_bytes, int64_t units_per_row,
                  const int32_t* __restrict__ ids, int64_t total_units, float* __restrict__ out) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t u = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; u < total_units;
       u += stride) {
    float v[kUnitValues];
    DecodeUnitAt<kT>(w, ids[u / units_per_row], row_bytes, u % units_per_row, v);
    float4* dst = reinterpret_cast<float4*>(out + u * kUnitValues);  // 128 B per unit
#pragma unroll
    for (int i = 0; i < 8; ++i)
      dst[i] = make_float4(v[4 * i], v[4 * i + 1], v[4 * i + 2], v[4 * i + 3]);
  }
}

// Plain float types, one element per thread: out[i] for i < total (rows x cols, contiguous).
template <GgmlType kT>
__global__ void __launch_bounds__(kThreads)
    PlainToBf16Kernel(const uint8_t* __restrict__ w, int64_t total, uint16_t* __restrict__ out) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < total;
       i += stride) {
    if constexpr (kT == GgmlType::kBF16) {
      out[i] = static_cast<uint16_t>(HdLoadU16(w + 2 * i));  // exact copy, NaN payloads kept
    } else {
      out[i] = HdFloatToBf16(HdPlainElement<kT>(w, i));
    }
  }
}

template <GgmlType kT>
__global__ void __launch_bounds__(kThreads)
    PlainGetRowsKernel(const uint8_t* __restrict__ w, int64_t cols, int64_t row_bytes,
                       const int32_t* __restrict__ ids, int64_t total, float* __restrict__ out) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < total;
       i += stride) {
    out[i] = HdPlainElement<kT>(w + ids[i / cols] * row_bytes, i % cols);
  }
}

__global__ void __launch_bounds__(kThreads)
    F32ToBf16Kernel(const float* __restrict__ x, int64_t n, uint16_t* __restrict__ out) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += stride) {
    out[i] = HdFloatToBf16(x[i]);
  }
}

// Both launches of one type: out_bf16 != nullptr -> DequantizeRows, else GetRows into out_f32.
struct Job {
  const uint8_t* w;
  int64_t cols;
  int64_t first_row;  // DequantizeRows: r0
  int64_t n_rows;     // rows to produce
  const int32_t* ids;
  uint16_t* out_bf16;
  float* out_f32;
  cudaStream_t stream;
};

template <GgmlType kT>
Status LaunchJob(const Job& j) {
  const int64_t row_bytes = RowBytes(kT, j.cols);
  const uint8_t* w = j.w + j.first_row * row_bytes;
  if constexpr (HdIsPlainFloat(kT)) {
    const int64_t total = j.n_rows * j.cols;
    if (j.out_bf16 != nullptr) {
      MOESPLIT_LAUNCH(GridFor(total), kThreads, 0, j.stream, PlainToBf16Kernel<kT>)
      (w, total, j.out_bf16);
    } else {
      MOESPLIT_LAUNCH(GridFor(total), kThreads, 0, j.stream, PlainGetRowsKernel<kT>)
      (w, j.cols, row_bytes, j.ids, total, j.out_f32);
    }
  } else {
    const int64_t units_per_row = j.cols / kUnitValues;
    const int64_t total = j.n_rows * units_per_row;
    if (j.out_bf16 != nullptr) {
      MOESPLIT_LAUNCH(GridFor(total), kThreads, 0, j.stream, DequantBf16Kernel<kT>)
      (w, row_bytes, units_per_row, total, j.out_bf16);
    } else {
      MOESPLIT_LAUNCH(GridFor(total), kThreads, 0, j.stream, GetRowsKernel<kT>)
      (w, row_bytes, units_per_row, j.ids, total, j.out_f32);
    }
  }
  CUDA_CHECK_LAUNCH();
  return Status::Ok();
}

Status Dispatch(GgmlType type, const Job& j) {
  switch (type) {
#define MOESPLIT_LAUNCH_CASE(T) \
  case GgmlType::T:             \
    return LaunchJob<GgmlType::T>(j);
    MOESPLIT_HD_DECODABLE_TYPES(MOESPLIT_LAUNCH_CASE)
#undef MOESPLIT_LAUNCH_CASE
    default:
      MOESPLIT_CHECK(false, "unreachable: ", TypeName(type));
      return Status::Ok();
  }
}

// The block size the row length must be a multiple of: 1 for the float types (element path).
Status CheckTypeAndCols(const char* fn, GgmlType type, int64_t cols, const void* out) {
  if (!GpuDequantSupports(type)) {
    return InvalidArgumentError(fn, ": weight type ", TypeName(type),
                                " is not supported (", kHdDecodableTypes, " are)");
  }
  const int64_t bv = HdIsPlainFloat(type) ? 1 : HdBlockValues(type);
  if (cols < 1 || cols % bv != 0) {
    return InvalidArgumentError(fn, ": cols = ", cols, " must be a positive multiple of ", bv,
                                " for ", TypeName(type));
  }
  if (!HdIsPlainFloat(type) && reinterpret_cast<uintptr_t>(out) % 16 != 0) {
    return InvalidArgumentError(fn, ": the output must be 16-byte aligned for ", TypeName(type));
  }
  return Status::Ok();
}

}  // namespace

bool GpuDequantSupports(GgmlType type) { return HdCanDecode(type); }

Status CheckDequantizeRowsArgs(GgmlType type, int64_t rows, int64_t cols, int64_t r0, int64_t r1,
                               const void* out) {
  MOESPLIT_RETURN_IF_ERROR(CheckTypeAndCols("DequantizeRowsToBf16", type, cols, out));
  if (r0 < 0 || r0 > r1 || r1 > rows) {
    return InvalidArgumentError("DequantizeRowsToBf16: rows [", r0, ", ", r1,
                                ") must lie within [0, ", rows, ")");
  }
  return Status::Ok();
}

Status CheckGetRowsArgs(GgmlType type, int64_t cols, int64_t n, const void* out) {
  MOESPLIT_RETURN_IF_ERROR(CheckTypeAndCols("GetRows", type, cols, out));
  if (n < 0) return InvalidArgumentError("GetRows: n = ", n, " must be >= 0");
  return Status::Ok();
}

Status DequantizeRowsToBf16(GgmlType type, const void* w, int64_t rows, int64_t cols, int64_t r0,
                            int64_t r1, uint16_t* out, Stream stream) {
  MOESPLIT_RETURN_IF_ERROR(CheckDequantizeRowsArgs(type, rows, cols, r0, r1, out));
  if (r0 == r1) return Status::Ok();
  return Dispatch(
      type, Job{static_cast<const uint8_t*>(w), cols, r0, r1 - r0, nullptr, out, nullptr, stream});
}

Status GetRows(GgmlType type, const void* w, int64_t cols, const int32_t* ids, int64_t n,
               float* out, Stream stream) {
  MOESPLIT_RETURN_IF_ERROR(CheckGetRowsArgs(type, cols, n, out));
  if (n == 0) return Status::Ok();
  return Dispatch(type, Job{static_cast<const uint8_t*>(w), cols, 0, n, ids, nullptr, out, stream});
}

Status ConvertF32ToBf16(const float* x, int64_t n, uint16_t* out, Stream stream) {
  if (n < 0) return InvalidArgumentError("ConvertF32ToBf16: n = ", n, " must be >= 0");
  if (n == 0) return Status::Ok();
  MOESPLIT_LAUNCH(GridFor(n), kThreads, 0, stream, F32ToBf16Kernel)(x, n, out);
  CUDA_CHECK_LAUNCH();
  return Status::Ok();
}

}  // namespace moesplit::gpu
