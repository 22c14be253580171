// CudaBackend: the DenseBackend (dense_backend.h) of one CUDA device.
//
//   lanes    kMain and kSide are two non-blocking CUDA streams (they never wait for the legacy
//            default stream), each with its own cuBLAS GemmContext (prefill products) and MLA
//            workspace, so the two lanes share no scratch memory;
//   ordering SideWaitsForMain / MainWaitsForSide record an event on one stream and make the
//            other wait for it; HostCall is cudaLaunchHostFunc on a std::function the backend
//            keeps (stable address) until Synchronize has seen both streams finish;
//   memory   AllocDevice (cudaMalloc, 256-byte aligned) and AllocHost (cudaHostAlloc, pinned)
//            are freed only by the destructor, after both streams have finished;
//   waiting  the device is set to cudaDeviceScheduleBlockingSync: a host thread waiting for it
//            (Synchronize) sleeps instead of spinning on a core that the CPU experts need.
//
// Every public method first makes `device_index` the calling thread's current device (only when
// it is not already), so the backend may be driven from any host thread, one at a time.
//
//   MOESPLIT_ASSIGN_OR_RETURN(auto gpu, engine::CudaBackend::Create(0));
//
// Plain C++ header (no CUDA includes); the implementation is built only with CUDA
// (moesplit_cuda_backend, MOESPLIT_HAVE_CUDA).
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/engine/dense_backend.h"
#include "gpu_kernels/device_buffer.h"  // gpu::Stream
#include "gpu_kernels/gemm.h"           // gpu::GemmContext

struct CUevent_st;  // the CUDA runtime's event object (cudaEvent_t is CUevent_st*)

namespace moesplit::engine {

class CudaBackend final : public DenseBackend {
 public:
  // Errors: FailedPrecondition "no CUDA device visible (...)" when the runtime finds no device
  // or no usable driver; InvalidArgument when device_index is not one of the visible devices;
  // FailedPrecondition with CUDA's / cuBLAS's message when a stream, event or handle cannot be
  // made.
  static StatusOr<std::unique_ptr<CudaBackend>> Create(int device_index);
  // Waits for both lanes, then frees everything (errors are ignored here: a device fault is
  // Synchronize's to report, and destruction must not abort).
  ~CudaBackend() override;
  CudaBackend(const CudaBackend&) = delete;
  CudaBackend& operator=(const CudaBackend&) = delete;

  std::string Name() const override;

  StatusOr<void*> AllocDevice(size_t bytes, const std::string& what) override;
  StatusOr<void*> AllocHost(size_t bytes, const std::string& what) override;
  uint64_t DeviceBytesFree() const override;
  Status Upload(void* dst, const void* src, size_t bytes) override;
  Status CheckWeight(const std::string& name, GgmlType type, int64_t cols) const override;
  // Whether the GPU kernels take weights of `type` (every op: QuantGemv, QuantGemm, the
  // dequantizer); apps' HybridBlocker asks it before any backend exists.
  static bool HasKernel(GgmlType type);

  Status CopyToHost(Lane lane, void* host, const void* dev, size_t bytes) override;
  Status CopyFromHost(Lane lane, void* dev, const void* host, size_t bytes) override;
  Status HostCall(Lane lane, std::function<void()> fn) override;
  Status SideWaitsForMain() override;
  Status MainWaitsForSide() override;
  Status Synchronize() override;

  Status MatMul(Lane lane, const DevMatrix& w, const float* x, int64_t n_tok, float* y) override;
  Status HeadMatMul(Lane lane, const DevMatrix& w, int64_t n_head, const float* x, int64_t x_tok,
                    int64_t x_head, int64_t n_tok, float* y, int64_t y_tok,
                    int64_t y_head) override;
  Status GetRows(Lane lane, const DevMatrix& table, const int32_t* ids, int64_t n,
                 float* y) override;
  Status RmsNorm(Lane lane, const float* x, int64_t x_stride, const float* w, int64_t rows,
                 int64_t n, float eps, float* y, int64_t y_stride) override;
  Status SwiGlu(Lane lane, float* gate, const float* up, int64_t n) override;
  Status Add(Lane lane, const float* x, float* y, int64_t n) override;
  Status Rope(Lane lane, const ops::RopeParams& p, const int32_t* pos, int64_t n_tok,
              int64_t n_head, int64_t head_dim, float* x) override;
  Status Copy2D(Lane lane, void* dst, size_t dst_pitch, const void* src, size_t src_pitch,
                size_t width_bytes, size_t rows) override;
  Status AppendLatent(Lane lane, const float* rows, int64_t n_tok, int64_t pos0,
                      const DevLatentCache& cache) override;
  Status MlaAttention(Lane lane, const DevMlaParams& p, const float* q, const DevLatentCache& cache,
                      float* out) override;
  Status Route(Lane lane, const moe::RouterConfig& config, const float* logits, const float* bias,
               int64_t n_tok, int32_t* ids, float* weights) override;
  // gpu::QuantGemvIds (one GEMV per pair, the expert chosen on the device from ids): its type and
  // shape rules (w.cols a multiple of the block size, x 16-byte aligned), and an id outside
  // [0, n_expert) gives that pair's y row NaN instead of a fault.
  Status ExpertMatMul(Lane lane, const DevMatrix& w, int64_t n_expert, const int32_t* ids,
                      int64_t n_pairs, const float* x, int64_t x_div, float* y) override;
  // gpu::WeightedSum (f32, j order; out must not overlap y or weights).
  Status WeightedSum(Lane lane, const float* y, const float* weights, int64_t n_tok, int64_t k,
                     int64_t n, float* out) override;

 private:
  struct LaneState {
    gpu::Stream stream = nullptr;
    std::unique_ptr<gpu::GemmContext> gemm;  // bound to `stream`
    // MLA split-K partials, >= the largest MlaAttentionWorkspaceBytes seen on this lane. An
    // outgrown workspace is never freed before the destructor (queued work may still use it; a
    // free would also wait for the device, which can deadlock behind a HostCall).
    void* mla_workspace = nullptr;
    size_t mla_workspace_bytes = 0;
  };

  explicit CudaBackend(int device) : device_(device) {}
  // Streams, GemmContexts, events and the device's name (Create's second half).
  Status Init();
  // Makes device_ current on the calling thread (a no-op when it is).
  Status Bind() const;
  // Bind(), then the state of `lane` (InvalidArgument for a value outside the enum).
  StatusOr<LaneState*> Begin(const char* op, Lane lane);
  // cudaMalloc'd memory kept until the destructor; ResourceExhausted names `what`.
  StatusOr<void*> DeviceAlloc(size_t bytes, const std::string& what);
  // Grows `l`'s MLA workspace to at least `bytes` (see LaneState).
  Status ReserveMlaWorkspace(LaneState& l, size_t bytes);

  int device_;
  std::string device_name_;  // "NVIDIA H100 80GB HBM3"
  int cc_major_ = 0;
  int cc_minor_ = 0;
  LaneState lanes_[2];                // [0] kMain, [1] kSide
  CUevent_st* fork_event_ = nullptr;  // recorded on main, waited for by side
  CUevent_st* join_event_ = nullptr;  // recorded on side, waited for by main
  std::vector<void*> device_allocs_;  // cudaMalloc'd: AllocDevice and the MLA workspaces
  std::vector<void*> host_allocs_;    // cudaHostAlloc'd
  // HostCall's functions: a deque keeps every element's address while more are pushed, and
  // cudaLaunchHostFunc holds that address until the function has run.
  std::deque<std::function<void()>> host_fns_;
};

}  // namespace moesplit::engine
