// The CPU inference engine's public API.
//
//   MOESPLIT_ASSIGN_OR_RETURN(std::unique_ptr<engine::Model> model, engine::Model::Load(path));
//   engine::Session session(*model, {.ctx_size = 4096, .n_threads = 8});
//   MOESPLIT_ASSIGN_OR_RETURN(std::vector<float> logits, session.Eval(tokens,
//   /*all_logits=*/true));
//   // logits: [tokens.size() x n_vocab] row-major (or [1 x n_vocab] for the last token)
//
// A Model is immutable and shareable (weights stay memory-mapped, zero copy); an Engine holds what
// is placed once per process (pools, expert stores, repacked weights, the KV block pool) and
// evaluates steps that mix many sequences (Engine::Step, the server); a Session is one
// conversation on its own Engine, appending tokens at position().
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "core/base/status.h"
#include "core/engine/kv_cache.h"
#include "core/engine/profile.h"
#include "core/gguf/gguf_file.h"
#include "core/model/model_config.h"
#include "core/model/model_weights.h"
#include "cpu_kernels/cpu_features.h"
#include "cpu_kernels/gemv/gemv.h"
#include "numa/plan.h"

namespace moesplit {
class Executor;
}  // namespace moesplit
namespace moesplit::numa {
class NodeFanout;
class NodePool;
class ThreadPool;
}  // namespace moesplit::numa
namespace moesplit::moe {
class ExpertStore;
class GroupedExperts;
}  // namespace moesplit::moe

namespace moesplit::engine {

struct Workspace;
struct DenseRepack;
struct SeqRows;
class DenseBackend;
class HybridForward;

class Model {
 public:
  // Opens the GGUF (all shards), reads the config and resolves every tensor. Errors: the file
  // (IO / DataLoss), an unsupported architecture (Unimplemented), missing tensors (one error
  // listing all of them).
  static StatusOr<std::unique_ptr<Model>> Load(const std::string& path);

  const ModelConfig& config() const { return config_; }
  const ModelWeights& weights() const { return weights_; }
  const gguf::GgufFile& file() const { return *file_; }

  // Weight types of the model's matrix products without a fast kernel in `kernels` (one tier's
  // table): they run the reference matmul (correct, slow). Empty for the usual GGUF quant types.
  std::vector<GgmlType> FallbackTypes(const gemv::GemvKernels& kernels) const;

