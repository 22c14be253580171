// HybridForward: the CPU/GPU split of a DeepSeek (MLA) forward pass. Everything but the routed
// experts runs on a DenseBackend (the GPU); the routed experts run on the CPU pools
// (moe::GroupedExperts, the fused path of the CPU engine). One MoE layer, T tokens:
//
//   device main lane   x += attn(attn_norm x); h = ffn_norm x; logits = router h; top-k
//                      h, ids, weights -> host staging         (T*D*4 + T*k*8 bytes)
//                      HostCall: CPU experts(h, ids, weights) -> out staging   (the device
//                                main lane waits here; the side lane keeps going)
//                      out staging -> device                   (T*D*4 bytes); x += out
//   device side lane   (forked after h) shared expert(h) -> sh; joined: x += sh
//
// so the bus carries only the hidden state, the top-k and the experts' output per MoE layer, and
// the CPU work is ordered on the device's queue (no host round trip per layer: the host only
// waits once, for the logits). Dense layers, attention, norms and the head never leave the
// device; the weights are uploaded once, in their GGUF types and layout (except a legacy file's
// attn_k_b / attn_v_b, see below). The latent KV cache [n_layer x ctx x (L+R)] lives on the
// device in f16, as a pool of 32-position blocks that the steps' block tables name (Step: many
// sequences a step, as the CPU pass; the server's pool).
//
// Layers whose routed experts were placed in device memory (spare VRAM; Create's
// device_experts) run them there too (ExpertMatMul over the T*k (token, expert) pairs, then the
// routing-weighted sum) and send nothing over the bus.
//
// Supported: deepseek2 in both MLA layouts. The split attn_k_b / attn_v_b tensors (llama.cpp's
// converter since 2025) are uploaded as they are; from the legacy attn_kv_b [L, H*(nope+v)] (the
// popular DeepSeek-R1 Q4_K_M uploads) Create derives them at load the way the converter does
// (mla_split.h: per head, the key rows transposed to [L x nope], the value rows [v x L]; f16 for a
// quantized kv_b: V3/R1 32 MiB a layer instead of kv_b's ~13 MiB of Q6_K), one layer's bytes
// on the host at a time, and attn_kv_b itself stays on the CPU. Not built: GQA architectures
// (qwen3moe, llama: Unimplemented), PCIe streaming of experts for long prompts, CUDA graph
// capture of the decode step, sampling on the device, one attention kernel for all the
// sequences of a step (each runs its own launch per layer).
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "core/base/status.h"
#include "core/engine/dense_backend.h"
#include "core/engine/forward.h"
#include "core/engine/profile.h"
#include "core/model/model_config.h"
#include "core/model/model_weights.h"
#include "moe/grouped_experts.h"

namespace moesplit::engine {

struct HybridLayer;    // hybrid_internal.h
struct HybridBuffers;  // hybrid_internal.h

// Bytes that crossed the bus in the Eval calls so far (tests check the split's traffic).
struct HybridTraffic {
  uint64_t to_host = 0;    // hidden states, top-k ids and weights, logits
  uint64_t from_host = 0;  // token ids, positions, expert outputs
  int64_t host_calls = 0;  // CPU expert runs (one per MoE layer and batch chunk)
};

class HybridForward {
 public:
  // Batches longer than this run as consecutive chunks (activations are sized for it).
  static constexpr int64_t kDefaultMaxBatch = 512;

  // Uploads every non-expert tensor of `w` (the file's views: never a CPU repacked layout) to
  // `backend`, allocates the latent cache for ctx_size positions and the activations of
  // max_batch tokens. `experts` runs the routed experts only (built without the shared
  // experts, which run on the device). backend and experts must outlive this object.
  // Errors: an architecture or layout this pass does not handle (Unimplemented, saying what
  // runs instead), a weight the backend has no kernel for (its CheckWeight's InvalidArgument,
  // before anything is uploaded), device memory too small (ResourceExhausted naming the tensor
  // and the sizes).
  // device_experts: [n_layer] (or empty: none) the MoE layers whose routed experts are
  // uploaded too and run on the device (no bus traffic for them); `experts` runs the others.
  static StatusOr<std::unique_ptr<HybridForward>> Create(
      const ModelConfig& cfg, const ModelWeights& w, DenseBackend* backend,
      moe::GroupedExperts* experts, int64_t ctx_size, int64_t max_batch = kDefaultMaxBatch,
      const std::vector<bool>& device_experts = {});

  // Whether this pass runs cfg's architecture and attention layout: Unimplemented saying what
  // runs instead otherwise (Create's first check; `--device auto` falls back to the CPU on it).
  static Status CheckModel(const ModelConfig& cfg);

  // Device bytes Create needs without any routed experts: the non-expert weights, the latent
  // cache and the activations (+ the routed-expert scratch when device_experts).
  static uint64_t DeviceBytesNeeded(const ModelConfig& cfg, const ModelWeights& w, int64_t ctx_size,
                                    int64_t max_batch, bool device_experts);
  // Bytes of layer il's routed experts (gate + up + down).
  static uint64_t ExpertBytes(const ModelWeights& w, int64_t il);
  ~HybridForward();
  HybridForward(const HybridForward&) = delete;
  HybridForward& operator=(const HybridForward&) = delete;

