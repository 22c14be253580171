// CudaBackend (cuda_backend.h): each op is a gpu_kernels launch on its lane's stream. This file
// adds what the kernels leave to their callers: the lane, null-pointer and layout checks, the
// choice GEMV (<= 8 tokens) / GEMM, HeadMatMul's chunks of 8 tokens, the MLA workspace, and the
// lifetime rules of memory, host functions and events.
//
// CUDA calls in Status-returning methods use CUDA_RETURN_IF_ERROR: an earlier kernel fault
// surfaces at the next call as a sticky error, and the interface reports it as a Status instead of
// aborting. The kernel launchers of gpu_kernels abort on launch failures (CUDA_CHECK_LAUNCH).
#include "core/engine/cuda_backend.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <iomanip>
#include <sstream>
#include <utility>

#include "gpu_kernels/cuda_check.h"
#include "gpu_kernels/quant_blocks_hd.h"
#include "gpu_kernels/dequant.h"
#include "gpu_kernels/mla_attention.h"
#include "gpu_kernels/mla_hd.h"
#include "gpu_kernels/ops.h"
#include "gpu_kernels/qgemv.h"
#include "gpu_kernels/router.h"

namespace moesplit::engine {
namespace {

// HeadMatMul's token count limit: t0 * x_tok (strides <= gpu::kQGemvMaxStride = 2^40 floats)
// stays far below 2^63.
constexpr int64_t kMaxHeadTokens = int64_t{1} << 22;

// "12.5" (bytes in MiB, one decimal).
std::string MiB(uint64_t bytes) {
  std::ostringstream os;
  os << std::fixed << std::setprecision(1) << static_cast<double>(bytes) / (1024.0 * 1024.0);
  return os.str();
}

// cudaLaunchHostFunc's callback, on a CUDA runtime thread: one element of host_fns_.
void CUDART_CB RunHostFn(void* fn) { (*static_cast<std::function<void()>*>(fn))(); }

Status NullError(const char* op, const char* what) {
  return InvalidArgumentError("CudaBackend::", op, ": ", what, " is null");
}

// The CUDA MLA kernels are compiled for DeepSeek's [c 512 | k_pe 64] rows.
Status CheckLatentWidth(const char* op, const DevLatentCache& cache) {
  if (cache.width != gpu::kMlaRowDim) {
    return UnimplementedError("CudaBackend::", op, ": latent cache width ", cache.width,
                              ": the CUDA MLA kernels are built for DeepSeek's latent width 512 + "
                              "rope 64 = ",
                              gpu::kMlaRowDim);
  }
  if (cache.data == nullptr) return NullError(op, "cache.data");
  return Status::Ok();
}

StatusOr<gpu::RouterConfig> ToGpuRouter(const moe::RouterConfig& c) {
  gpu::RouterConfig g;
  g.n_expert = c.n_expert;
  g.n_expert_used = c.n_expert_used;
  g.n_group = c.n_group;
  g.n_group_used = c.n_group_used;
  switch (c.gating) {
    case moe::Gating::kSoftmax:
      g.gating = gpu::RouterGating::kSoftmax;
      break;
    case moe::Gating::kSigmoid:
      g.gating = gpu::RouterGating::kSigmoid;
      break;
    default:
      return InvalidArgumentError("CudaBackend::Route: unknown gating ",
                                  static_cast<int>(c.gating));
  }
  g.norm_weights = c.norm_weights;
  g.weights_scale = c.weights_scale;
  return g;
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// Creation, destruction, device binding
// ---------------------------------------------------------------------------------------------

StatusOr<std::unique_ptr<CudaBackend>> CudaBackend::Create(int device_index) {
  int count = 0;
  const cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess || count == 0) {
    (void)cudaGetLastError();  // no driver / no device: not sticky, clear it for later calls
    return FailedPreconditionError(
        "no CUDA device visible (",
        err != cudaSuccess ? cudaGetErrorString(err) : "the driver reports 0 devices", ")");
  }
  if (device_index < 0 || device_index >= count) {
    return InvalidArgumentError("CUDA device ", device_index, " does not exist: ", count,
                                " device(s) visible, 0 .. ", count - 1);
  }
  // Blocking sync: a host thread waiting for the device (cudaStreamSynchronize in Synchronize)
  // sleeps on an OS primitive instead of spinning on a core. While kMain waits in a HostCall the
  // routed experts run on the CPU thread pool, and a spinning waiter would take one of its cores.
  // The flags belong to the device's primary context and apply from its creation on, so they are
  // set before Init makes any stream or event. cudaSetDeviceFlags acts on the calling thread's
  // current device, hence cudaSetDevice first; since CUDA 12 that call already initialises the
  // primary context, and cudaSetDeviceFlags then overwrites the flags it was made with (as the
  // CUDA 12 / 13 runtime documents). An older runtime, or one whose context is already active
  // (another library, an earlier backend), may refuse with cudaErrorSetOnActiveProcess: the
  // context then keeps its flags, waits may spin (slower CPU experts, never wrong results), and
  // creation goes on. That error is not sticky; cudaGetLastError clears it for later calls.
  CUDA_RETURN_IF_ERROR(cudaSetDevice(device_index));
  const cudaError_t flags_err = cudaSetDeviceFlags(cudaDeviceScheduleBlockingSync);
  if (flags_err == cudaErrorSetOnActiveProcess) {
    (void)cudaGetLastError();
  } else {
    CUDA_RETURN_IF_ERROR(flags_err);
  }
  std::unique_ptr<CudaBackend> b(new CudaBackend(device_index));
  MOESPLIT_RETURN_IF_ERROR(b->Init());  // on failure ~CudaBackend frees what Init made
  return b;
}

Status CudaBackend::Init() {
  CUDA_RETURN_IF_ERROR(cudaSetDevice(device_));
  cudaDeviceProp prop{};
  CUDA_RETURN_IF_ERROR(cudaGetDeviceProperties(&prop, device_));
  device_name_ = prop.name;
  cc_major_ = prop.major;
  cc_minor_ = prop.minor;
  for (LaneState& l : lanes_) {
    // Non-blocking: the lanes never wait for (nor hold up) the legacy default stream.
    CUDA_RETURN_IF_ERROR(cudaStreamCreateWithFlags(&l.stream, cudaStreamNonBlocking));
    MOESPLIT_ASSIGN_OR_RETURN(l.gemm, gpu::GemmContext::Create(l.stream));
  }
  CUDA_RETURN_IF_ERROR(cudaEventCreateWithFlags(&fork_event_, cudaEventDisableTiming));
  CUDA_RETURN_IF_ERROR(cudaEventCreateWithFlags(&join_event_, cudaEventDisableTiming));
  return Status::Ok();
}

CudaBackend::~CudaBackend() {
  // Queued work may still read the buffers and call host_fns_: both streams finish first.
  // Errors are ignored (see the header); a partly initialised backend has null members.
  (void)Bind();
  for (LaneState& l : lanes_) {
    if (l.stream != nullptr) (void)cudaStreamSynchronize(l.stream);
  }
  for (LaneState& l : lanes_) {
    l.gemm.reset();  // its cuBLAS handle and scratch, before the stream it is bound to
    if (l.stream != nullptr) (void)cudaStreamDestroy(l.stream);
  }
  if (fork_event_ != nullptr) (void)cudaEventDestroy(fork_event_);
  if (join_event_ != nullptr) (void)cudaEventDestroy(join_event_);
  for (void* p : device_allocs_) (void)cudaFree(p);
  for (void* p : host_allocs_) (void)cudaFreeHost(p);
  (void)cudaGetLastError();
}

Status CudaBackend::Bind() const {
  int current = -1;
  CUDA_RETURN_IF_ERROR(cudaGetDevice(&current));
  if (current != device_) CUDA_RETURN_IF_ERROR(cudaSetDevice(device_));
  return Status::Ok();
}

StatusOr<CudaBackend::LaneState*> CudaBackend::Begin(const char* op, Lane lane) {
  if (lane != Lane::kMain && lane != Lane::kSide) {
    return InvalidArgumentError("CudaBackend::", op, ": lane ", static_cast<int>(lane),
                                " is neither kMain nor kSide");
  }
  MOESPLIT_RETURN_IF_ERROR(Bind());
  return &lanes_[lane == Lane::kMain ? 0 : 1];
}

std::string CudaBackend::Name() const {
  return StrCat("CUDA device ", device_, ": ", device_name_, " (sm_", cc_major_, cc_minor_, ", ",
                MiB(DeviceBytesFree()), " MiB free)");
}

// ---------------------------------------------------------------------------------------------
// Memory
// ---------------------------------------------------------------------------------------------

StatusOr<void*> CudaBackend::DeviceAlloc(size_t bytes, const std::string& what) {
  MOESPLIT_RETURN_IF_ERROR(Bind());
  void* p = nullptr;
  // cudaMalloc(0) returns null: one byte keeps every allocation a distinct, valid pointer.
  const cudaError_t err = cudaMalloc(&p, std::max<size_t>(bytes, 1));
  if (err != cudaSuccess) {
    (void)cudaGetLastError();
    size_t free_b = 0, total_b = 0;
    if (cudaMemGetInfo(&free_b, &total_b) != cudaSuccess) (void)cudaGetLastError();
    if (err == cudaErrorMemoryAllocation) {
      return ResourceExhaustedError("CUDA device ", device_, ": out of memory for ", what, ": ",
                                    MiB(bytes), " MiB asked, ", MiB(free_b), " MiB free of ",
                                    MiB(total_b), " MiB");
    }
    return FailedPreconditionError("CUDA device ", device_, ": cudaMalloc of ", MiB(bytes),
                                   " MiB for ", what, " failed: ", cudaGetErrorString(err));
  }
  device_allocs_.push_back(p);
  return p;
}

StatusOr<void*> CudaBackend::AllocDevice(size_t bytes, const std::string& what) {
  return DeviceAlloc(bytes, what);
}

StatusOr<void*> CudaBackend::AllocHost(size_t bytes, const std::string& what) {
  MOESPLIT_RETURN_IF_ERROR(Bind());
  void* p = nullptr;
  const cudaError_t err = cudaHostAlloc(&p, std::max<size_t>(bytes, 1), cudaHostAllocDefault);
  if (err != cudaSuccess) {
    (void)cudaGetLastError();
    return ResourceExhaustedError("cannot pin ", MiB(bytes), " MiB of host memory for ", what,
                                  ": cudaHostAlloc: ", cudaGetErrorString(err));
  }
  host_allocs_.push_back(p);
  // Pinned allocations are page-aligned; the interface promises 64 bytes.
  MOESPLIT_CHECK(reinterpret_cast<uintptr_t>(p) % 64 == 0, "cudaHostAlloc returned ", p);
  return p;
}

uint64_t CudaBackend::DeviceBytesFree() const {
  size_t free_b = 0, total_b = 0;
  if (!Bind().ok() || cudaMemGetInfo(&free_b, &total_b) != cudaSuccess) {
    (void)cudaGetLastError();
    return 0;
  }
  return free_b;
}

// MatMul runs QuantGemv (up to 8 tokens) and QuantGemm (more), ExpertMatMul QuantGemvIds,
// HeadMatMul QuantGemvBatched, GetRows the dequantizer: all take the same types, and GEMV's
// rules (cols a multiple of the block, 32 for the float types) are the strictest.
bool CudaBackend::HasKernel(GgmlType type) {
  return gpu::QuantGemvSupports(type) && gpu::GpuDequantSupports(type);
}

Status CudaBackend::CheckWeight(const std::string& name, GgmlType type, int64_t cols) const {
  if (!HasKernel(type)) {
    return InvalidArgumentError(name, ": weight type ", TypeName(type),
                                " has no GPU kernel in this version (", gpu::kHdDecodableTypes,
                                " have); run this file with --device cpu");
  }
  alignas(16) static constexpr float kAligned[4] = {};  // CheckQuantGemvArgs wants an x
  const Status s = gpu::CheckQuantGemvArgs(type, 1, cols, kAligned, 1);
  if (!s.ok()) return InvalidArgumentError(name, ": ", s.message(), "; run it with --device cpu");
  return Status::Ok();
}

Status CudaBackend::Upload(void* dst, const void* src, size_t bytes) {
  if (bytes == 0) return Status::Ok();
  if (dst == nullptr || src == nullptr) return NullError("Upload", dst == nullptr ? "dst" : "src");
  MOESPLIT_RETURN_IF_ERROR(Bind());
  CUDA_RETURN_IF_ERROR(cudaMemcpy(dst, src, bytes, cudaMemcpyHostToDevice));
  // From pageable memory (the mmap) cudaMemcpy may return once the data is staged, before its
  // DMA on the legacy default stream has landed, and the non-blocking lanes do not wait for that
  // stream: wait here, so that work queued after Upload sees the data.
  CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(nullptr));
  return Status::Ok();
}

// ---------------------------------------------------------------------------------------------
// Ordering
// ---------------------------------------------------------------------------------------------

Status CudaBackend::CopyToHost(Lane lane, void* host, const void* dev, size_t bytes) {
  MOESPLIT_ASSIGN_OR_RETURN(LaneState * l, Begin("CopyToHost", lane));
  if (bytes == 0) return Status::Ok();
  if (host == nullptr || dev == nullptr) {
    return NullError("CopyToHost", host == nullptr ? "host" : "dev");
  }
  CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(host, dev, bytes, cudaMemcpyDeviceToHost, l->stream));
  return Status::Ok();
}