 private:
  Model() = default;
  std::unique_ptr<gguf::GgufFile> file_;
  ModelConfig config_;
  ModelWeights weights_;
};

// Where the CPU work runs and where the expert weights live (numa/plan.h modes). Empty `groups`:
// one unpinned pool of n_threads workers reading the file mapping (the default everywhere).
struct CpuPlacement {
  struct Group {
    std::vector<int> mem_nodes;  // OS node(s) of its expert memory (interleave: several)
    std::vector<int> cpus;       // [workers] OS CPU ids its workers pin to
  };
  numa::NumaMode mode = numa::NumaMode::kSingle;
  // single / interleave: exactly 1 group; replicate / shard: one group per node (a node may
  // repeat: a fake node map, for tests on a one-node machine).
  std::vector<Group> groups;
  bool pin = true;
  bool copy_single = false;  // single: copy the experts into node memory (multi-node machines)
  // Repack expert tensors and the dense matrices (weight_repack.h) at load into the layouts the
  // kernel tier runs fastest (gemv::LoadLayout: Q4_K / Q5_K / Q6_K / Q8_0 / Q5_0 / Q5_1 / Q4_0 /
  // Q4_1 -> 16-row groups on AVX-512 VNNI; Q2_K / Q3_K / Q4_0 on AVX2); the copy replaces the
  // file's pages. false: read them as the file stores them (`--no-repack`).
  bool repack = true;
  // Of the file's bytes, how much the repacked expert layouts may add in all (IQ1_S's and
  // IQ1_M's grow much: 58 / 50, 66 / 56 bytes); tensors past it keep the file layout. 0.08 keeps
  // the peak resident memory within 1.1x the file (the runtime's own buffers take ~1-2%); < 0: no
  // limit (`--repack-growth`).
  double repack_growth = 0.08;
};

// Hybrid sessions: where one MoE layer's routed experts live.
enum class ExpertHome : uint8_t {
  kAuto,    // the device when whole layers fit in what is left there (last layers first)
  kCpu,     // the CPU pools (--cpu-moe, --n-cpu-moe, -ot exps=CPU)
  kDevice,  // the device, or an error when it does not fit (-ot exps=CUDA0)
};

struct SessionOptions {
  int64_t ctx_size = 4096;  // KV cache positions; <= 0: the model's context_length (max 32768)
  int n_threads = 0;        // <= 0: all hardware threads
  KvCacheType kv_type = KvCacheType::kF32;
  // ISA tier of the CPU kernels (cpu::EffectiveIsaTier: the apps apply MOESPLIT_MAX_ISA);
  // nullopt: the best tier this CPU supports. A tier above that is a CHECK failure (SIGILL).
  std::optional<cpu::IsaTier> isa_tier;
  // How the decode kernels read weights (gemv::DecodeRead; the apps apply MOESPLIT_DECODE_READ);
  // nullopt: the mode measured faster on this CPU (gemv::PreferredDecodeRead).
  std::optional<gemv::DecodeRead> decode_read;
  CpuPlacement placement;
  // Called while the experts are copied to their nodes: (bytes done, bytes total).
  std::function<void(uint64_t done, uint64_t total)> progress;
  // The hybrid CPU/GPU pass (hybrid_forward.h): everything but the routed experts runs on this
  // backend (not owned; it must outlive the session; Session::Create only). nullptr: all on
  // the CPU.
  DenseBackend* backend = nullptr;
  // Hybrid: longer batches run as chunks of this many tokens (device activations are sized
  // for it; llama.cpp's -ub).
  int64_t ubatch = 512;
  // Hybrid: [n_layer] where each MoE layer's routed experts live (empty: all kAuto). kAuto
  // layers take the device memory left after everything else and a margin (max(512 MiB, 5% of
  // what is free)), whole layers, the last ones first.
  std::vector<ExpertHome> expert_homes;
};

using EngineOptions = SessionOptions;

// One sequence's part of a step (Engine::Step).
struct StepSeq {
  std::span<const int32_t> tokens;  // [n] evaluated at positions pos0 .. pos0 + n - 1
  std::span<const int32_t> blocks;  // its KV block table, covering positions [0, pos0 + n)
  int64_t pos0 = 0;
  int64_t n_logits = 0;  // logits wanted for its last n_logits tokens (0 .. n)
};

// What is placed once per process: the pools, the expert stores, the repacked matrices, the
// dense backend, the KV block pool and the scratch of a step. Sequences are not objects here: a
// sequence is a block table and a position that the caller (Session, the server's scheduler)
// keeps; Step evaluates any mix of them at once. Not thread-safe: one thread drives it.
class Engine {
 public:
  // Any placement; errors: node ids the machine lacks, memory that cannot be allocated.
  static StatusOr<std::unique_ptr<Engine>> Create(const Model& model, const EngineOptions& options);
  // The default placement only (options.placement.groups empty; CHECKed): cannot fail.
  Engine(const Model& model, const EngineOptions& options);
  ~Engine();
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  // Evaluates every sequence's tokens in one forward pass: norms, projections, router and
  // experts over all the step's rows (each expert's weights read once per step), attention per
  // sequence over its own blocks (the CPU pool's, or the device cache's in the hybrid pass).
  // Appends the logits asked for to *logits, [sum n_logits x n_vocab] in sequence order.
  // Errors (nothing is evaluated): no tokens, a token id outside the vocabulary, a block table
  // that does not cover the positions or names blocks the pool lacks (InvalidArgument).
  Status Step(std::span<const StepSeq> seqs, std::vector<float>* logits);

  // The KV block pool, CPU or device: blocks of kv_block_size() positions that block tables
  // name; CopyKvBlock copies one block's rows in every layer (copy-on-write of a shared prefix).
  int64_t kv_blocks() const;
  int kv_block_size() const;
  Status CopyKvBlock(int32_t src, int32_t dst);

  const Model& model() const { return model_; }
  // The CPU pass's block pool (nullptr in the hybrid pass: its cache is on the device).
  KvCache* kv() { return kv_.get(); }
  int64_t ctx_size() const { return ctx_; }  // positions asked for (the pool may hold more)
  uint64_t kv_cache_bytes() const;
  int n_threads() const;
  cpu::IsaTier isa_tier() const { return kernels_->tier; }
  gemv::DecodeRead decode_read() const { return kernels_->decode_read; }
  // Start-up lines: pools (node, workers, cpus), pinning not honoured, where the experts are.
  const std::vector<std::string>& placement_report() const { return report_; }
  numa::NumaMode numa_mode() const;
  bool hybrid() const { return hybrid_ != nullptr; }
  // Adds time and bytes per forward-pass phase of every later Step to *profile (not owned).
  void set_profile(Profile* profile) { profile_ = profile; }
  std::vector<GgmlType> FallbackTypes() const { return model_.FallbackTypes(*kernels_); }

