#include "core/engine/engine.h"

#include <algorithm>
#include <chrono>
#include <thread>

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
const gemv::GemvKernels* ResolveKernels(std::optional<cpu::IsaTier> tier) {
  const cpu::IsaTier best = cpu::BestTier(cpu::DetectCpuFeatures());
  const cpu::IsaTier t = tier.value_or(best);
  MOESPLIT_CHECK(static_cast<int>(t) <= static_cast<int>(best), "ISA tier ", cpu::IsaTierName(t),
                 " is not supported by this CPU (best: ", cpu::IsaTierName(best), ")");
  return &gemv::KernelsFor(t);
}
}  // namespace

Session::Session(const Model& model, const SessionOptions& options, Tag)
    : model_(model),
      kernels_(ResolveKernels(options.isa_tier)),
      ws_(std::make_unique<Workspace>()),
      ctx_(ResolveCtx(model.config(), options.ctx_size)) {
  // A hybrid session keeps its latent cache on the device (HybridForward).
  if (options.backend == nullptr) {
    kv_ = std::make_unique<KvCache>(model.config(), ctx_, options.kv_type);
  }
}

Session::Session(const Model& model, const SessionOptions& options)
    : Session(model, options, Tag{}) {
  MOESPLIT_CHECK(options.placement.groups.empty() && options.backend == nullptr,
                 "a session with a CPU placement or a device is made with Session::Create");
  const Status s = Place(options);  // the default placement only maps: it cannot fail
  MOESPLIT_CHECK(s.ok(), s.ToString());
}

StatusOr<std::unique_ptr<Session>> Session::Create(const Model& model,
                                                   const SessionOptions& options) {
  std::unique_ptr<Session> s(new Session(model, options, Tag{}));
  MOESPLIT_RETURN_IF_ERROR(s->Place(options));
  return s;
}

Session::~Session() = default;

numa::NumaMode Session::numa_mode() const { return store_->mode(); }

int64_t Session::ctx_size() const { return ctx_; }
uint64_t Session::kv_cache_bytes() const {
  return hybrid_ != nullptr ? hybrid_->kv_cache_bytes() : kv_->bytes();
}
int Session::n_threads() const {
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

StatusOr<std::vector<float>> Session::Eval(std::span<const int32_t> tokens, bool all_logits) {
  const ModelConfig& c = model_.config();
  const int64_t n_tok = static_cast<int64_t>(tokens.size());
  if (n_tok == 0) return InvalidArgumentError("Eval: no tokens to evaluate");
  for (int64_t i = 0; i < n_tok; ++i) {
    if (tokens[i] < 0 || tokens[i] >= c.n_vocab) {
      return InvalidArgumentError("token ", i, " has id ", tokens[i],
                                  ", outside the vocabulary [0, ", c.n_vocab, ")");
    }
  }
  if (position_ + n_tok > ctx_size()) {
    return OutOfRangeError("context overflow: position ", position_, " + ", n_tok,
                           " tokens > context size ", ctx_size(),
                           " (use a larger --ctx-size or start a new session)");
  }
  const auto t_eval = std::chrono::steady_clock::now();
  const int64_t n_out = all_logits ? n_tok : 1;
  std::vector<float> logits(static_cast<size_t>(n_out * c.n_vocab));  // [n_out x V]
  if (hybrid_ != nullptr) {
    MOESPLIT_RETURN_IF_ERROR(hybrid_->Eval(tokens, position_, n_out, logits.data(), profile_));
  } else {
    ForwardCpu(tokens, n_out, logits.data());
  }
  position_ += n_tok;
  if (profile_ != nullptr) {
    profile_->eval_ns += NsSince(t_eval);
    profile_->tokens += n_tok;
    profile_->evals += 1;
  }
  return logits;
}

void Session::ForwardCpu(std::span<const int32_t> tokens, int64_t n_out, float* logits) {
  const ModelConfig& c = model_.config();
  const int64_t n_tok = static_cast<int64_t>(tokens.size());
  const ForwardContext ctx{c,         *weights_, *exec_,  *kv_, *experts_, RopeParamsFor(c),
                           *kernels_, *ws_,      profile_};
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
      MlaAttention(ctx, il, h, n_tok, position_, out);
    } else {
      GqaAttention(ctx, il, h, n_tok, position_, out);
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
  Logits(ctx, x, n_tok, n_out, logits);
}

}  // namespace moesplit::engine