Status CudaBackend::CopyFromHost(Lane lane, void* dev, const void* host, size_t bytes) {
  MOESPLIT_ASSIGN_OR_RETURN(LaneState * l, Begin("CopyFromHost", lane));
  if (bytes == 0) return Status::Ok();
  if (host == nullptr || dev == nullptr) {
    return NullError("CopyFromHost", host == nullptr ? "host" : "dev");
  }
  CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(dev, host, bytes, cudaMemcpyHostToDevice, l->stream));
  return Status::Ok();
}

Status CudaBackend::HostCall(Lane lane, std::function<void()> fn) {
  if (!fn) return InvalidArgumentError("CudaBackend::HostCall: empty function");
  MOESPLIT_ASSIGN_OR_RETURN(LaneState * l, Begin("HostCall", lane));
  host_fns_.push_back(std::move(fn));
  const cudaError_t err = cudaLaunchHostFunc(l->stream, RunHostFn, &host_fns_.back());
  if (err != cudaSuccess) {
    host_fns_.pop_back();  // not queued: nothing refers to it
    (void)cudaGetLastError();
    return FailedPreconditionError("CudaBackend::HostCall: cudaLaunchHostFunc failed: ",
                                   cudaGetErrorString(err));
  }
  return Status::Ok();
}

Status CudaBackend::SideWaitsForMain() {
  MOESPLIT_RETURN_IF_ERROR(Bind());
  // The wait captures the event's latest record, so re-recording it later is safe.
  CUDA_RETURN_IF_ERROR(cudaEventRecord(fork_event_, lanes_[0].stream));
  CUDA_RETURN_IF_ERROR(cudaStreamWaitEvent(lanes_[1].stream, fork_event_, 0));
  return Status::Ok();
}

