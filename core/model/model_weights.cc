#include "core/model/model_weights.h"

#include <initializer_list>
#include <string>

#include "core/base/status.h"
#include "cpu_kernels/gemv/gemv.h"
#include "cpu_kernels/quant/quant.h"

namespace moesplit {

namespace {

// Looks tensors up and collects every problem instead of stopping at the first.
class Resolver {
 public:
  explicit Resolver(const gguf::GgufFile& f) : f_(f) {}

  // Required tensor with exactly the shape `ne` (ggml order).
  TensorView Need(const std::string& name, std::initializer_list<int64_t> ne) {
    return Get(name, ne, /*required=*/true);
  }
  // Optional: absent is fine, present must have the shape.
  TensorView Maybe(const std::string& name, std::initializer_list<int64_t> ne) {
    return Get(name, ne, /*required=*/false);
  }
  bool Has(const std::string& name) const { return f_.FindTensor(name) != nullptr; }

  Status Finish() const {
    if (problems_.empty()) return Status::Ok();
    std::string msg = StrCat(f_.path(), ": ", n_problems_, " tensor problem(s) for a ",
                             f_.architecture(), " model:");
    msg += problems_;
    // Tensors of a type moesplit does not read are no fault of the file: say so instead of
    // sending the user to re-convert it. The converter hint is for missing or misshapen tensors.
    if (n_type_problems_ > 0) {
      msg += StrCat("\n(", unsupported_types_,
                    ": not supported by moesplit yet; a file quantized to another type, e.g. "
                    "Q4_K_M, Q3_K_M, Q2_K, IQ4_XS or Q8_0, runs)");
    }
    if (n_problems_ > n_type_problems_) {
      msg += "\n(is the file complete and converted by llama.cpp's convert_hf_to_gguf.py?)";
    }
    return InvalidArgumentError(msg);
  }

 private:
  TensorView Get(const std::string& name, std::initializer_list<int64_t> ne, bool required) {
    const gguf::TensorInfo* t = f_.FindTensor(name);
    if (t == nullptr) {
      if (required) Problem(StrCat("missing ", name));
      return TensorView{};
    }
    int i = 0;
    bool ok = true;
    for (int64_t n : ne) ok = ok && t->ne[i++] == n;
    for (; i < kMaxDims; ++i) ok = ok && t->ne[i] == 1;
    if (!ok) {
      Problem(StrCat(name, " has shape ", Shape(t->ne), ", expected ", Shape(ne)));
      return TensorView{};
    }
    // 1-D tensors (norms, biases) are read as floats directly.
    if (ne.size() == 1 && t->type != GgmlType::kF32) {
      Problem(StrCat(name, " is ", TypeName(t->type), "; 1-D tensors must be f32"));
      return TensorView{};
    }
    // Decode-only types (quant.h: no GPU kernel) are readable by `inspect`; those with CPU
    // kernels (the seven lattice types and MXFP4: gemv_internal.h) run, any other is refused.
    GgmlType act;
    const bool no_kernel = quant::IsDecodeOnly(t->type) && !gemv::ActivationTypeFor(t->type, &act);
    if (!quant::CanDequantize(t->type) || no_kernel) {
      Problem(StrCat(name, " has type ", TypeName(t->type),
                     no_kernel
                         ? ", which moesplit cannot compute with yet (inspect --values prints it)"
                         : ", which moesplit cannot read yet"));
      ++n_type_problems_;
      const std::string type = TypeName(t->type);
      if (unsupported_types_.find(type) == std::string::npos) {
        unsupported_types_ += (unsupported_types_.empty() ? "" : ", ") + type;
      }
      return TensorView{};
    }
    return t->View();
  }
  template <typename Ne>
  static std::string Shape(const Ne& ne) {
    std::string s = "[";
    int n = 0;
    for (int64_t x : ne) s += (n++ ? ", " : "") + std::to_string(x);
    return s + "]";
  }
  void Problem(const std::string& p) {
    ++n_problems_;
    if (n_problems_ <= 40) problems_ += "\n  " + p;
    if (n_problems_ == 41) problems_ += "\n  ...";
  }