  // Evaluates one step of many sequences (Engine::Step): tokens [T] are the rows of all of
  // them; seqs[i] covers rows [row0, row0 + n_tok) at positions pos0 .. pos0 + n_tok - 1 of its
  // block table (kKvBlockSize positions a block; block b is rows [32b, 32b + 32) of every
  // layer's device cache). Norms, projections, router and experts run over all T rows (each
  // expert read once per chunk); attention runs per sequence, over its blocks in place when they
  // are consecutive, else gathered into one scratch cache. Writes logits [out_rows.size() x V]
  // of the rows out_rows (ascending). The caller checked ids, positions and block tables.
  // Steps longer than max_batch run as consecutive chunks of rows (a sequence cut by a chunk
  // boundary continues in the next chunk, after its earlier rows are cached). prof (may be
  // null) gets the CPU expert time (Phase::kCpuExperts, measured inside the host calls) and the
  // device time not hidden behind it (Phase::kDevice).
  Status Step(std::span<const int32_t> tokens, std::span<const SeqRows> seqs,
              std::span<const int64_t> out_rows, float* logits, Profile* prof);

  // Copies KV block src to dst in every layer's device cache (copy-on-write of a shared
  // prefix's last block) and waits for it.
  Status CopyBlock(int32_t src, int32_t dst);
  // Blocks of every layer's device cache (ctx_size rounded up to whole blocks).
  int64_t kv_blocks() const { return kv_blocks_; }

  uint64_t device_weight_bytes() const { return weight_bytes_; }
  uint64_t device_expert_bytes() const { return expert_bytes_; }
  uint64_t kv_cache_bytes() const { return kv_bytes_; }
  const HybridTraffic& traffic() const { return traffic_; }
  // Start-up lines: the device, what was uploaded, what stays on the CPU.
  const std::vector<std::string>& Report() const { return report_; }

 private:
  HybridForward(const ModelConfig& cfg, DenseBackend* backend, moe::GroupedExperts* experts);
  Status Upload(const ModelWeights& w, int64_t ctx_size);
  Status AllocBuffers(int64_t max_batch, bool device_experts);
  Status UploadExperts(const LayerWeights& t, HybridLayer& l);
  // A weight matrix: CheckWeight, then UploadBytes.
  StatusOr<DevMatrix> UploadMatrix(const TensorView& t, int64_t rows, int64_t cols);
  // t's bytes to a new device allocation (nothing while checking_).
  StatusOr<DevMatrix> UploadBytes(const TensorView& t, int64_t rows, int64_t cols);
  StatusOr<const float*> UploadVector(const TensorView& t);
  // One chunk of <= max_batch rows; seqs' row0 and out_rows are chunk rows.
  Status EvalChunk(std::span<const int32_t> tokens, std::span<const SeqRows> seqs,
                   std::span<const int64_t> out_rows, float* logits, Profile* prof);
  Status Attention(const HybridLayer& l, int64_t n_tok, std::span<const SeqRows> seqs);
  // Cache rows of s's tokens (b.kv rows s.row0 ..) into the blocks holding their positions.
  Status AppendSeq(const DevLatentCache& cache, const SeqRows& s);
  // The first pos0 + n_tok positions of s as one contiguous cache: its blocks in place when
  // consecutive, else copied into the gather scratch.
  StatusOr<DevLatentCache> SeqCache(const DevLatentCache& cache, const SeqRows& s);
  // Logits [out_rows.size() x V] of chunk rows out_rows into b.host_logits (queued).
  Status Head(std::span<const int64_t> out_rows);
  Status SwiGluFfn(Lane lane, const DevMatrix& gate, const DevMatrix& up, const DevMatrix& down,
                   int64_t n_tok, float* a, float* b, float* y);
  Status DenseFfn(const HybridLayer& l, int64_t n_tok);
  Status MoeFfn(const HybridLayer& l, int64_t il, int64_t n_tok, Profile* prof);
  Status DeviceExperts(const HybridLayer& l, int64_t n_tok);
  Status SharedExpert(const HybridLayer& l, int64_t n_tok);

  const ModelConfig& cfg_;
  const ModelWeights* cpu_weights_ = nullptr;  // the file's views: expert bytes for the profile
  DenseBackend* backend_;
  moe::GroupedExperts* experts_;
  ops::RopeParams rope_;
  std::vector<HybridLayer> layers_;  // [n_layer]
  DevMatrix token_embd_, output_;    // [V x D]
  const float* output_norm_ = nullptr;
  std::unique_ptr<HybridBuffers> buf_;
  int64_t max_batch_ = 0;
  int64_t kv_blocks_ = 0;         // blocks of kKvBlockSize positions in each layer's cache
  void* gather_ = nullptr;        // [kv_blocks * 32 x (L+R)] f16: a fragmented sequence's cache
  std::vector<SeqRows> pieces_;   // a chunk's sequences (Step)
  std::vector<int64_t> outs_;     // a chunk's logits rows (Step)
  uint64_t weight_bytes_ = 0, kv_bytes_ = 0, expert_bytes_ = 0;  // expert: routed, in VRAM
  bool checking_ = false;  // Create's first pass: Upload* only check, allocate nothing
  int64_t device_expert_layers_ = 0;
  HybridTraffic traffic_;
  std::vector<std::string> report_;
};

}  // namespace moesplit::engine