Status CudaBackend::MainWaitsForSide() {
  MOESPLIT_RETURN_IF_ERROR(Bind());
  CUDA_RETURN_IF_ERROR(cudaEventRecord(join_event_, lanes_[1].stream));
  CUDA_RETURN_IF_ERROR(cudaStreamWaitEvent(lanes_[0].stream, join_event_, 0));
  return Status::Ok();
}

Status CudaBackend::Synchronize() {
  MOESPLIT_RETURN_IF_ERROR(Bind());
  const cudaError_t err_main = cudaStreamSynchronize(lanes_[0].stream);
  const cudaError_t err_side = cudaStreamSynchronize(lanes_[1].stream);
  if (err_main == cudaSuccess && err_side == cudaSuccess) {
    host_fns_.clear();  // every queued host function has run
    return Status::Ok();
  }
  // After a fault the host functions may never run; they are kept (freed by the destructor).
  (void)cudaGetLastError();
  const bool on_main = err_main != cudaSuccess;
  const cudaError_t err = on_main ? err_main : err_side;
  return FailedPreconditionError("CUDA device ", device_, ": asynchronous failure on the ",
                                 on_main ? "main" : "side", " lane: ", cudaGetErrorName(err), " (",
                                 cudaGetErrorString(err), ")");
}

