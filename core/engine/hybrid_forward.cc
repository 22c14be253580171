// The hybrid forward pass (hybrid_forward.h): upload, buffers, and one function per block.
#include "core/engine/hybrid_forward.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <vector>

#include "core/engine/forward.h"
#include "core/engine/hybrid_internal.h"

namespace moesplit::engine {

HybridForward::HybridForward(const ModelConfig& cfg, DenseBackend* backend,
                             moe::GroupedExperts* experts)
    : cfg_(cfg), backend_(backend), experts_(experts), rope_(RopeParamsFor(cfg)) {}

HybridForward::~HybridForward() = default;

StatusOr<std::unique_ptr<HybridForward>> HybridForward::Create(
    const ModelConfig& cfg, const ModelWeights& w, DenseBackend* backend,
    moe::GroupedExperts* experts, int64_t ctx_size, int64_t max_batch) {
  if (cfg.arch != ModelArch::kDeepseek2) {
    return UnimplementedError(
        "the hybrid CPU/GPU pass runs deepseek2 (MLA) models; this model's "
        "architecture runs on the CPU only (--device cpu)");
  }
  if (!cfg.mla_split) {
    return UnimplementedError(
        "the hybrid CPU/GPU pass needs the split attn_k_b / attn_v_b tensors; this file has the "
        "legacy attn_kv_b (re-convert it with a current llama.cpp convert_hf_to_gguf.py, or run "
        "--device cpu)");
  }
  MOESPLIT_CHECK(backend != nullptr && experts != nullptr, "HybridForward: null backend/experts");
  std::unique_ptr<HybridForward> f(new HybridForward(cfg, backend, experts));
  f->max_batch_ = std::max<int64_t>(1, max_batch);
  f->cpu_weights_ = &w;
  MOESPLIT_RETURN_IF_ERROR(f->Upload(w, ctx_size));
  MOESPLIT_RETURN_IF_ERROR(f->AllocBuffers(f->max_batch_));
  f->report_.push_back(StrCat("device: ", backend->Name()));
  f->report_.push_back(
      StrCat("on the device: attention, norms, router, shared experts, dense "
             "FFN, embeddings, output head (",
             f->weight_bytes_ >> 20, " MiB) + latent KV cache (", f->kv_bytes_ >> 20,
             " MiB f16); routed experts on the CPU"));
  return f;
}

StatusOr<DevMatrix> HybridForward::UploadMatrix(const TensorView& t, int64_t rows, int64_t cols) {
  if (!Present(t)) return DevMatrix{};
  MOESPLIT_CHECK(static_cast<uint64_t>(RowBytes(t.type, cols) * rows) == t.nbytes,
                 "UploadMatrix: ", t.name, " is not ", rows, " rows of ", cols);
  MOESPLIT_ASSIGN_OR_RETURN(void* d, backend_->AllocDevice(t.nbytes, std::string(t.name)));
  MOESPLIT_RETURN_IF_ERROR(backend_->Upload(d, t.data, t.nbytes));
  weight_bytes_ += t.nbytes;
  return DevMatrix{t.type, d, rows, cols};
}

StatusOr<const float*> HybridForward::UploadVector(const TensorView& t) {
  if (!Present(t)) return static_cast<const float*>(nullptr);
  MOESPLIT_CHECK(t.type == GgmlType::kF32, "UploadVector: ", t.name, " is not f32");
  MOESPLIT_ASSIGN_OR_RETURN(DevMatrix m, UploadMatrix(t, 1, t.NumElements()));
  return static_cast<const float*>(m.data);
}

Status HybridForward::Upload(const ModelWeights& w, int64_t ctx_size) {
  const ModelConfig& c = cfg_;
  const int64_t D = c.n_embd, H = c.n_head, L = c.kv_lora_rank, R = c.qk_rope;
  const int64_t hk = c.head_dim_k, hv = c.head_dim_v, Q = c.q_lora_rank, V = c.n_vocab;
  MOESPLIT_ASSIGN_OR_RETURN(token_embd_, UploadMatrix(w.token_embd, V, D));
  // A tied head is the embedding table: upload it once.
  if (w.output.data == w.token_embd.data) {
    output_ = token_embd_;
  } else {
    MOESPLIT_ASSIGN_OR_RETURN(output_, UploadMatrix(w.output, V, D));
  }
  MOESPLIT_ASSIGN_OR_RETURN(output_norm_, UploadVector(w.output_norm));
  layers_.resize(static_cast<size_t>(c.n_layer));
  for (int64_t il = 0; il < c.n_layer; ++il) {
    const LayerWeights& t = w.layers[static_cast<size_t>(il)];
    Layer& l = layers_[static_cast<size_t>(il)];
    MOESPLIT_ASSIGN_OR_RETURN(l.attn_norm, UploadVector(t.attn_norm));
    MOESPLIT_ASSIGN_OR_RETURN(l.ffn_norm, UploadVector(t.ffn_norm));
    MOESPLIT_ASSIGN_OR_RETURN(l.q_a_norm, UploadVector(t.attn_q_a_norm));
    MOESPLIT_ASSIGN_OR_RETURN(l.kv_a_norm, UploadVector(t.attn_kv_a_norm));
    MOESPLIT_ASSIGN_OR_RETURN(l.probs_b, UploadVector(t.exp_probs_b));
    MOESPLIT_ASSIGN_OR_RETURN(l.q_a, UploadMatrix(t.attn_q_a, Q, D));
    MOESPLIT_ASSIGN_OR_RETURN(l.q_b, UploadMatrix(t.attn_q_b, H * hk, Q));
    MOESPLIT_ASSIGN_OR_RETURN(l.q, UploadMatrix(t.attn_q, H * hk, D));
    MOESPLIT_ASSIGN_OR_RETURN(l.kv_a, UploadMatrix(t.attn_kv_a_mqa, L + R, D));
    MOESPLIT_ASSIGN_OR_RETURN(l.k_b, UploadMatrix(t.attn_k_b, H * L, c.qk_nope));
    l.k_b.rows = L;  // per head (HeadMatMul)
    MOESPLIT_ASSIGN_OR_RETURN(l.v_b, UploadMatrix(t.attn_v_b, H * hv, L));
    l.v_b.rows = hv;
    MOESPLIT_ASSIGN_OR_RETURN(l.attn_out, UploadMatrix(t.attn_output, D, H * hv));
    l.moe = c.IsMoeLayer(il);
    if (!l.moe) {
      MOESPLIT_ASSIGN_OR_RETURN(l.gate, UploadMatrix(t.ffn_gate, c.n_ff, D));
      MOESPLIT_ASSIGN_OR_RETURN(l.up, UploadMatrix(t.ffn_up, c.n_ff, D));
      MOESPLIT_ASSIGN_OR_RETURN(l.down, UploadMatrix(t.ffn_down, D, c.n_ff));
    } else {
      MOESPLIT_ASSIGN_OR_RETURN(l.gate_inp, UploadMatrix(t.ffn_gate_inp, c.n_expert, D));
      const int64_t Fs = c.n_ff_shexp;
      MOESPLIT_ASSIGN_OR_RETURN(l.sh_gate, UploadMatrix(t.ffn_gate_shexp, Fs, D));
      MOESPLIT_ASSIGN_OR_RETURN(l.sh_up, UploadMatrix(t.ffn_up_shexp, Fs, D));
      MOESPLIT_ASSIGN_OR_RETURN(l.sh_down, UploadMatrix(t.ffn_down_shexp, D, Fs));
    }
    // Latent cache: ctx rows of (L+R) f16 values (V3: 4096 x 576 x 2 B = 4.5 MiB a layer).
    const size_t cache_bytes = static_cast<size_t>(ctx_size * (L + R) * 2);
    MOESPLIT_ASSIGN_OR_RETURN(
        void* cache, backend_->AllocDevice(cache_bytes, StrCat("latent cache of layer ", il)));
    l.cache = {cache, ctx_size, L + R};
    kv_bytes_ += cache_bytes;
  }
  return Status::Ok();
}

Status HybridForward::AllocBuffers(int64_t B) {
  const ModelConfig& c = cfg_;
  const int64_t D = c.n_embd, H = c.n_head, L = c.kv_lora_rank, R = c.qk_rope;
  const int64_t k = std::max<int64_t>(c.n_expert_used, 1), E = std::max<int64_t>(c.n_expert, 1);
  const int64_t F = std::max({c.n_ff, c.n_ff_shexp, int64_t{1}});
  buf_ = std::make_unique<Buffers>();
  Buffers& b = *buf_;
  auto dev = [&](auto** p, int64_t n, const char* what) -> Status {
    MOESPLIT_ASSIGN_OR_RETURN(void* d, backend_->AllocDevice(static_cast<size_t>(n) * 4,
                                                             StrCat("activations (", what, ")")));
    *p = static_cast<std::remove_pointer_t<decltype(p)>>(d);
    return Status::Ok();
  };
  auto host = [&](auto** p, int64_t n, const char* what) -> Status {
    MOESPLIT_ASSIGN_OR_RETURN(void* d, backend_->AllocHost(static_cast<size_t>(n) * 4,
                                                           StrCat("host staging (", what, ")")));
    *p = static_cast<std::remove_pointer_t<decltype(p)>>(d);
    return Status::Ok();
  };
  MOESPLIT_RETURN_IF_ERROR(dev(&b.tokens, B, "tokens"));
  MOESPLIT_RETURN_IF_ERROR(dev(&b.pos, B, "positions"));
  MOESPLIT_RETURN_IF_ERROR(dev(&b.x, B * D, "x"));
  MOESPLIT_RETURN_IF_ERROR(dev(&b.h, B * D, "h"));
  MOESPLIT_RETURN_IF_ERROR(dev(&b.out, B * D, "out"));
  MOESPLIT_RETURN_IF_ERROR(dev(&b.qa, B * std::max<int64_t>(c.q_lora_rank, 1), "q_a"));
  MOESPLIT_RETURN_IF_ERROR(dev(&b.q, B * H * c.head_dim_k, "q"));
  MOESPLIT_RETURN_IF_ERROR(dev(&b.kv, B * (L + R), "kv"));
  MOESPLIT_RETURN_IF_ERROR(dev(&b.qf, B * H * (L + R), "absorbed q"));
  MOESPLIT_RETURN_IF_ERROR(dev(&b.o_lat, B * H * L, "latent output"));
  MOESPLIT_RETURN_IF_ERROR(dev(&b.o, B * H * c.head_dim_v, "attention output"));
  MOESPLIT_RETURN_IF_ERROR(dev(&b.ff_a, B * F, "ffn gate"));
  MOESPLIT_RETURN_IF_ERROR(dev(&b.ff_b, B * F, "ffn up"));
  MOESPLIT_RETURN_IF_ERROR(dev(&b.sh_a, B * F, "shared gate"));
  MOESPLIT_RETURN_IF_ERROR(dev(&b.sh_b, B * F, "shared up"));
  MOESPLIT_RETURN_IF_ERROR(dev(&b.sh_out, B * D, "shared out"));
  MOESPLIT_RETURN_IF_ERROR(dev(&b.router, B * E, "router"));
  MOESPLIT_RETURN_IF_ERROR(dev(&b.ids, B * k, "ids"));
  MOESPLIT_RETURN_IF_ERROR(dev(&b.weights, B * k, "weights"));
  MOESPLIT_RETURN_IF_ERROR(dev(&b.logits, B * c.n_vocab, "logits"));
  MOESPLIT_RETURN_IF_ERROR(host(&b.host_tokens, B, "tokens"));
  MOESPLIT_RETURN_IF_ERROR(host(&b.host_pos, B, "positions"));
  MOESPLIT_RETURN_IF_ERROR(host(&b.host_h, B * D, "expert input"));
  MOESPLIT_RETURN_IF_ERROR(host(&b.host_ids, B * k, "ids"));
  MOESPLIT_RETURN_IF_ERROR(host(&b.host_weights, B * k, "weights"));
  MOESPLIT_RETURN_IF_ERROR(host(&b.host_out, B * D, "expert output"));
  MOESPLIT_RETURN_IF_ERROR(host(&b.host_logits, B * c.n_vocab, "logits"));
  b.expert_ns.assign(static_cast<size_t>(c.n_layer), 0);
  b.expert_bytes.assign(static_cast<size_t>(c.n_layer), 0);
  return Status::Ok();
}

}  // namespace moesplit::engine
