// ExpertEngine: turns routed (ids, weights) into FFN jobs (one per active expert, its tokens in
// token order, plus the shared expert over all tokens) and runs them through the fused driver
// (moe/fused_ffn.h): two ParallelFor phases per MoE layer, one barrier between them.
//
//   ExpertEngine::Forward(hidden[T x D], ids[T x k], weights[T x k]) -> out[T x D]
//   out[t] = sum_j weights[t, j] * FFN_{ids[t, j]}(hidden[t])  (+ FFN_shared(hidden[t]))
//
// Expert tensors are llama.cpp's stacked slabs: ffn_gate_exps / ffn_up_exps [D, F, E],
// ffn_down_exps [F, D, E]; expert e is the contiguous slab of rows starting at e * F (e * D).
#pragma once

#include <cstdint>
#include <vector>

#include "core/base/tensor_view.h"
#include "cpu_kernels/gemv/gemv.h"
#include "cpu_kernels/matmul/matmul.h"
#include "moe/fused_ffn.h"
#include "core/base/executor.h"

namespace moesplit::moe {

class ExpertEngine {
 public:
  struct Layer {
    TensorView gate_exps;   // [D, F, E]
    TensorView up_exps;     // [D, F, E]
    TensorView down_exps;   // [F, D, E]
    TensorView gate_shexp;  // [D, Fs] shared expert(s), or absent (data == nullptr)
    TensorView up_shexp;    // [D, Fs]
    TensorView down_shexp;  // [Fs, D]
  };
  // A dense SwiGLU FFN (DeepSeek's leading dense layers, llama-style models).
  struct Dense {
    TensorView gate;  // [D, F]
    TensorView up;    // [D, F]
    TensorView down;  // [F, D]
  };

  // kernels: the tier's table (gemv::KernelsFor), chosen once at start-up by the owner.
  ExpertEngine(moesplit::Executor* pool, const gemv::GemvKernels* kernels)
      : pool_(pool), kernels_(kernels), ffn_(pool, kernels) {}

  // out[T x D] = routed expert mixture of hidden[T x D] for ids/weights [T x k], plus the
  // layer's shared expert (weight 1) when present — all in one fused pass.
  void Forward(const Layer& layer, const float* hidden, int64_t n_tok, const int32_t* ids,
               const float* weights, int k, float* out);

  // As Forward, restricted to the routed experts e with use_expert[e] != 0 (use_expert: [E]) and
  // to the shared expert only when `shared`: one compute group's share under NUMA replicate.
  // Slots of other experts contribute nothing; out rows no job covers are 0 (all of out is 0 when
  // there is no job at all).
  void ForwardSubset(const Layer& layer, const float* hidden, int64_t n_tok, const int32_t* ids,
                     const float* weights, int k, const uint8_t* use_expert, bool shared,
                     float* out);

  // out[T x D] = W_down (silu(W_gate h) * (W_up h)) for every row of hidden[T x D].
  void ForwardDense(const Dense& ffn, const float* hidden, int64_t n_tok, float* out);

  const gemv::GemvKernels& kernels() const { return *kernels_; }

 private:
  moesplit::Executor* pool_;
  const gemv::GemvKernels* kernels_;
  FusedFfn ffn_;
  std::vector<int64_t> start_;   // [E + 1] first slot of each expert (counting sort)
  std::vector<int64_t> fill_;    // [E] next free slot per expert while dispatching
  std::vector<int32_t> tokens_;  // [T*k] token of each slot, grouped by expert, token order
  std::vector<float> slot_w_;    // [T*k] routing weight of each slot
  std::vector<FfnJob> jobs_;     // active experts (+ shared)
};

}  // namespace moesplit::moe