// ---------------------------------------------------------------------------------------------
// Ops
// ---------------------------------------------------------------------------------------------

Status CudaBackend::MatMul(Lane lane, const DevMatrix& w, const float* x, int64_t n_tok, float* y) {
  if (n_tok < 1) return InvalidArgumentError("CudaBackend::MatMul: n_tok = ", n_tok, " < 1");
  if (w.data == nullptr) return NullError("MatMul", "w.data");
  if (x == nullptr || y == nullptr) return NullError("MatMul", x == nullptr ? "x" : "y");
  MOESPLIT_ASSIGN_OR_RETURN(LaneState * l, Begin("MatMul", lane));
  // x: [n_tok x w.cols], y: [n_tok x w.rows]. Decode-sized batches read every weight row once
  // (GEMV, f32 products); more tokens go to the tensor cores (BF16 inputs, f32 accumulation).
  if (n_tok <= gpu::kQGemvMaxTokens) {
    return gpu::QuantGemv(w.type, w.data, w.rows, w.cols, x, static_cast<int>(n_tok), y, l->stream);
  }
  if (w.type == GgmlType::kF32) {
    // F32 weights (the router, ffn_gate_inp) stay in f32 as on the CPU: BF16 logits would move
    // routing near-ties. 8-token GEMV chunks re-read the matrix T/8 times (V3: 7.3 MB x 64 for
    // a 512-token chunk, ~0.15 ms at HBM speed). x + t0 * cols stays 16-byte aligned: F32 rows
    // are a multiple of 32 values (CheckQuantGemvArgs).
    for (int64_t t0 = 0; t0 < n_tok; t0 += gpu::kQGemvMaxTokens) {
      const int nt = static_cast<int>(std::min<int64_t>(gpu::kQGemvMaxTokens, n_tok - t0));
      MOESPLIT_RETURN_IF_ERROR(gpu::QuantGemv(w.type, w.data, w.rows, w.cols, x + t0 * w.cols, nt,
                                              y + t0 * w.rows, l->stream));
    }
    return Status::Ok();
  }
  return l->gemm->QuantGemm(w.type, w.data, w.rows, w.cols, x, n_tok, y);
}

