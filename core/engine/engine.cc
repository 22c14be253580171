#include "core/engine/engine.h"

#include <algorithm>
#include <chrono>
#include <thread>

#include "core/base/int_math.h"
#include "core/engine/forward.h"
#include "core/engine/hybrid_forward.h"
#include "core/engine/kv_cache.h"
#include "core/engine/weight_repack.h"
#include "cpu_kernels/qmatmul/qmatmul.h"
#include "moe/expert_engine.h"
#include "moe/expert_store.h"
#include "moe/grouped_experts.h"
#include "numa/node_pool.h"
#include "numa/thread_pool.h"

namespace moesplit::engine {

StatusOr<std::unique_ptr<Model>> Model::Load(const std::string& path) {
  std::unique_ptr<Model> m(new Model());
  MOESPLIT_ASSIGN_OR_RETURN(m->file_, gguf::GgufFile::Open(path));
  MOESPLIT_ASSIGN_OR_RETURN(m->config_, ModelConfig::FromGguf(*m->file_));
  MOESPLIT_ASSIGN_OR_RETURN(m->weights_, ModelWeights::Resolve(*m->file_, m->config_));
  return m;
}

namespace {
int64_t ResolveCtx(const ModelConfig& c, int64_t ctx) {
  if (ctx > 0) return ctx;
  return std::clamp<int64_t>(c.n_ctx_train, 1, 32768);
}
const gemv::GemvKernels* ResolveKernels(const EngineOptions& options) {
  const cpu::CpuFeatures features = cpu::DetectCpuFeatures();
  const cpu::IsaTier best = cpu::BestTier(features);
  const cpu::IsaTier t = options.isa_tier.value_or(best);
  MOESPLIT_CHECK(static_cast<int>(t) <= static_cast<int>(best), "ISA tier ", cpu::IsaTierName(t),
                 " is not supported by this CPU (best: ", cpu::IsaTierName(best), ")");
  return &gemv::KernelsFor(t, options.decode_read.value_or(gemv::PreferredDecodeRead(features)));
}
}  // namespace

Engine::Engine(const Model& model, const EngineOptions& options, Tag)
    : model_(model),
      kernels_(ResolveKernels(options)),
      ws_(std::make_unique<Workspace>()),
      ctx_(ResolveCtx(model.config(), options.ctx_size)) {}

Engine::Engine(const Model& model, const EngineOptions& options) : Engine(model, options, Tag{}) {
  MOESPLIT_CHECK(options.placement.groups.empty() && options.backend == nullptr,
                 "an engine with a CPU placement or a device is made with Engine::Create");
  kv_ = std::make_unique<KvCache>(model.config(), ctx_, options.kv_type);
  const Status s = Place(options);  // the default placement only maps: it cannot fail
  MOESPLIT_CHECK(s.ok(), s.ToString());
}

StatusOr<std::unique_ptr<Engine>> Engine::Create(const Model& model,
                                                 const EngineOptions& options) {
  std::unique_ptr<Engine> e(new Engine(model, options, Tag{}));
  // A hybrid engine keeps its latent cache on the device (HybridForward).
  if (options.backend == nullptr) {
    MOESPLIT_ASSIGN_OR_RETURN(e->kv_, KvCache::Create(model.config(), e->ctx_, options.kv_type));
  }
  MOESPLIT_RETURN_IF_ERROR(e->Place(options));
  return e;
}

Engine::~Engine() = default;

numa::NumaMode Engine::numa_mode() const { return store_->mode(); }

uint64_t Engine::kv_cache_bytes() const {
  return hybrid_ != nullptr ? hybrid_->kv_cache_bytes() : kv_->bytes();
}
int Engine::n_threads() const {
  if (fanout_ == nullptr) return exec_->size();
  int n = 0;
  for (int g = 0; g < fanout_->num_nodes(); ++g) n += fanout_->pool(g).size();
  return n;
}

std::vector<GgmlType> Model::FallbackTypes(const gemv::GemvKernels& kernels) const {
  const ModelWeights& w = weights_;
  std::vector<GgmlType> types = {w.output.type};
  for (const LayerWeights& l : w.layers) {
    for (const TensorView* t :
         {&l.attn_q_a,      &l.attn_q_b,       &l.attn_q,        &l.attn_kv_a_mqa,
          &l.attn_k_b,      &l.attn_v_b,       &l.attn_kv_b,     &l.attn_output,
          &l.attn_k,        &l.attn_v,         &l.ffn_gate,      &l.ffn_up,
          &l.ffn_down,      &l.ffn_gate_inp,   &l.ffn_gate_exps, &l.ffn_up_exps,
          &l.ffn_down_exps, &l.ffn_gate_shexp, &l.ffn_up_shexp,  &l.ffn_down_shexp}) {
      if (Present(*t)) types.push_back(t->type);
    }
  }
  return qmatmul::MissingKernelTypes(kernels, types);
}

Status Engine::CheckStep(std::span<const StepSeq> seqs) const {
  const int64_t V = model_.config().n_vocab;
  if (seqs.empty()) return InvalidArgumentError("Step: no sequences to evaluate");
  for (size_t i = 0; i < seqs.size(); ++i) {
    const StepSeq& s = seqs[i];
    const int64_t n = static_cast<int64_t>(s.tokens.size());
    if (n == 0) return InvalidArgumentError("Step: sequence ", i, " has no tokens");
    if (s.n_logits < 0 || s.n_logits > n) {
      return InvalidArgumentError("Step: sequence ", i, " asks for ", s.n_logits,
                                  " logits rows of ", n, " tokens");
    }
    for (int64_t t = 0; t < n; ++t) {
      if (s.tokens[t] < 0 || s.tokens[t] >= V) {
        return InvalidArgumentError("token ", t, " has id ", s.tokens[t],
                                    ", outside the vocabulary [0, ", V, ")");
      }
    }
    if (s.pos0 < 0 || s.pos0 + n > ctx_) {
      return OutOfRangeError("context overflow: position ", s.pos0, " + ", n,
                             " tokens > context size ", ctx_,
                             " (use a larger --ctx-size or start a new session)");
    }
    const int64_t need = CeilDiv(s.pos0 + n, kv_block_size());
    if (static_cast<int64_t>(s.blocks.size()) < need) {
      return InvalidArgumentError("Step: sequence ", i, " has ", s.blocks.size(),
                                  " KV blocks for ", s.pos0 + n, " positions (", need, " needed)");
    }
    for (int64_t b = 0; b < need; ++b) {
      if (s.blocks[b] < 0 || s.blocks[b] >= kv_blocks()) {
        return InvalidArgumentError("Step: sequence ", i, " names KV block ", s.blocks[b],
                                    " of a pool of ", kv_blocks());
      }
    }
  }
  return Status::Ok();
}

Status Engine::Step(std::span<const StepSeq> seqs, std::vector<float>* logits) {
  MOESPLIT_RETURN_IF_ERROR(CheckStep(seqs));
  const int64_t V = model_.config().n_vocab;
  const auto t_eval = std::chrono::steady_clock::now();
  step_tokens_.clear();
  step_seqs_.clear();
  step_rows_.clear();
  for (const StepSeq& s : seqs) {
    const int64_t row0 = static_cast<int64_t>(step_tokens_.size());
    const int64_t n = static_cast<int64_t>(s.tokens.size());
    step_tokens_.insert(step_tokens_.end(), s.tokens.begin(), s.tokens.end());
    step_seqs_.push_back({s.blocks, row0, n, s.pos0});
    for (int64_t r = n - s.n_logits; r < n; ++r) step_rows_.push_back(row0 + r);
  }
  const size_t at = logits->size();
  logits->resize(at + step_rows_.size() * static_cast<size_t>(V));  // [n_out x V]
  if (hybrid_ != nullptr) {
    MOESPLIT_RETURN_IF_ERROR(
        hybrid_->Step(step_tokens_, step_seqs_, step_rows_, logits->data() + at, profile_));
  } else {
    ForwardCpu(step_tokens_, step_seqs_, step_rows_, logits->data() + at);
  }
  if (profile_ != nullptr) {
    profile_->eval_ns += NsSince(t_eval);
    profile_->tokens += static_cast<int64_t>(step_tokens_.size());
    profile_->evals += 1;
  }
  return Status::Ok();
}

void Engine::ForwardCpu(std::span<const int32_t> tokens, std::span<const SeqRows> seqs,
                        std::span<const int64_t> out_rows, float* logits) {
  const ModelConfig& c = model_.config();
  const int64_t n_tok = static_cast<int64_t>(tokens.size());
  const ForwardContext ctx{c,         *weights_, *exec_,   *kv_, *experts_, RopeParamsFor(c),
                           *kernels_, *ws_,      profile_, seqs};
  const int64_t D = c.n_embd;
  float* x = Grow(ws_->x, n_tok * D);      // [T x D] residual stream
  float* h = Grow(ws_->h, n_tok * D);      // [T x D] normalised input of the next block
  float* out = Grow(ws_->out, n_tok * D);  // [T x D] block output
  Embed(ctx, tokens.data(), n_tok, x);
  auto norm_of = [&](const TensorView& t) { return static_cast<const float*>(t.data); };
  const float* first_norm = norm_of(ctx.w.layers[0].attn_norm);
  {
    PhaseTimer timer(profile_, Phase::kNorm);
    ForTokens(ctx, n_tok,
              [&](int64_t t) { ops::RmsNorm(x + t * D, first_norm, D, c.rms_eps, h + t * D); });
  }
  for (int64_t il = 0; il < c.n_layer; ++il) {
    const LayerWeights& l = ctx.w.layers[static_cast<size_t>(il)];
    if (c.arch == ModelArch::kDeepseek2) {
      MlaAttention(ctx, il, h, n_tok, out);
    } else {
      GqaAttention(ctx, il, h, n_tok, out);
    }
    // x += attention(attn_norm(x)); h = ffn_norm(x): one pass per token.
    {
      PhaseTimer timer(profile_, Phase::kNorm);
      ForTokens(ctx, n_tok, [&](int64_t t) {
        float* xt = x + t * D;
        for (int64_t i = 0; i < D; ++i) xt[i] += out[t * D + i];
        ops::RmsNorm(xt, norm_of(l.ffn_norm), D, c.rms_eps, h + t * D);
      });
    }
    FeedForward(ctx, il, h, n_tok, out);
    // x += ffn(ffn_norm(x)); h = the next layer's attn_norm(x).
    const bool last = il + 1 == c.n_layer;
    const float* next_norm = last ? nullptr : norm_of(ctx.w.layers[il + 1].attn_norm);
    PhaseTimer timer(profile_, Phase::kNorm);
    ForTokens(ctx, n_tok, [&](int64_t t) {
      float* xt = x + t * D;
      for (int64_t i = 0; i < D; ++i) xt[i] += out[t * D + i];
      if (!last) ops::RmsNorm(xt, next_norm, D, c.rms_eps, h + t * D);
    });
  }
  if (!out_rows.empty()) Logits(ctx, x, out_rows, logits);
}

int64_t Engine::kv_blocks() const {
  return hybrid_ != nullptr ? hybrid_->kv_blocks() : kv_->n_blocks();
}

int Engine::kv_block_size() const { return kv_ != nullptr ? kv_->block_size() : kKvBlockSize; }

Status Engine::CopyKvBlock(int32_t src, int32_t dst) {
  if (hybrid_ != nullptr) return hybrid_->CopyBlock(src, dst);
  kv_->CopyBlock(src, dst);
  return Status::Ok();
}

Session::Session(std::unique_ptr<Engine> engine)
    : engine_(std::move(engine)), blocks_(IdentityBlocks(engine_->kv_blocks())) {}

Session::Session(const Model& model, const SessionOptions& options)
    : Session(std::make_unique<Engine>(model, options)) {}

StatusOr<std::unique_ptr<Session>> Session::Create(const Model& model,
                                                   const SessionOptions& options) {
  MOESPLIT_ASSIGN_OR_RETURN(std::unique_ptr<Engine> engine, Engine::Create(model, options));
  return std::unique_ptr<Session>(new Session(std::move(engine)));
}

Session::~Session() = default;

StatusOr<std::vector<float>> Session::Eval(std::span<const int32_t> tokens, bool all_logits) {
  const int64_t n_tok = static_cast<int64_t>(tokens.size());
  if (n_tok == 0) return InvalidArgumentError("Eval: no tokens to evaluate");
  const StepSeq seq{tokens, blocks_, position_, all_logits ? n_tok : 1};
  std::vector<float> logits;
  MOESPLIT_RETURN_IF_ERROR(engine_->Step({&seq, 1}, &logits));
  position_ += n_tok;
  return logits;
}


}  // namespace moesplit::engine
