// The hybrid forward pass (hybrid_forward.h): upload, buffers, and one function per block.
#include "core/engine/hybrid_forward.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <functional>
#include <vector>

#include "core/base/int_math.h"
#include "core/engine/forward.h"
#include "core/engine/hybrid_internal.h"
#include "core/engine/mla_split.h"

namespace moesplit::engine {

namespace {

MlaHeadDims MlaDims(const ModelConfig& c) {
  return {
      .n_head = c.n_head, .kv_lora = c.kv_lora_rank, .qk_nope = c.qk_nope, .v_head = c.head_dim_v};
}

}  // namespace

HybridForward::HybridForward(const ModelConfig& cfg, DenseBackend* backend,
                             moe::GroupedExperts* experts)
    : cfg_(cfg), backend_(backend), experts_(experts), rope_(RopeParamsFor(cfg)) {}

// Work still queued (host calls that run the CPU experts and write buf_) must not outlive this
// object or the experts; Eval drains the lanes on every return, so this is the last guard.
HybridForward::~HybridForward() {
  if (backend_ != nullptr) (void)backend_->Synchronize();
}

Status HybridForward::CheckModel(const ModelConfig& cfg) {
  if (cfg.arch != ModelArch::kDeepseek2) {
    return UnimplementedError(
        "the hybrid CPU/GPU pass runs deepseek2 (MLA) models; this model's "
        "architecture runs on the CPU only (--device cpu)");
  }
  // The legacy attn_kv_b layout runs too: Upload derives attn_k_b / attn_v_b (mla_split.h).
  return Status::Ok();
}

StatusOr<std::unique_ptr<HybridForward>> HybridForward::Create(
    const ModelConfig& cfg, const ModelWeights& w, DenseBackend* backend,
    moe::GroupedExperts* experts, int64_t ctx_size, int64_t max_batch,
    const std::vector<bool>& device_experts) {
  MOESPLIT_RETURN_IF_ERROR(CheckModel(cfg));
  MOESPLIT_CHECK(backend != nullptr && experts != nullptr, "HybridForward: null backend/experts");
  std::unique_ptr<HybridForward> f(new HybridForward(cfg, backend, experts));
  f->max_batch_ = std::max<int64_t>(1, max_batch);
  f->cpu_weights_ = &w;
  MOESPLIT_CHECK(
      device_experts.empty() || device_experts.size() == static_cast<size_t>(cfg.n_layer),
      "HybridForward: device_experts has ", device_experts.size(), " entries");
  std::string vram_layers;
  // Twice: first only the backend's checks of every matrix (CheckWeight), then the uploads.
  for (const bool checking : {true, false}) {
    f->checking_ = checking;
    MOESPLIT_RETURN_IF_ERROR(f->Upload(w, ctx_size));
    for (size_t il = 0; il < device_experts.size(); ++il) {
      if (!device_experts[il] || !cfg.IsMoeLayer(static_cast<int64_t>(il))) continue;
      MOESPLIT_RETURN_IF_ERROR(f->UploadExperts(w.layers[il], f->layers_[il]));
      if (checking) continue;
      if (!vram_layers.empty()) vram_layers += ',';
      vram_layers += std::to_string(il);
      ++f->device_expert_layers_;
    }
  }
  MOESPLIT_RETURN_IF_ERROR(f->AllocBuffers(f->max_batch_, f->device_expert_layers_ > 0));
  f->report_.push_back(StrCat("device: ", backend->Name()));
  f->report_.push_back(
      StrCat("on the device: attention, norms, router, shared experts, dense "
             "FFN, embeddings, output head (",
             f->weight_bytes_ >> 20, " MiB) + latent KV cache (", f->kv_bytes_ >> 20, " MiB f16)"));
  if (f->device_expert_layers_ > 0) {
    f->report_.push_back(StrCat("routed experts in device memory: ", f->device_expert_layers_,
                                " layers (blk ", vram_layers, "), ", f->expert_bytes_ >> 20,
                                " MiB; the other MoE layers' experts on the CPU"));
  } else {
    f->report_.push_back("routed experts: all on the CPU");
  }
  if (!cfg.mla_split) {  // legacy attn_kv_b: what Upload derived (mla_split.h)
    uint64_t derived = 0;
    std::string types;  // the derived types, each once ("f16")
    for (const LayerWeights& l : w.layers) {
      derived += MlaSplitBytes(l.attn_kv_b.type, MlaDims(cfg));
      const std::string t = TypeName(MlaSplitType(l.attn_kv_b.type));
      if (types.find(t) == std::string::npos) types += (types.empty() ? "" : "/") + t;
    }
    f->report_.push_back(StrCat("attn_k_b / attn_v_b: derived at load from the legacy attn_kv_b (",
                                types, ", ", derived >> 20,
                                " MiB on the device, counted above; attn_kv_b stays on the CPU)"));
  }
  return f;
}

StatusOr<DevMatrix> HybridForward::UploadMatrix(const TensorView& t, int64_t rows, int64_t cols) {
  if (!Present(t)) return DevMatrix{};
  MOESPLIT_RETURN_IF_ERROR(backend_->CheckWeight(std::string(t.name), t.type, cols));
  return UploadBytes(t, rows, cols);
}

StatusOr<DevMatrix> HybridForward::UploadBytes(const TensorView& t, int64_t rows, int64_t cols) {
  MOESPLIT_CHECK(static_cast<uint64_t>(RowBytes(t.type, cols) * rows) == t.nbytes,
                 "UploadMatrix: ", t.name, " is not ", rows, " rows of ", cols);
  if (checking_) return DevMatrix{t.type, nullptr, rows, cols};
  MOESPLIT_ASSIGN_OR_RETURN(void* d, backend_->AllocDevice(t.nbytes, std::string(t.name)));
  MOESPLIT_RETURN_IF_ERROR(backend_->Upload(d, t.data, t.nbytes));
  weight_bytes_ += t.nbytes;
  return DevMatrix{t.type, d, rows, cols};
}

Status HybridForward::UploadExperts(const LayerWeights& t, HybridLayer& l) {
  const ModelConfig& c = cfg_;
  const int64_t D = c.n_embd, Fe = c.n_ff_exp, E = c.n_expert;
  const uint64_t before = weight_bytes_;
  MOESPLIT_ASSIGN_OR_RETURN(l.ex_gate, UploadMatrix(t.ffn_gate_exps, E * Fe, D));
  MOESPLIT_ASSIGN_OR_RETURN(l.ex_up, UploadMatrix(t.ffn_up_exps, E * Fe, D));
  MOESPLIT_ASSIGN_OR_RETURN(l.ex_down, UploadMatrix(t.ffn_down_exps, E * D, Fe));
  l.ex_gate.rows = l.ex_up.rows = Fe;  // per expert (ExpertMatMul)
  l.ex_down.rows = D;
  expert_bytes_ += weight_bytes_ - before;
  weight_bytes_ = before;
  return Status::Ok();
}

StatusOr<const float*> HybridForward::UploadVector(const TensorView& t) {
  if (!Present(t)) return static_cast<const float*>(nullptr);
  MOESPLIT_CHECK(t.type == GgmlType::kF32, "UploadVector: ", t.name, " is not f32");
  MOESPLIT_ASSIGN_OR_RETURN(DevMatrix m, UploadBytes(t, 1, t.NumElements()));
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
  kv_blocks_ = CeilDiv(std::max<int64_t>(ctx_size, 1), kKvBlockSize);
  const int64_t n_rows = kv_blocks_ * kKvBlockSize;
  layers_.resize(static_cast<size_t>(c.n_layer));
  for (int64_t il = 0; il < c.n_layer; ++il) {
    const LayerWeights& t = w.layers[static_cast<size_t>(il)];
    HybridLayer& l = layers_[static_cast<size_t>(il)];
    MOESPLIT_ASSIGN_OR_RETURN(l.attn_norm, UploadVector(t.attn_norm));
    MOESPLIT_ASSIGN_OR_RETURN(l.ffn_norm, UploadVector(t.ffn_norm));
    MOESPLIT_ASSIGN_OR_RETURN(l.q_a_norm, UploadVector(t.attn_q_a_norm));
    MOESPLIT_ASSIGN_OR_RETURN(l.kv_a_norm, UploadVector(t.attn_kv_a_norm));
    MOESPLIT_ASSIGN_OR_RETURN(l.probs_b, UploadVector(t.exp_probs_b));
    MOESPLIT_ASSIGN_OR_RETURN(l.q_a, UploadMatrix(t.attn_q_a, Q, D));
    MOESPLIT_ASSIGN_OR_RETURN(l.q_b, UploadMatrix(t.attn_q_b, H * hk, Q));
    MOESPLIT_ASSIGN_OR_RETURN(l.q, UploadMatrix(t.attn_q, H * hk, D));
    MOESPLIT_ASSIGN_OR_RETURN(l.kv_a, UploadMatrix(t.attn_kv_a_mqa, L + R, D));
    if (c.mla_split) {
      MOESPLIT_ASSIGN_OR_RETURN(l.k_b, UploadMatrix(t.attn_k_b, H * L, c.qk_nope));
      MOESPLIT_ASSIGN_OR_RETURN(l.v_b, UploadMatrix(t.attn_v_b, H * hv, L));
    } else {  // legacy attn_kv_b: k_b / v_b derived here, one layer's bytes alive at a time
      MlaSplit split(t.attn_kv_b, MlaDims(c));
      MOESPLIT_RETURN_IF_ERROR(split.CheckSource());
      MOESPLIT_RETURN_IF_ERROR(
          backend_->CheckWeight(std::string(split.k_b().name), split.type(), c.qk_nope));
      MOESPLIT_RETURN_IF_ERROR(
          backend_->CheckWeight(std::string(split.v_b().name), split.type(), L));
      if (!checking_) MOESPLIT_RETURN_IF_ERROR(split.Derive());
      MOESPLIT_ASSIGN_OR_RETURN(l.k_b, UploadBytes(split.k_b(), H * L, c.qk_nope));
      MOESPLIT_ASSIGN_OR_RETURN(l.v_b, UploadBytes(split.v_b(), H * hv, L));
    }
    l.k_b.rows = L;  // per head (HeadMatMul)
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
    if (checking_) continue;
    // Latent cache: ctx rows of (L+R) f16 values (V3: 4096 x 576 x 2 B = 4.5 MiB a layer), whole
    // blocks of kKvBlockSize rows (Step's block tables).
    const size_t cache_bytes = static_cast<size_t>(n_rows * (L + R) * 2);
    MOESPLIT_ASSIGN_OR_RETURN(
        void* cache, backend_->AllocDevice(cache_bytes, StrCat("latent cache of layer ", il)));
    l.cache = {cache, n_rows, L + R};
    kv_bytes_ += cache_bytes;
  }
  if (checking_) return Status::Ok();
  // One more layer's worth: where a sequence whose blocks are not consecutive is gathered
  // before its attention (reused by every layer and sequence: the main lane is in order).
  MOESPLIT_ASSIGN_OR_RETURN(
      gather_, backend_->AllocDevice(static_cast<size_t>(n_rows * (L + R) * 2),
                                     "latent cache gather scratch"));
  return Status::Ok();
}

namespace {

// One activation buffer: `floats` 4-byte values (f32 or int32), device or host staging memory.
struct BufferSpec {
  int64_t floats;
  const char* what;
  bool host;
  std::function<void(void*)> set;  // stores the allocation in its Buffers field
};

template <typename T>
std::function<void(void*)> Into(T** field) {
  return [field](void* p) { *field = static_cast<T*>(p); };
}

// Every buffer of a chunk of B tokens (hybrid_internal.h gives the shapes); the routed expert
// scratch only when some layer's experts are in device memory.
std::vector<BufferSpec> BufferSpecs(const ModelConfig& c, int64_t B, bool device_experts,
                                    HybridBuffers& b) {
  const int64_t D = c.n_embd, H = c.n_head, L = c.kv_lora_rank, R = c.qk_rope;
  const int64_t k = std::max<int64_t>(c.n_expert_used, 1), E = std::max<int64_t>(c.n_expert, 1);
  const int64_t F = std::max({c.n_ff, c.n_ff_shexp, int64_t{1}}), V = c.n_vocab;
  std::vector<BufferSpec> v = {
      {B, "tokens", false, Into(&b.tokens)},
      {B, "positions", false, Into(&b.pos)},
      {B * D, "x", false, Into(&b.x)},
      {B * D, "h", false, Into(&b.h)},
      {B * D, "out", false, Into(&b.out)},
      {B * std::max<int64_t>(c.q_lora_rank, 1), "q_a", false, Into(&b.qa)},
      {B * H * c.head_dim_k, "q", false, Into(&b.q)},
      {B * (L + R), "kv", false, Into(&b.kv)},
      {B * H * (L + R), "absorbed q", false, Into(&b.qf)},
      {B * H * L, "latent output", false, Into(&b.o_lat)},
      {B * H * c.head_dim_v, "attention output", false, Into(&b.o)},
      {B * F, "ffn gate", false, Into(&b.ff_a)},
      {B * F, "ffn up", false, Into(&b.ff_b)},
      {B * F, "shared gate", false, Into(&b.sh_a)},
      {B * F, "shared up", false, Into(&b.sh_b)},
      {B * D, "shared out", false, Into(&b.sh_out)},
      {B * E, "router", false, Into(&b.router)},
      {B * k, "ids", false, Into(&b.ids)},
      {B * k, "weights", false, Into(&b.weights)},
      {B * V, "logits", false, Into(&b.logits)},
      {B, "tokens", true, Into(&b.host_tokens)},
      {B, "positions", true, Into(&b.host_pos)},
      {B * D, "expert input", true, Into(&b.host_h)},
      {B * k, "ids", true, Into(&b.host_ids)},
      {B * k, "weights", true, Into(&b.host_weights)},
      {B * D, "expert output", true, Into(&b.host_out)},
      {B * V, "logits", true, Into(&b.host_logits)},
  };
  if (device_experts) {
    const int64_t Fe = std::max<int64_t>(c.n_ff_exp, 1);
    v.push_back({B * k * Fe, "expert gate", false, Into(&b.ex_a)});
    v.push_back({B * k * Fe, "expert up", false, Into(&b.ex_b)});
    v.push_back({B * k * D, "expert out", false, Into(&b.ex_y)});
  }
  return v;
}

}  // namespace

uint64_t HybridForward::DeviceBytesNeeded(const ModelConfig& c, const ModelWeights& w,
                                          int64_t ctx_size, int64_t max_batch,
                                          bool device_experts) {
  uint64_t bytes = BytesOf(w.token_embd) + BytesOf(w.output_norm);
  if (w.output.data != w.token_embd.data) bytes += BytesOf(w.output);
  for (const LayerWeights& l : w.layers) {
    for (const TensorView* t :
         {&l.attn_norm, &l.ffn_norm, &l.attn_q_a_norm, &l.attn_kv_a_norm, &l.exp_probs_b,
          &l.attn_q_a, &l.attn_q_b, &l.attn_q, &l.attn_kv_a_mqa, &l.attn_k_b, &l.attn_v_b,
          &l.attn_output, &l.ffn_gate, &l.ffn_up, &l.ffn_down, &l.ffn_gate_inp, &l.ffn_gate_shexp,
          &l.ffn_up_shexp, &l.ffn_down_shexp}) {
      bytes += BytesOf(*t);
    }
    // Legacy files: attn_kv_b stays on the CPU; the k_b / v_b derived from it are uploaded.
    if (!c.mla_split && Present(l.attn_kv_b)) bytes += MlaSplitBytes(l.attn_kv_b.type, MlaDims(c));
  }
  // The latent caches (whole blocks) and the gather scratch: n_layer + 1 of them.
  const int64_t n_rows = CeilDiv(std::max<int64_t>(ctx_size, 1), kKvBlockSize) * kKvBlockSize;
  bytes += static_cast<uint64_t>((c.n_layer + 1) * n_rows * (c.kv_lora_rank + c.qk_rope) * 2);
  HybridBuffers dummy;
  for (const BufferSpec& s :
       BufferSpecs(c, std::max<int64_t>(max_batch, 1), device_experts, dummy)) {
    if (!s.host) bytes += static_cast<uint64_t>(s.floats) * 4;
  }
  return bytes;
}

uint64_t HybridForward::ExpertBytes(const ModelWeights& w, int64_t il) {
  const LayerWeights& l = w.layers[static_cast<size_t>(il)];
  return BytesOf(l.ffn_gate_exps) + BytesOf(l.ffn_up_exps) + BytesOf(l.ffn_down_exps);
}

Status HybridForward::AllocBuffers(int64_t B, bool device_experts) {
  buf_ = std::make_unique<HybridBuffers>();
  for (const BufferSpec& s : BufferSpecs(cfg_, B, device_experts, *buf_)) {
    const size_t bytes = static_cast<size_t>(s.floats) * 4;
    MOESPLIT_ASSIGN_OR_RETURN(
        void* p, s.host ? backend_->AllocHost(bytes, StrCat("host staging (", s.what, ")"))
                        : backend_->AllocDevice(bytes, StrCat("activations (", s.what, ")")));
    s.set(p);
  }
  buf_->expert_ns.assign(static_cast<size_t>(cfg_.n_layer), 0);
  buf_->expert_bytes.assign(static_cast<size_t>(cfg_.n_layer), 0);
  return Status::Ok();
}

}  // namespace moesplit::engine