Status CudaBackend::HeadMatMul(Lane lane, const DevMatrix& w, int64_t n_head, const float* x,
                               int64_t x_tok, int64_t x_head, int64_t n_tok, float* y,
                               int64_t y_tok, int64_t y_head) {
  if (n_tok < 1 || n_tok > kMaxHeadTokens) {
    return InvalidArgumentError("CudaBackend::HeadMatMul: n_tok = ", n_tok, " must be in [1, ",
                                kMaxHeadTokens, "]");
  }
  if (w.data == nullptr) return NullError("HeadMatMul", "w.data");
  if (x == nullptr || y == nullptr) return NullError("HeadMatMul", x == nullptr ? "x" : "y");
  // Chunks of <= 8 tokens; chunk c is the first chunk's problem (same strides, as many or fewer
  // tokens) moved t0 = 8c token rows on: x + t0 * x_tok stays 16-byte aligned because x_tok is
  // checked to be a multiple of 4 floats whenever the first chunk has more than one token. So
  // checking the first chunk checks them all, before anything is queued. (Output rows of
  // different chunks are not checked for overlap: the lane runs the chunks in order.)
  const int first = static_cast<int>(std::min<int64_t>(n_tok, gpu::kQGemvMaxTokens));
  MOESPLIT_RETURN_IF_ERROR(gpu::CheckQuantGemvBatchedArgs(w.type, w.rows, w.cols, n_head, x, x_tok,
                                                          x_head, first, y_tok, y_head));
  MOESPLIT_ASSIGN_OR_RETURN(LaneState * l, Begin("HeadMatMul", lane));
  for (int64_t t0 = 0; t0 < n_tok; t0 += gpu::kQGemvMaxTokens) {
    const int n = static_cast<int>(std::min<int64_t>(n_tok - t0, gpu::kQGemvMaxTokens));
    MOESPLIT_RETURN_IF_ERROR(gpu::QuantGemvBatched(w.type, w.data, w.rows, w.cols, n_head,
                                                   x + t0 * x_tok, x_tok, x_head, n, y + t0 * y_tok,
                                                   y_tok, y_head, l->stream));
  }
  return Status::Ok();
}

Status CudaBackend::GetRows(Lane lane, const DevMatrix& table, const int32_t* ids, int64_t n,
                            float* y) {
  if (n > 0 && (table.data == nullptr || ids == nullptr || y == nullptr)) {
    return NullError("GetRows", table.data == nullptr ? "table.data"
                                : ids == nullptr      ? "ids"
                                                      : "y");
  }
  MOESPLIT_ASSIGN_OR_RETURN(LaneState * l, Begin("GetRows", lane));
  return gpu::GetRows(table.type, table.data, table.cols, ids, n, y, l->stream);
}

