// The hybrid forward pass, block by block (hybrid_forward.h). Every step is queued on the
// backend's lanes; the host waits once per chunk, for the logits. D = n_embd, H = n_head,
// L = kv_lora, R = qk_rope, hk = nope + R, hv = v head width, T = tokens of the chunk.
#include <algorithm>
#include <chrono>
#include <cstring>
#include <vector>

#include "core/engine/forward.h"
#include "core/engine/hybrid_forward.h"
#include "core/engine/hybrid_internal.h"

namespace moesplit::engine {

Status HybridForward::Eval(std::span<const int32_t> tokens, int64_t pos0, int64_t n_out,
                           float* logits, Profile* prof) {
  const int64_t n = static_cast<int64_t>(tokens.size());
  MOESPLIT_CHECK(n_out >= 1 && n_out <= n, "HybridForward::Eval: n_out ", n_out, " of ", n);
  // Chunks of max_batch tokens; logits of the last n_out tokens, which may span chunks.
  for (int64_t t0 = 0; t0 < n; t0 += max_batch_) {
    const int64_t nt = std::min(max_batch_, n - t0);
    const int64_t first_out = n - n_out;  // index of the first token whose logits are wanted
    const int64_t out0 = std::max(first_out, t0);
    const int64_t chunk_out = std::max<int64_t>(0, t0 + nt - out0);
    float* dst = chunk_out > 0 ? logits + (out0 - first_out) * cfg_.n_vocab : nullptr;
    const Status s = EvalChunk(tokens.subspan(static_cast<size_t>(t0), static_cast<size_t>(nt)),
                               pos0 + t0, chunk_out, dst, prof);
    if (!s.ok()) {
      // What was queued before the failure (copies, the host calls running the CPU experts on
      // the shared pools and writing the staging buffers) must finish before the caller goes
      // on, retries, or destroys the session.
      (void)backend_->Synchronize();
      return s;
    }
  }
  return Status::Ok();
}

Status HybridForward::EvalChunk(std::span<const int32_t> tokens, int64_t pos0, int64_t n_out,
                                float* logits, Profile* prof) {
  const ModelConfig& c = cfg_;
  DenseBackend& be = *backend_;
  HybridBuffers& b = *buf_;
  const int64_t T = static_cast<int64_t>(tokens.size()), D = c.n_embd, V = c.n_vocab;
  const auto t0 = std::chrono::steady_clock::now();
  std::fill(b.expert_ns.begin(), b.expert_ns.end(), 0);
  std::fill(b.expert_bytes.begin(), b.expert_bytes.end(), 0);
  for (int64_t t = 0; t < T; ++t) {
    b.host_tokens[t] = tokens[static_cast<size_t>(t)];
    b.host_pos[t] = static_cast<int32_t>(pos0 + t);
  }
  const size_t ids_bytes = static_cast<size_t>(T) * 4;
  MOESPLIT_RETURN_IF_ERROR(be.CopyFromHost(Lane::kMain, b.tokens, b.host_tokens, ids_bytes));
  MOESPLIT_RETURN_IF_ERROR(be.CopyFromHost(Lane::kMain, b.pos, b.host_pos, ids_bytes));
  traffic_.from_host += 2 * ids_bytes;
  MOESPLIT_RETURN_IF_ERROR(be.GetRows(Lane::kMain, token_embd_, b.tokens, T, b.x));
  for (int64_t il = 0; il < c.n_layer; ++il) {
    const HybridLayer& l = layers_[static_cast<size_t>(il)];
    // x += attention(attn_norm(x))
    MOESPLIT_RETURN_IF_ERROR(be.RmsNorm(Lane::kMain, b.x, D, l.attn_norm, T, D, c.rms_eps, b.h, D));
    MOESPLIT_RETURN_IF_ERROR(Attention(l, T, pos0));
    MOESPLIT_RETURN_IF_ERROR(be.Add(Lane::kMain, b.out, b.x, T * D));
    // x += ffn(ffn_norm(x))
    MOESPLIT_RETURN_IF_ERROR(be.RmsNorm(Lane::kMain, b.x, D, l.ffn_norm, T, D, c.rms_eps, b.h, D));
    MOESPLIT_RETURN_IF_ERROR(l.moe ? MoeFfn(l, il, T, prof) : DenseFfn(l, T));
  }
  if (n_out > 0) {
    // logits [n_out x V] = output(output_norm(x[T - n_out ..]))
    const float* x_last = b.x + (T - n_out) * D;
    MOESPLIT_RETURN_IF_ERROR(
        be.RmsNorm(Lane::kMain, x_last, D, output_norm_, n_out, D, c.rms_eps, b.h, D));
    MOESPLIT_RETURN_IF_ERROR(be.MatMul(Lane::kMain, output_, b.h, n_out, b.logits));
    const size_t bytes = static_cast<size_t>(n_out * V) * 4;
    MOESPLIT_RETURN_IF_ERROR(be.CopyToHost(Lane::kMain, b.host_logits, b.logits, bytes));
    traffic_.to_host += bytes;
  }
  MOESPLIT_RETURN_IF_ERROR(be.Synchronize());
  if (n_out > 0) std::memcpy(logits, b.host_logits, static_cast<size_t>(n_out * V) * 4);
  if (prof != nullptr) {
    const uint64_t total = NsSince(t0);
    uint64_t experts = 0;
    PhaseTotals& e = (*prof)[Phase::kCpuExperts];
    for (int64_t il = 0; il < c.n_layer; ++il) {
      if (!layers_[static_cast<size_t>(il)].moe) continue;
      experts += b.expert_ns[static_cast<size_t>(il)];
      e.bytes += b.expert_bytes[static_cast<size_t>(il)];
      ++e.calls;
    }
    e.ns += experts;
    PhaseTotals& d = (*prof)[Phase::kDevice];
    d.ns += total > experts ? total - experts : 0;
    ++d.calls;
  }
  return Status::Ok();
}

// MLA in the absorbed form (forward_mla.cc, same maths) on b.h [T x D] -> b.out [T x D]:
//   q [T x H*hk] = q_b(norm(q_a h)) or q h;  kv [T x (L+R)] = kv_a h, c normed, k_pe roped
//   cache rows pos0.. = kv;  qf[t, h] = [W_kb[h] q_nope (L), roped q_pe (R)]
//   o_lat [T x H x L] = attention over the cache;  o [T x H*hv] = W_vb[h] o_lat;  out = W_o o
Status HybridForward::Attention(const HybridLayer& l, int64_t T, int64_t pos0) {
  const ModelConfig& c = cfg_;
  DenseBackend& be = *backend_;
  HybridBuffers& b = *buf_;
  const Lane m = Lane::kMain;
  const int64_t H = c.n_head, L = c.kv_lora_rank, R = c.qk_rope, W = L + R;
  const int64_t hk = c.head_dim_k, hv = c.head_dim_v, nope = c.qk_nope, Q = c.q_lora_rank;
  if (Q > 0) {
    MOESPLIT_RETURN_IF_ERROR(be.MatMul(m, l.q_a, b.h, T, b.qa));
    MOESPLIT_RETURN_IF_ERROR(be.RmsNorm(m, b.qa, Q, l.q_a_norm, T, Q, c.rms_eps, b.qa, Q));
    MOESPLIT_RETURN_IF_ERROR(be.MatMul(m, l.q_b, b.qa, T, b.q));
  } else {
    MOESPLIT_RETURN_IF_ERROR(be.MatMul(m, l.q, b.h, T, b.q));
  }
  MOESPLIT_RETURN_IF_ERROR(be.MatMul(m, l.kv_a, b.h, T, b.kv));
  MOESPLIT_RETURN_IF_ERROR(be.RmsNorm(m, b.kv, W, l.kv_a_norm, T, L, c.rms_eps, b.kv, W));
  // k_pe: the last R values of each [L+R] row (one "head" of width W); q_pe: of each head.
  MOESPLIT_RETURN_IF_ERROR(be.Rope(m, rope_, b.pos, T, 1, W, b.kv + L));
  MOESPLIT_RETURN_IF_ERROR(be.Rope(m, rope_, b.pos, T, H, hk, b.q + nope));
  MOESPLIT_RETURN_IF_ERROR(be.AppendLatent(m, b.kv, T, pos0, l.cache));
  // qf[t, h, 0..L) = W_kb[h] q_nope[t, h]: per head L rows of nope.
  MOESPLIT_RETURN_IF_ERROR(be.HeadMatMul(m, l.k_b, H, b.q, H * hk, hk, T, b.qf, H * W, W));
  // qf[t, h, L..W) = q_pe[t, h]: T*H rows of R floats.
  MOESPLIT_RETURN_IF_ERROR(be.Copy2D(m, b.qf + L, W * 4, b.q + nope, hk * 4, R * 4, T * H));
  const DevMlaParams p{
      .n_tok = T, .n_head = H, .latent = L, .rope = R, .pos0 = pos0, .scale = c.kq_scale};
  MOESPLIT_RETURN_IF_ERROR(be.MlaAttention(m, p, b.qf, l.cache, b.o_lat));
  // o[t, h, 0..hv) = W_vb[h] o_lat[t, h]: per head hv rows of L.
  MOESPLIT_RETURN_IF_ERROR(be.HeadMatMul(m, l.v_b, H, b.o_lat, H * L, L, T, b.o, H * hv, hv));
  return be.MatMul(m, l.attn_out, b.o, T, b.out);
}

// y [T x D] = down(silu(gate h) * up h) on `lane`, with a, b [T x F] as scratch: the dense FFN
// (main lane) and the shared expert (side lane).
Status HybridForward::SwiGluFfn(Lane lane, const DevMatrix& gate, const DevMatrix& up,
                                const DevMatrix& down, int64_t T, float* a, float* b, float* y) {
  DenseBackend& be = *backend_;
  const float* h = buf_->h;
  MOESPLIT_RETURN_IF_ERROR(be.MatMul(lane, gate, h, T, a));
  MOESPLIT_RETURN_IF_ERROR(be.MatMul(lane, up, h, T, b));
  MOESPLIT_RETURN_IF_ERROR(be.SwiGlu(lane, a, b, T * gate.rows));
  return be.MatMul(lane, down, a, T, y);
}

// x += down(silu(gate h) * up h) on the main lane.
Status HybridForward::DenseFfn(const HybridLayer& l, int64_t T) {
  HybridBuffers& b = *buf_;
  MOESPLIT_RETURN_IF_ERROR(SwiGluFfn(Lane::kMain, l.gate, l.up, l.down, T, b.ff_a, b.ff_b, b.out));
  return backend_->Add(Lane::kMain, b.out, b.x, T * cfg_.n_embd);
}

// x += routed experts (CPU) + shared expert (device side lane) of h [T x D].
Status HybridForward::MoeFfn(const HybridLayer& l, int64_t il, int64_t T, Profile* prof) {
  const ModelConfig& c = cfg_;
  DenseBackend& be = *backend_;
  HybridBuffers& b = *buf_;
  const Lane m = Lane::kMain;
  const int64_t D = c.n_embd, k = c.n_expert_used;
  MOESPLIT_RETURN_IF_ERROR(be.MatMul(m, l.gate_inp, b.h, T, b.router));
  MOESPLIT_RETURN_IF_ERROR(be.Route(m, RouterFor(c), b.router, l.probs_b, T, b.ids, b.weights));
  const bool shared = l.sh_gate.data != nullptr;
  if (l.ex_gate.data != nullptr) {  // routed experts in VRAM: no bus traffic
    if (shared) MOESPLIT_RETURN_IF_ERROR(be.SideWaitsForMain());
    MOESPLIT_RETURN_IF_ERROR(SharedExpert(l, T));
    MOESPLIT_RETURN_IF_ERROR(DeviceExperts(l, T));
    if (shared) MOESPLIT_RETURN_IF_ERROR(be.MainWaitsForSide());
    return shared ? be.Add(m, b.sh_out, b.x, T * D) : Status::Ok();
  }
  const size_t h_bytes = static_cast<size_t>(T * D) * 4, k_bytes = static_cast<size_t>(T * k) * 4;
  MOESPLIT_RETURN_IF_ERROR(be.CopyToHost(m, b.host_h, b.h, h_bytes));
  MOESPLIT_RETURN_IF_ERROR(be.CopyToHost(m, b.host_ids, b.ids, k_bytes));
  MOESPLIT_RETURN_IF_ERROR(be.CopyToHost(m, b.host_weights, b.weights, k_bytes));
  traffic_.to_host += h_bytes + 2 * k_bytes;
  if (shared) {  // side lane, overlapping the CPU experts
    MOESPLIT_RETURN_IF_ERROR(be.SideWaitsForMain());
    MOESPLIT_RETURN_IF_ERROR(SharedExpert(l, T));
  }
  // The CPU experts, in the main lane's order: they start when h, ids and weights have landed;
  // the lane's later work (the copy back) waits for them.
  const LayerWeights* lw =
      cpu_weights_ != nullptr ? &cpu_weights_->layers[static_cast<size_t>(il)] : nullptr;
  const bool timed = prof != nullptr;
  MOESPLIT_RETURN_IF_ERROR(be.HostCall(m, [this, il, T, k, lw, timed] {
    HybridBuffers& hb = *buf_;
    const auto start = std::chrono::steady_clock::now();
    experts_->Forward(il, hb.host_h, T, hb.host_ids, hb.host_weights, static_cast<int>(k),
                      hb.host_out);
    if (timed) {
      hb.expert_ns[static_cast<size_t>(il)] += NsSince(start);
      if (lw != nullptr) {
        hb.expert_bytes[static_cast<size_t>(il)] +=
            RoutedExpertBytes(cfg_, *lw, hb.host_ids, T * k);
      }
    }
  }));
  ++traffic_.host_calls;
  MOESPLIT_RETURN_IF_ERROR(be.CopyFromHost(m, b.out, b.host_out, h_bytes));
  traffic_.from_host += h_bytes;
  MOESPLIT_RETURN_IF_ERROR(be.Add(m, b.out, b.x, T * D));
  if (!shared) return Status::Ok();
  MOESPLIT_RETURN_IF_ERROR(be.MainWaitsForSide());
  return be.Add(m, b.sh_out, b.x, T * D);
}

// Side lane (after the caller's fork): sh_out [T x D] = down(silu(gate h) * up h); nothing
// without a shared expert.
Status HybridForward::SharedExpert(const HybridLayer& l, int64_t T) {
  if (l.sh_gate.data == nullptr) return Status::Ok();
  HybridBuffers& b = *buf_;
  return SwiGluFfn(Lane::kSide, l.sh_gate, l.sh_up, l.sh_down, T, b.sh_a, b.sh_b, b.sh_out);
}

// Main lane: x += sum_j w[t, j] down_e(silu(gate_e h_t) * up_e h_t), e = ids[t, j], for the
// T*k (token, expert) pairs, with the layer's routed experts in device memory.
Status HybridForward::DeviceExperts(const HybridLayer& l, int64_t T) {
  const ModelConfig& c = cfg_;
  DenseBackend& be = *backend_;
  HybridBuffers& b = *buf_;
  const Lane m = Lane::kMain;
  const int64_t E = c.n_expert, k = c.n_expert_used, P = T * k, D = c.n_embd;
  MOESPLIT_RETURN_IF_ERROR(be.ExpertMatMul(m, l.ex_gate, E, b.ids, P, b.h, k, b.ex_a));
  MOESPLIT_RETURN_IF_ERROR(be.ExpertMatMul(m, l.ex_up, E, b.ids, P, b.h, k, b.ex_b));
  MOESPLIT_RETURN_IF_ERROR(be.SwiGlu(m, b.ex_a, b.ex_b, P * l.ex_gate.rows));
  MOESPLIT_RETURN_IF_ERROR(be.ExpertMatMul(m, l.ex_down, E, b.ids, P, b.ex_a, 1, b.ex_y));
  MOESPLIT_RETURN_IF_ERROR(be.WeightedSum(m, b.ex_y, b.weights, T, k, D, b.out));
  return be.Add(m, b.out, b.x, T * D);
}

}  // namespace moesplit::engine
