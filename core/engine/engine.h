// The CPU inference engine's public API.
//
//   MOESPLIT_ASSIGN_OR_RETURN(std::unique_ptr<engine::Model> model, engine::Model::Load(path));
//   engine::Session session(*model, {.ctx_size = 4096, .n_threads = 8});
//   MOESPLIT_ASSIGN_OR_RETURN(std::vector<float> logits, session.Eval(tokens,
//   /*all_logits=*/true));
//   // logits: [tokens.size() x n_vocab] row-major (or [1 x n_vocab] for the last token)
//
// A Model is immutable and shareable (weights stay memory-mapped, zero copy); a Session holds the
// KV cache, the thread pool and scratch of one conversation, and appends tokens at position().
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "core/base/status.h"
#include "core/engine/kv_cache.h"
#include "core/gguf/gguf_file.h"
#include "core/model/model_config.h"
#include "core/model/model_weights.h"
#include "cpu_kernels/cpu_features.h"
#include "cpu_kernels/gemv/gemv.h"

namespace moesplit::numa {
class ThreadPool;
}
namespace moesplit::moe {
class ExpertEngine;
}

namespace moesplit::engine {

struct Workspace;

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

struct SessionOptions {
  int64_t ctx_size = 4096;  // KV cache positions; <= 0: the model's context_length (max 32768)
  int n_threads = 0;        // <= 0: all hardware threads
  KvCacheType kv_type = KvCacheType::kF32;
  // ISA tier of the CPU kernels (cpu::EffectiveIsaTier: the apps apply MOESPLIT_MAX_ISA);
  // nullopt: the best tier this CPU supports. A tier above that is a CHECK failure (SIGILL).
  std::optional<cpu::IsaTier> isa_tier;
};

class Session {
 public:
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
  int64_t ctx_size() const;
  uint64_t kv_cache_bytes() const;
  int n_threads() const;
  cpu::IsaTier isa_tier() const { return kernels_->tier; }
  // Model::FallbackTypes at this session's tier.
  std::vector<GgmlType> FallbackTypes() const { return model_.FallbackTypes(*kernels_); }

 private:
  const Model& model_;
  const gemv::GemvKernels* kernels_;
  std::unique_ptr<numa::ThreadPool> pool_;
  std::unique_ptr<KvCache> kv_;
  std::unique_ptr<moe::ExpertEngine> experts_;
  std::unique_ptr<Workspace> ws_;
  int64_t position_ = 0;
};

}  // namespace moesplit::engine
