// DenseBackend: the device that runs everything except the routed experts in the hybrid forward
// pass (hybrid_forward.h) — embeddings, norms, MLA attention over the latent cache, router,
// shared experts, dense FFN layers, output head — behind a plain C++ interface, so that the
// split itself (what runs where, what crosses the bus, the order of CPU and device work) is the
// same code whatever executes the ops:
//
//   CudaBackend (cuda_backend.h)  the GPU: two CUDA streams, pinned staging, host functions;
//   HostBackend (tests only)      the same ops with the CPU reference arithmetic on host memory,
//                                 executed at once — the hybrid pass's tests run it everywhere.
//
// Memory: AllocDevice / AllocHost return memory the backend owns until it is destroyed (no frees:
// a session sizes everything once at load). "Device" pointers are only ever handed back to the
// backend; "host" staging memory is read and written by the CPU between ops (pinned for CUDA, so
// that copies are asynchronous DMA).
//
// Work is queued on two in-order lanes: kMain (the layer chain) and kSide (the shared expert,
// overlapping the routed experts that run on the CPU while kMain waits in a HostCall). Nothing
// is finished before Synchronize() returns, which also reports any asynchronous failure.
// Every op checks its arguments before queueing anything: InvalidArgument naming the value.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>

#include "core/base/dtype.h"
#include "core/base/status.h"
#include "cpu_kernels/ops/ops.h"
#include "moe/routing.h"

namespace moesplit::engine {

enum class Lane { kMain, kSide };

// A weight matrix in device memory: `rows` GGUF rows of `cols` values of `type`, each
// RowBytes(type, cols) bytes, back to back (the file's layout: never a CPU repacked layout).
struct DevMatrix {
  GgmlType type = GgmlType::kF32;
  const void* data = nullptr;
  int64_t rows = 0;
  int64_t cols = 0;
};

// The latent cache of one MLA layer: n_ctx rows of [c (L), k_pe (R)] f16 values.
struct DevLatentCache {
  void* data = nullptr;
  int64_t n_ctx = 0;
  int64_t width = 0;  // L + R (576 for DeepSeek V2 / V3)
};

struct DevMlaParams {
  int64_t n_tok = 0;   // query tokens
  int64_t n_head = 0;  // H
  int64_t latent = 0;  // L (the width of c and of the output rows)
  int64_t rope = 0;    // R
  int64_t pos0 = 0;    // position of query token 0; token t sees positions 0 .. pos0 + t
  float scale = 0.0f;  // kq_scale
};

class DenseBackend {
 public:
  virtual ~DenseBackend() = default;

  // "CUDA device 0: NVIDIA H100 80GB HBM3 (sm_90, 79.1 GiB free)" / "host emulation".
  virtual std::string Name() const = 0;

  // ---- memory (owned by the backend) ----
  // `bytes` of device memory, 256-byte aligned. ResourceExhausted names `what`, the size and
  // what is free.
  virtual StatusOr<void*> AllocDevice(size_t bytes, const std::string& what) = 0;
  // Host staging memory (pinned for CUDA), 64-byte aligned.
  virtual StatusOr<void*> AllocHost(size_t bytes, const std::string& what) = 0;
  // Device memory still free (after this backend's allocations): the placement's budget.
  virtual uint64_t DeviceBytesFree() const = 0;
  // Synchronous host -> device copy (weights at load; src is any host memory, e.g. the mmap).
  virtual Status Upload(void* dst, const void* src, size_t bytes) = 0;
  // Whether the ops take a weight matrix `name` of `type` with rows of `cols` values:
  // InvalidArgument naming the tensor, its type and what to do otherwise. HybridForward::Create
  // asks for every matrix before it uploads any (a file with, say, Q3_K attention must fail in a
  // second, not after minutes of uploads in the first forward pass).
  virtual Status CheckWeight(const std::string& name, GgmlType type, int64_t cols) const {
    (void)name, (void)type, (void)cols;
    return Status::Ok();
  }

  // ---- ordering ----
  // Copies between host staging memory and device memory, in lane order.
  virtual Status CopyToHost(Lane lane, void* host, const void* dev, size_t bytes) = 0;
  virtual Status CopyFromHost(Lane lane, void* dev, const void* host, size_t bytes) = 0;
  // fn() runs on a host thread once everything queued on `lane` before it has finished; work
  // queued on `lane` after it waits for fn to return. fn must not call the backend. The backend
  // keeps fn until Synchronize().
  virtual Status HostCall(Lane lane, std::function<void()> fn) = 0;
  // Work queued on kSide from now on waits for everything queued on kMain so far (a fork).
  virtual Status SideWaitsForMain() = 0;
  // Work queued on kMain from now on waits for everything queued on kSide so far (a join).
  virtual Status MainWaitsForSide() = 0;
  // Waits for both lanes; returns the first asynchronous failure (a kernel fault, a failed
  // copy) with the device's message.
  virtual Status Synchronize() = 0;

