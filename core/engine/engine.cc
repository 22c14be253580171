#include "core/engine/engine.h"

#include <algorithm>
#include <thread>

#include "core/engine/forward.h"
#include "core/engine/kv_cache.h"
#include "moe/expert_engine.h"
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
int ResolveThreads(int n) {
  if (n > 0) return n;
  const unsigned hw = std::thread::hardware_concurrency();
  return hw == 0 ? 1 : static_cast<int>(hw);
}
int64_t ResolveCtx(const ModelConfig& c, int64_t ctx) {
  if (ctx > 0) return ctx;
  return std::clamp<int64_t>(c.n_ctx_train, 1, 32768);
}
}  // namespace

Session::Session(const Model& model, const SessionOptions& options)
    : model_(model),
      pool_(std::make_unique<numa::ThreadPool>(ResolveThreads(options.n_threads))),
      kv_(std::make_unique<KvCache>(model.config(), ResolveCtx(model.config(), options.ctx_size),
                                    options.kv_type)),
      experts_(std::make_unique<moe::ExpertEngine>(
          pool_.get(), &gemv::KernelsFor(cpu::IsaTier::kScalar))) {}

Session::~Session() = default;

int64_t Session::ctx_size() const { return kv_->ctx_size(); }
uint64_t Session::kv_cache_bytes() const { return kv_->bytes(); }
int Session::n_threads() const { return pool_->size(); }

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
  ForwardContext ctx{c, model_.weights(), *pool_, *kv_, *experts_, RopeParamsFor(c)};
  const int64_t D = c.n_embd;
  std::vector<float> x(static_cast<size_t>(n_tok * D));    // [T x D] residual stream
  std::vector<float> h(static_cast<size_t>(n_tok * D));    // [T x D] normalised input
  std::vector<float> out(static_cast<size_t>(n_tok * D));  // [T x D] block output
  Embed(ctx, tokens.data(), n_tok, x.data());
  for (int64_t il = 0; il < c.n_layer; ++il) {
    const LayerWeights& l = ctx.w.layers[static_cast<size_t>(il)];
    // x += attention(attn_norm(x))
    for (int64_t t = 0; t < n_tok; ++t) {
      ops::RmsNorm(&x[t * D], static_cast<const float*>(l.attn_norm.data), D, c.rms_eps, &h[t * D]);
    }
    if (c.arch == ModelArch::kDeepseek2) {
      MlaAttention(ctx, il, h.data(), n_tok, position_, out.data());
    } else {
      GqaAttention(ctx, il, h.data(), n_tok, position_, out.data());
    }
    for (size_t i = 0; i < x.size(); ++i) x[i] += out[i];
    // x += ffn(ffn_norm(x))
    for (int64_t t = 0; t < n_tok; ++t) {
      ops::RmsNorm(&x[t * D], static_cast<const float*>(l.ffn_norm.data), D, c.rms_eps, &h[t * D]);
    }
    FeedForward(ctx, il, h.data(), n_tok, out.data());
    for (size_t i = 0; i < x.size(); ++i) x[i] += out[i];
  }
  const int64_t n_out = all_logits ? n_tok : 1;
  std::vector<float> logits(static_cast<size_t>(n_out * c.n_vocab));  // [n_out x V]
  Logits(ctx, x.data(), n_tok, n_out, logits.data());
  position_ += n_tok;
  return logits;
}

}  // namespace moesplit::engine