Status CudaBackend::RmsNorm(Lane lane, const float* x, int64_t x_stride, const float* w,
                            int64_t rows, int64_t n, float eps, float* y, int64_t y_stride) {
  // In place, row r must be read and written at the same address: with two strides one row's
  // block would write another row that a different block is still reading.
  if (x == y && x_stride != y_stride) {
    return InvalidArgumentError("CudaBackend::RmsNorm: in place (y == x) with x_stride = ",
                                x_stride, " != y_stride = ", y_stride);
  }
  MOESPLIT_ASSIGN_OR_RETURN(LaneState * l, Begin("RmsNorm", lane));
  return gpu::RmsNormStrided(x, x_stride, w, rows, n, eps, y, y_stride, l->stream);
}

Status CudaBackend::SwiGlu(Lane lane, float* gate, const float* up, int64_t n) {
  MOESPLIT_ASSIGN_OR_RETURN(LaneState * l, Begin("SwiGlu", lane));
  return gpu::SwiGlu(gate, up, 1, n, l->stream);
}

Status CudaBackend::Add(Lane lane, const float* x, float* y, int64_t n) {
  MOESPLIT_ASSIGN_OR_RETURN(LaneState * l, Begin("Add", lane));
  return gpu::Add(x, y, 1, n, l->stream);
}

Status CudaBackend::Rope(Lane lane, const ops::RopeParams& p, const int32_t* pos, int64_t n_tok,
                         int64_t n_head, int64_t head_dim, float* x) {
  MOESPLIT_ASSIGN_OR_RETURN(LaneState * l, Begin("Rope", lane));
  return gpu::Rope(p, pos, n_tok, n_head, head_dim, x, l->stream);
}

Status CudaBackend::Copy2D(Lane lane, void* dst, size_t dst_pitch, const void* src,
                           size_t src_pitch, size_t width_bytes, size_t rows) {
  MOESPLIT_ASSIGN_OR_RETURN(LaneState * l, Begin("Copy2D", lane));
  if (rows == 0 || width_bytes == 0) return Status::Ok();
  if (width_bytes > dst_pitch || width_bytes > src_pitch) {
    return InvalidArgumentError("CudaBackend::Copy2D: width ", width_bytes,
                                " bytes exceeds a pitch (dst ", dst_pitch, ", src ", src_pitch,
                                ")");
  }
  if (dst == nullptr || src == nullptr) return NullError("Copy2D", dst == nullptr ? "dst" : "src");
  CUDA_RETURN_IF_ERROR(cudaMemcpy2DAsync(dst, dst_pitch, src, src_pitch, width_bytes, rows,
                                         cudaMemcpyDeviceToDevice, l->stream));
  return Status::Ok();
}

Status CudaBackend::AppendLatent(Lane lane, const float* rows, int64_t n_tok, int64_t pos0,
                                 const DevLatentCache& cache) {
  MOESPLIT_RETURN_IF_ERROR(CheckLatentWidth("AppendLatent", cache));
  MOESPLIT_ASSIGN_OR_RETURN(LaneState * l, Begin("AppendLatent", lane));
  // rows [n_tok x 576] f32 -> cache rows pos0 .. pos0 + n_tok - 1 of [n_ctx x 576] f16.
  return gpu::AppendLatent(rows, n_tok, pos0, cache.data, gpu::LatentCacheType::kF16, cache.n_ctx,
                           l->stream);
}

Status CudaBackend::ReserveMlaWorkspace(LaneState& l, size_t bytes) {
  if (bytes <= l.mla_workspace_bytes) return Status::Ok();
  // At least doubling: O(log) growths, and the kept old ones add up to less than the new one.
  const size_t grown = std::max(bytes, 2 * l.mla_workspace_bytes);
  MOESPLIT_ASSIGN_OR_RETURN(void* p, DeviceAlloc(grown, "the MLA attention workspace"));
  l.mla_workspace = p;  // the outgrown one stays in device_allocs_ until the destructor
  l.mla_workspace_bytes = grown;
  return Status::Ok();
}

