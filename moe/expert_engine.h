// The expert FFN driver: SwiGLU feed-forward blocks y = W_down (silu(W_gate x) * (W_up x)) run as
// one batch of "jobs" over the pool, and ExpertEngine, which turns routed (ids, weights) into such
// jobs (one per active expert, its tokens gathered) and combines the results.
//
//   ExpertEngine::Forward(hidden[T x D], ids[T x k], weights[T x k]) -> out[T x D]
//   out[t] = sum_j weights[t, j] * FFN_{ids[t, j]}(hidden[t])
//
// Expert tensors are llama.cpp's stacked slabs: ffn_gate_exps / ffn_up_exps [D, F, E],
// ffn_down_exps [F, D, E]; expert e is the contiguous slab of rows starting at e * F (e * D).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "core/base/tensor_view.h"
#include "cpu_kernels/gemv/gemv.h"
#include "cpu_kernels/matmul/matmul.h"
#include "numa/thread_pool.h"

namespace moesplit::moe {

// One SwiGLU FFN applied to n_tok rows.
struct FfnJob {
  matmul::WeightMatrix gate;  // F rows of D
  matmul::WeightMatrix up;    // F rows of D
  matmul::WeightMatrix down;  // D rows of F
  const float* x = nullptr;   // [n_tok x D]
  int64_t n_tok = 0;
  float* y = nullptr;  // [n_tok x D], overwritten
};

// Runs all jobs: phase 1 gate+up row blocks of every job in one ParallelFor, SwiGLU, phase 2 the
// down row blocks. Weight rows are dequantized once per job and reused for all its tokens.
void RunFfnJobs(numa::ThreadPool& pool, std::span<const FfnJob> jobs);

class ExpertEngine {
 public:
  struct Layer {
    TensorView gate_exps;  // [D, F, E]
    TensorView up_exps;    // [D, F, E]
    TensorView down_exps;  // [F, D, E]
  };

  // kernels: the tier's table (gemv::KernelsFor), chosen once at start-up by the owner.
  ExpertEngine(numa::ThreadPool* pool, const gemv::GemvKernels* kernels)
      : pool_(pool), kernels_(kernels) {}

  // out[T x D] = routed expert mixture of hidden[T x D] for ids/weights [T x k].
  void Forward(const Layer& layer, const float* hidden, int64_t n_tok, const int32_t* ids,
               const float* weights, int k, float* out);

 private:
  numa::ThreadPool* pool_;
  const gemv::GemvKernels* kernels_;
  std::vector<float> x_packed_;  // [T*k x D] token rows grouped by expert
  std::vector<float> y_packed_;  // [T*k x D] expert outputs, same order
};

}  // namespace moesplit::moe