  const gguf::GgufFile& f_;
  std::string problems_;
  int n_problems_ = 0;
  int n_type_problems_ = 0;        // problems that are only an unsupported tensor type
  std::string unsupported_types_;  // their type names, comma-separated
};

std::string Blk(int64_t il, const char* name, const char* suffix = "weight") {
  return StrCat("blk.", il, ".", name, ".", suffix);
}

void ResolveMla(Resolver& r, const ModelConfig& c, int64_t il, LayerWeights* l) {
  const int64_t D = c.n_embd, H = c.n_head, L = c.kv_lora_rank;
  const int64_t nope = c.qk_nope, rope = c.qk_rope, v = c.head_dim_v;
  if (c.q_lora_rank > 0) {
    l->attn_q_a = r.Need(Blk(il, "attn_q_a"), {D, c.q_lora_rank});
    l->attn_q_a_norm = r.Need(Blk(il, "attn_q_a_norm"), {c.q_lora_rank});
    l->attn_q_b = r.Need(Blk(il, "attn_q_b"), {c.q_lora_rank, H * (nope + rope)});
  } else {
    l->attn_q = r.Need(Blk(il, "attn_q"), {D, H * (nope + rope)});
  }
  l->attn_kv_a_mqa = r.Need(Blk(il, "attn_kv_a_mqa"), {D, L + rope});
  l->attn_kv_a_norm = r.Need(Blk(il, "attn_kv_a_norm"), {L});
  if (c.mla_split) {
    l->attn_k_b = r.Need(Blk(il, "attn_k_b"), {nope, L, H});
    l->attn_v_b = r.Need(Blk(il, "attn_v_b"), {L, v, H});
  } else {
    l->attn_kv_b = r.Need(Blk(il, "attn_kv_b"), {L, H * (nope + v)});
  }
  l->attn_output = r.Need(Blk(il, "attn_output"), {H * v, D});
}

void ResolveGqa(Resolver& r, const ModelConfig& c, int64_t il, LayerWeights* l) {
  const int64_t D = c.n_embd, hd = c.head_dim_k;
  l->attn_q = r.Need(Blk(il, "attn_q"), {D, c.n_head * hd});
  l->attn_k = r.Need(Blk(il, "attn_k"), {D, c.n_head_kv * hd});
  l->attn_v = r.Need(Blk(il, "attn_v"), {D, c.n_head_kv * c.head_dim_v});
  l->attn_output = r.Need(Blk(il, "attn_output"), {c.n_head * c.head_dim_v, D});
  if (c.arch == ModelArch::kQwen3Moe) {
    l->attn_q_norm = r.Need(Blk(il, "attn_q_norm"), {hd});
    l->attn_k_norm = r.Need(Blk(il, "attn_k_norm"), {hd});
  }
}

void ResolveFfn(Resolver& r, const ModelConfig& c, int64_t il, LayerWeights* l) {
  const int64_t D = c.n_embd;
  if (!c.IsMoeLayer(il)) {
    l->ffn_gate = r.Need(Blk(il, "ffn_gate"), {D, c.n_ff});
    l->ffn_up = r.Need(Blk(il, "ffn_up"), {D, c.n_ff});
    l->ffn_down = r.Need(Blk(il, "ffn_down"), {c.n_ff, D});
    return;
  }
  const int64_t E = c.n_expert, F = c.n_ff_exp;
  l->ffn_gate_inp = r.Need(Blk(il, "ffn_gate_inp"), {D, E});
  l->exp_probs_b = r.Maybe(Blk(il, "exp_probs_b", "bias"), {E});
  l->ffn_gate_exps = r.Need(Blk(il, "ffn_gate_exps"), {D, F, E});
  l->ffn_up_exps = r.Need(Blk(il, "ffn_up_exps"), {D, F, E});
  l->ffn_down_exps = r.Need(Blk(il, "ffn_down_exps"), {F, D, E});
  if (c.n_expert_shared > 0) {
    const int64_t S = c.n_ff_shexp;
    l->ffn_gate_shexp = r.Need(Blk(il, "ffn_gate_shexp"), {D, S});
    l->ffn_up_shexp = r.Need(Blk(il, "ffn_up_shexp"), {D, S});
    l->ffn_down_shexp = r.Need(Blk(il, "ffn_down_shexp"), {S, D});
  }
}

}  // namespace

StatusOr<ModelWeights> ModelWeights::Resolve(const gguf::GgufFile& file, const ModelConfig& c) {
  Resolver r(file);
  ModelWeights w;
  const int64_t D = c.n_embd;
  w.token_embd = r.Need("token_embd.weight", {D, c.n_vocab});
  w.output_norm = r.Need("output_norm.weight", {D});
  w.output = r.Has("output.weight") ? r.Need("output.weight", {D, c.n_vocab}) : w.token_embd;
  w.layers.resize(static_cast<size_t>(c.n_layer));
  for (int64_t il = 0; il < c.n_layer; ++il) {
    LayerWeights& l = w.layers[static_cast<size_t>(il)];
    l.attn_norm = r.Need(Blk(il, "attn_norm"), {D});
    l.ffn_norm = r.Need(Blk(il, "ffn_norm"), {D});
    if (c.arch == ModelArch::kDeepseek2) {
      ResolveMla(r, c, il, &l);
    } else {
      ResolveGqa(r, c, il, &l);
    }
    ResolveFfn(r, c, il, &l);
  }
  MOESPLIT_RETURN_IF_ERROR(r.Finish());
  return w;
}

}  // namespace moesplit
