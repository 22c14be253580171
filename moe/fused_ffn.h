// The fused SwiGLU FFN driver behind ExpertEngine: any number of FFNs ("jobs": routed experts,
// the shared expert, a dense FFN), each applied to its own subset of the token rows and summed
// into one output with per-token weights:
//
//   out[t] = sum over jobs j, slots i with tokens_j[i] == t of
//            weights_j[i] * W_down_j (silu(W_gate_j x[t]) * (W_up_j x[t]))
//
// Prefill (more than 8 tokens) runs in exactly two ParallelFor phases (one barrier between them):
//   1. gate/up: tasks = (job, block of F rows). A task computes gate and up for its rows and
//      all the job's tokens (token chunks gathered from x quantized once per activation type),
//      applies SiLU(gate) * up, and quantizes its own slice of every token's intermediate row
//      for the down projection: row blocks are multiples of the down activation's block
//      (32 for Q8_0, 256 for Q8_K), whose blocks are quantized independently.
//   2. down + combine: tasks = blocks [d0, d1) of the D output rows. A task owns out[t][d0:d1)
//      for every token t, zeroes it, and adds every job's weighted down rows into it in job
//      order: no races, and the result does not depend on the thread count.
// Row blocks are sized from each job's work (F x n_tok x D) so that every thread gets >= 4
// tasks however unevenly hundreds of tokens spread over the experts; jobs with no tokens are
// simply absent.
// Decode (<= 8 tokens) runs without a barrier, in one ParallelFor ("flow", RunFlow): one task
// list of gate/up tasks and per-job down tasks [d0, d1) that write the job's own output rows,
// a job's down tasks queued once enough gate/up work follows its own (PlanFlow); a down task
// waits (spins) until its job's gate/up tasks are done, which they almost always are by then. Tasks
// are claimed in list order from FusedFfn's own counter, so a wait is only ever for a task
// another thread is running (any Executor, even one that runs its tasks serially, completes).
// The combine then sums the jobs' rows into out in job order: the same float operations, in
// the same order, as the two-phase path's down tasks.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "cpu_kernels/gemv/gemv.h"
#include "cpu_kernels/qmatmul/qmatmul.h"
#include "core/base/executor.h"

namespace moesplit::moe {

// One SwiGLU FFN over `n` of the token rows.
struct FfnJob {
  matmul::WeightMatrix gate;        // F rows of D
  matmul::WeightMatrix up;          // F rows of D
  matmul::WeightMatrix down;        // D rows of F
  const int32_t* tokens = nullptr;  // [n] rows of x / out; nullptr: rows 0 .. n-1
  const float* weights = nullptr;   // [n] combine weights; nullptr: all 1
  int64_t n = 0;
};

class FusedFfn {
 public:
  FusedFfn(moesplit::Executor* pool, const gemv::GemvKernels* kernels)
      : pool_(pool), kernels_(kernels) {}

  // out[n_tok x D] = the weighted sum above of x[n_tok x D] (rows no job covers get 0). Every
  // job has n >= 1 and the same D; token ids lie in [0, n_tok) (CHECKed). No jobs: out is
  // left untouched (D is unknown).
  void Run(std::span<const FfnJob> jobs, const float* x, int64_t n_tok, float* out);

 private:
  // Per job: activation types, its x rows, and where its intermediate rows live in mid_.
  struct JobPlan {
    const qmatmul::QuantizedRows* x_gate = nullptr;  // x in the gate kernel's activation type
    const qmatmul::QuantizedRows* x_up = nullptr;    // x in the up kernel's activation type
    size_t x_stride = 0;  // bytes of the widest x row (either type, as stored or gathered)
    GgmlType act_down = GgmlType::kF32;  // the down kernel's activation type
    size_t mid_stride = 0;               // bytes per intermediate row
    size_t mid_offset = 0;               // bytes from mid_ base to the job's row 0
  };
  struct UpTask {
    int32_t job;
    int64_t f0, f1;  // rows [f0, f1) of gate / up
  };
  struct FlowTask {
    int32_t job;
    bool down;  // false: gate/up rows [r0, r1); true: down rows [r0, r1)
    int64_t r0, r1;
  };

  const qmatmul::QuantizedRows* InputRows(GgmlType act_type, const float* x, int64_t n_tok,
                                          int64_t D);
  void Plan(std::span<const FfnJob> jobs, const float* x, int64_t n_tok);
  void OrderJobs(std::span<const FfnJob> jobs);  // order_ = job indices, biggest work first
  void PlanUpTasks(std::span<const FfnJob> jobs);
  void RunUpTask(const FfnJob& job, const JobPlan& plan, int64_t f0, int64_t f1, int worker);
  // The job's intermediate rows i0 .. i0 + min(down_chunk_, n - i0) as the down activation.
  qmatmul::QuantizedRows MidRows(const FfnJob& job, const JobPlan& plan, int64_t i0) const;
  void RunDownTask(std::span<const FfnJob> jobs, int64_t n_tok, int64_t d0, int64_t d1, float* out,
                   int worker);
  void SizeScratch(int64_t max_up_block, int64_t down_block, size_t max_x_stride);
  void PlanFlow(std::span<const FfnJob> jobs);
  void RunFlow(std::span<const FfnJob> jobs, int64_t n_tok, float* out);
  void RunFlowTask(std::span<const FfnJob> jobs, const FlowTask& t, int worker);

  moesplit::Executor* pool_;
  const gemv::GemvKernels* kernels_;
  std::array<qmatmul::QuantizedRows, 3> x_rows_;  // x as [n_tok x D] in kF32 / kQ8_K / kQ8_0
  std::array<bool, 3> x_ready_{};                 // x_rows_[i] holds this Run's x
  std::vector<JobPlan> plans_;                    // [jobs]
  std::vector<UpTask> up_tasks_;                  // phase 1 tasks, biggest first (TaskWork)
  std::vector<int32_t> order_;                    // [jobs] job indices by decreasing work
  std::vector<uint8_t> mid_;          // per job [n x mid_stride] intermediate rows (+ align)
  uint8_t* mid_base_ = nullptr;       // 64-byte aligned start inside mid_
  int64_t up_chunk_ = 0;              // tokens per gate/up chunk
  int64_t down_chunk_ = 0;            // tokens per down chunk
  int64_t max_up_block_ = 0;          // widest gate/up row block
  std::vector<int64_t> down_bounds_;  // [down tasks + 1] output row bounds, biggest task first
  std::vector<std::vector<uint8_t>> worker_bytes_;  // [threads] gathered activation chunks
  std::vector<std::vector<float>> worker_f32_;      // [threads] gate / up / down partials
  // Flow (decode) only.
  std::vector<FlowTask> flow_;          // the one task list, in claim order
  std::vector<float> job_out_;          // per job [n x D] its weighted-sum-free down rows
  std::vector<size_t> job_out_offset_;  // [jobs] floats from job_out_ to the job's row 0
  std::unique_ptr<std::atomic<int32_t>[]> up_left_;  // [jobs] gate/up tasks not yet done
  size_t up_left_capacity_ = 0;
  std::atomic<int64_t> next_flow_{0};  // the next flow_ index to claim
};

}  // namespace moesplit::moe