  // ---- ops; all pointers are device memory, activations f32 row-major ----
  // y[T x w.rows] = x[T x w.cols] W^T (any T >= 1: GEMV for a few tokens, GEMM for more).
  virtual Status MatMul(Lane lane, const DevMatrix& w, const float* x, int64_t n_tok, float* y) = 0;
  // Per-head products: for h < n_head and t < n_tok,
  //   y[t*y_tok + h*y_head + r] = sum_c W_h[r][c] x[t*x_tok + h*x_head + c]   (r < w.rows)
  // where W_h (w.rows x w.cols) starts h * w.rows rows after w.data (a [cols, rows, H] tensor).
  // Strides are in floats. MLA's query absorption (W_kb) and value map (W_vb).
  virtual Status HeadMatMul(Lane lane, const DevMatrix& w, int64_t n_head, const float* x,
                            int64_t x_tok, int64_t x_head, int64_t n_tok, float* y, int64_t y_tok,
                            int64_t y_head) = 0;
  // y[i x table.cols] = row ids[i] of table, as f32 (ids: [n] int32, device memory).
  virtual Status GetRows(Lane lane, const DevMatrix& table, const int32_t* ids, int64_t n,
                         float* y) = 0;
  // Row r: y[r*y_stride + i] = x[r*x_stride + i] / sqrt(mean(x_r[0..n)^2) + eps) * w[i], i < n
  // (y may be x). w: [n] f32.
  virtual Status RmsNorm(Lane lane, const float* x, int64_t x_stride, const float* w, int64_t rows,
                         int64_t n, float eps, float* y, int64_t y_stride) = 0;
  // gate[i] = silu(gate[i]) * up[i], i < n.
  virtual Status SwiGlu(Lane lane, float* gate, const float* up, int64_t n) = 0;
  // y[i] += x[i], i < n.
  virtual Status Add(Lane lane, const float* x, float* y, int64_t n) = 0;
  // RoPE in place on x [n_tok x n_head x head_dim] (the first p.n_dims values of each head) at
  // positions pos[t] (pos: [n_tok] int32, device memory); see gpu::Rope for the offset trick.
  virtual Status Rope(Lane lane, const ops::RopeParams& p, const int32_t* pos, int64_t n_tok,
                      int64_t n_head, int64_t head_dim, float* x) = 0;
  // rows x width_bytes, row r from src + r*src_pitch to dst + r*dst_pitch (device to device).
  virtual Status Copy2D(Lane lane, void* dst, size_t dst_pitch, const void* src, size_t src_pitch,
                        size_t width_bytes, size_t rows) = 0;
  // Cache rows pos0 .. pos0 + n_tok - 1 = rows [n_tok x cache.width] f32, rounded to f16.
  virtual Status AppendLatent(Lane lane, const float* rows, int64_t n_tok, int64_t pos0,
                              const DevLatentCache& cache) = 0;
  // MLA attention in the absorbed form (forward_mla.cc): q [n_tok x H x (L+R)] (absorbed
  // latent query, then roped q_pe), out [n_tok x H x L] (the latent output, before W_vb).
  virtual Status MlaAttention(Lane lane, const DevMlaParams& p, const float* q,
                              const DevLatentCache& cache, float* out) = 0;
  // moe::Route on the device: logits [n_tok x E], bias [E] or nullptr, ids / weights
  // [n_tok x k].
  virtual Status Route(Lane lane, const moe::RouterConfig& config, const float* logits,
                       const float* bias, int64_t n_tok, int32_t* ids, float* weights) = 0;

  // ---- routed experts in device memory (a backend without them: Unimplemented) ----
  // Products of n_pairs (token, expert) pairs: for p < n_pairs,
  //   y[p*w.rows + r] = sum_c W_{ids[p]}[r][c] x[(p / x_div)*w.cols + c]
  // where W_e (w.rows x w.cols) starts e * w.rows rows after w.data (a [cols, rows, n_expert]
  // tensor) and ids[p] < n_expert (ids: [n_pairs] int32, device memory). x_div = k reads one
  // hidden row per token for its k pairs (gate / up); x_div = 1 one row per pair (down).
  virtual Status ExpertMatMul(Lane lane, const DevMatrix& w, int64_t n_expert, const int32_t* ids,
                              int64_t n_pairs, const float* x, int64_t x_div, float* y) {
    (void)lane, (void)w, (void)n_expert, (void)ids, (void)n_pairs, (void)x, (void)x_div, (void)y;
    return UnimplementedError(Name(), ": routed experts in device memory are not supported");
  }
  // out[t*n + i] = sum_j weights[t*k + j] * y[(t*k + j)*n + i]   (t < n_tok, j < k, i < n)
  virtual Status WeightedSum(Lane lane, const float* y, const float* weights, int64_t n_tok,
                             int64_t k, int64_t n, float* out) {
    (void)lane, (void)y, (void)weights, (void)n_tok, (void)k, (void)n, (void)out;
    return UnimplementedError(Name(), ": routed experts in device memory are not supported");
  }
};

}  // namespace moesplit::engine