 private:
  struct Tag {};
  Engine(const Model& model, const EngineOptions& options, Tag);
  Status Place(const EngineOptions& options);
  Status CheckStep(std::span<const StepSeq> seqs) const;
  // The CPU forward pass: logits [n_out x V] of rows out_rows of the step's T rows.
  void ForwardCpu(std::span<const int32_t> tokens, std::span<const SeqRows> seqs,
                  std::span<const int64_t> out_rows, float* logits);
  // Hybrid: [n_layer] true where a MoE layer's routed experts go to the device (expert_homes
  // against the device memory left). ResourceExhausted when kDevice layers do not fit.
  StatusOr<std::vector<bool>> DeviceExpertLayers(const EngineOptions& options) const;
  // After Place's pools: the dense matrices repacked (weight_repack.h) when p.repack, weights_.
  Status PlaceDenseWeights(const CpuPlacement& p);

  const Model& model_;
  const gemv::GemvKernels* kernels_;
  std::unique_ptr<numa::ThreadPool> pool_;     // the default: unpinned workers
  std::unique_ptr<numa::NodePool> node_pool_;  // single / interleave placement
  std::unique_ptr<numa::NodeFanout> fanout_;   // replicate / shard: one pool per group
  moesplit::Executor* exec_ = nullptr;             // attention, dense layers, head: one of the above
  std::unique_ptr<KvCache> kv_;                // the CPU pass's block pool (null in hybrid)
  std::unique_ptr<moe::ExpertStore> store_;
  std::unique_ptr<moe::GroupedExperts> experts_;
  // The dense matrices repacked at load (weight_repack.h), when any were; the forward pass reads
  // weights_: dense_->weights, or the model's file views.
  std::unique_ptr<DenseRepack> dense_;
  const ModelWeights* weights_ = nullptr;
  std::unique_ptr<Workspace> ws_;
  std::unique_ptr<HybridForward> hybrid_;  // with options.backend: the forward pass
  int64_t ctx_ = 0;                        // KV cache positions asked for
  std::vector<std::string> report_;
  Profile* profile_ = nullptr;
  // Step's scratch: the step's tokens [T], sequences, rows wanted.
  std::vector<int32_t> step_tokens_;
  std::vector<SeqRows> step_seqs_;
  std::vector<int64_t> step_rows_;
};

// One conversation on its own Engine (run, chat, bench, eval, perplexity): the whole block pool
// is its cache, read in place.
class Session {
 public:
  static StatusOr<std::unique_ptr<Session>> Create(const Model& model,
                                                   const SessionOptions& options);
  // The default placement only (options.placement.groups empty; CHECKed): cannot fail.
  Session(const Model& model, const SessionOptions& options);
  ~Session();
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  // Evaluates `tokens` at positions position() .. position() + n - 1 as one batch (a prompt, or
  // one token for decode) and advances position(). Returns logits [n x n_vocab] row-major when
  // all_logits, else the last row [n_vocab]. Errors (nothing is evaluated): empty input, a token
  // id outside [0, n_vocab), or the context would overflow ctx_size (OutOfRange).
  StatusOr<std::vector<float>> Eval(std::span<const int32_t> tokens, bool all_logits);

  void Reset() { position_ = 0; }  // forget the conversation (the cache is overwritten)
  int64_t position() const { return position_; }
  int64_t ctx_size() const { return engine_->ctx_size(); }
  uint64_t kv_cache_bytes() const { return engine_->kv_cache_bytes(); }
  int n_threads() const { return engine_->n_threads(); }
  cpu::IsaTier isa_tier() const { return engine_->isa_tier(); }
  gemv::DecodeRead decode_read() const { return engine_->decode_read(); }
  const std::vector<std::string>& placement_report() const { return engine_->placement_report(); }
  numa::NumaMode numa_mode() const { return engine_->numa_mode(); }
  bool hybrid() const { return engine_->hybrid(); }
  void set_profile(Profile* profile) {
    profile_ = profile;
    engine_->set_profile(profile);
  }
  std::vector<GgmlType> FallbackTypes() const { return engine_->FallbackTypes(); }
  Engine& engine() { return *engine_; }

 private:
  explicit Session(std::unique_ptr<Engine> engine);
  std::unique_ptr<Engine> engine_;
  std::vector<int32_t> blocks_;  // 0, 1, 2, ...: the whole pool in order
  Profile* profile_ = nullptr;
  int64_t position_ = 0;
};

}  // namespace moesplit::engine