Status CudaBackend::MlaAttention(Lane lane, const DevMlaParams& p, const float* q,
                                 const DevLatentCache& cache, float* out) {
  if (p.latent != gpu::kMlaLatentDim || p.rope != gpu::kMlaRopeDim) {
    return UnimplementedError("CudaBackend::MlaAttention: latent ", p.latent, " + rope ", p.rope,
                              ": the CUDA MLA kernels are built for DeepSeek's latent width 512 "
                              "+ rope 64");
  }
  MOESPLIT_RETURN_IF_ERROR(CheckLatentWidth("MlaAttention", cache));
  if (p.n_tok < 1 || p.pos0 < 0 || p.pos0 + p.n_tok > cache.n_ctx) {
    return InvalidArgumentError("CudaBackend::MlaAttention: pos0 = ", p.pos0, ", n_tok = ", p.n_tok,
                                ": positions pos0 .. pos0 + n_tok - 1 must lie in the cache's ",
                                cache.n_ctx, " rows");
  }
  if (q == nullptr || out == nullptr) return NullError("MlaAttention", q == nullptr ? "q" : "out");
  // q [n_tok x n_head x 576], out [n_tok x n_head x 512]; token t attends to cache rows
  // 0 .. pos0 + t, so the kernel sees the first pos0 + n_tok rows.
  gpu::MlaAttentionParams g;
  g.n_tok = p.n_tok;
  g.n_head = p.n_head;
  g.n_kv = p.pos0 + p.n_tok;
  g.pos0 = p.pos0;
  g.scale = p.scale;
  g.cache_type = gpu::LatentCacheType::kF16;
  MOESPLIT_ASSIGN_OR_RETURN(const size_t need, gpu::MlaAttentionWorkspaceBytes(g));
  MOESPLIT_ASSIGN_OR_RETURN(LaneState * l, Begin("MlaAttention", lane));
  if (need > l->mla_workspace_bytes) {
    // Also enough for the longest context this cache holds at this shape, usually the most the
    // shape ever needs: decode then allocates once, not at every growth of the split plan.
    gpu::MlaAttentionParams longest = g;
    longest.pos0 = cache.n_ctx - p.n_tok;
    longest.n_kv = cache.n_ctx;
    MOESPLIT_ASSIGN_OR_RETURN(const size_t need_longest, gpu::MlaAttentionWorkspaceBytes(longest));
    MOESPLIT_RETURN_IF_ERROR(ReserveMlaWorkspace(*l, std::max(need, need_longest)));
  }
  return gpu::MlaAttention(g, q, cache.data, out, l->mla_workspace, l->mla_workspace_bytes,
                           l->stream);
}

Status CudaBackend::Route(Lane lane, const moe::RouterConfig& config, const float* logits,
                          const float* bias, int64_t n_tok, int32_t* ids, float* weights) {
  MOESPLIT_ASSIGN_OR_RETURN(const gpu::RouterConfig g, ToGpuRouter(config));
  MOESPLIT_ASSIGN_OR_RETURN(LaneState * l, Begin("Route", lane));
  // logits [n_tok x E], bias [E] or null, ids / weights [n_tok x k].
  return gpu::Route(g, logits, bias, n_tok, ids, weights, l->stream);
}

// ---------------------------------------------------------------------------------------------
// Routed experts in device memory
// ---------------------------------------------------------------------------------------------

Status CudaBackend::ExpertMatMul(Lane lane, const DevMatrix& w, int64_t n_expert,
                                 const int32_t* ids, int64_t n_pairs, const float* x, int64_t x_div,
                                 float* y) {
  MOESPLIT_RETURN_IF_ERROR(
      gpu::CheckQuantGemvIdsArgs(w.type, w.rows, w.cols, n_expert, ids, n_pairs, x, x_div));
  if (n_pairs > 0) {
    if (w.data == nullptr) return NullError("ExpertMatMul", "w.data");
    if (x == nullptr || y == nullptr) return NullError("ExpertMatMul", x == nullptr ? "x" : "y");
  }
  MOESPLIT_ASSIGN_OR_RETURN(LaneState * l, Begin("ExpertMatMul", lane));
  // w: [n_expert x w.rows] rows of RowBytes(w.type, w.cols); x: [ceil(n_pairs / x_div) x w.cols];
  // y: [n_pairs x w.rows]. Each pair reads its expert's whole matrix (see gpu::QuantGemvIds: a
  // grouped GEMM would read each chosen expert once per call instead of once per pair).
  return gpu::QuantGemvIds(w.type, w.data, w.rows, w.cols, n_expert, ids, n_pairs, x, x_div, y,
                           l->stream);
}

Status CudaBackend::WeightedSum(Lane lane, const float* y, const float* weights, int64_t n_tok,
                                int64_t k, int64_t n, float* out) {
  MOESPLIT_ASSIGN_OR_RETURN(LaneState * l, Begin("WeightedSum", lane));
  // y: [n_tok*k x n], weights: [n_tok x k], out: [n_tok x n].
  return gpu::WeightedSum(y, weights, n_tok, k, n, out, l->stream);
}

}  // namespace moesplit::engine
