// The hybrid forward pass, block by block (hybrid_forward.h). Every step is queued on the
// backend's lanes; the host waits once per chunk, for the logits. D = n_embd, H = n_head,
// L = kv_lora, R = qk_rope, hk = nope + R, hv = v head width, T = tokens of the chunk.
#include <algorithm>
#include <chrono>
#include <cstring>
#include <vector>

#include "core/base/int_math.h"
#include "core/engine/forward.h"
#include "core/engine/hybrid_forward.h"
#include "core/engine/hybrid_internal.h"

namespace moesplit::engine {

Status HybridForward::Step(std::span<const int32_t> tokens, std::span<const SeqRows> seqs,
                           std::span<const int64_t> out_rows, float* logits, Profile* prof) {
  const int64_t T = static_cast<int64_t>(tokens.size()), V = cfg_.n_vocab;
  MOESPLIT_CHECK(std::is_sorted(out_rows.begin(), out_rows.end()),
                 "HybridForward::Step: logits rows out of order");
  size_t next_out = 0;
  // Chunks of max_batch rows: a chunk holds the parts of the sequences that overlap its rows,
  // and the part of a sequence in a later chunk sees the rows an earlier chunk cached.
  for (int64_t c0 = 0; c0 < T; c0 += max_batch_) {
    const int64_t len = std::min(max_batch_, T - c0);
    pieces_.clear();
    for (const SeqRows& s : seqs) {
      const int64_t first = std::max(s.row0, c0), end = std::min(s.row0 + s.n_tok, c0 + len);
      if (first < end) pieces_.push_back({s.blocks, first - c0, end - first, s.pos0 + first - s.row0});
    }
    outs_.clear();
    for (; next_out < out_rows.size() && out_rows[next_out] < c0 + len; ++next_out) {
      outs_.push_back(out_rows[next_out] - c0);
    }
    const Status s = EvalChunk(tokens.subspan(static_cast<size_t>(c0), static_cast<size_t>(len)),
                               pieces_, outs_, logits, prof);
    if (!s.ok()) {
      // What was queued before the failure (copies, the host calls running the CPU experts on
      // the shared pools and writing the staging buffers) must finish before the caller goes
      // on, retries, or destroys the engine.
      (void)backend_->Synchronize();
      return s;
    }
    logits += static_cast<int64_t>(outs_.size()) * V;
  }
  return Status::Ok();
}

Status HybridForward::CopyBlock(int32_t src, int32_t dst) {
  MOESPLIT_CHECK(src >= 0 && src < kv_blocks_ && dst >= 0 && dst < kv_blocks_,
                 "HybridForward::CopyBlock: blocks ", src, " -> ", dst, " of ", kv_blocks_);
  for (const HybridLayer& l : layers_) {
    // One block: 32 rows x (L+R) f16 (V3: 36 KiB).
    const size_t bytes = static_cast<size_t>(kKvBlockSize * l.cache.width * 2);
    char* base = static_cast<char*>(l.cache.data);
    MOESPLIT_RETURN_IF_ERROR(backend_->Copy2D(Lane::kMain, base + dst * bytes, bytes,
                                              base + src * bytes, bytes, bytes, 1));
  }
  return backend_->Synchronize();
}

Status HybridForward::EvalChunk(std::span<const int32_t> tokens, std::span<const SeqRows> seqs,
                                std::span<const int64_t> out_rows, float* logits,
                                Profile* prof) {
  const ModelConfig& c = cfg_;
  DenseBackend& be = *backend_;
  HybridBuffers& b = *buf_;
  const int64_t T = static_cast<int64_t>(tokens.size()), D = c.n_embd, V = c.n_vocab;
  const int64_t n_out = static_cast<int64_t>(out_rows.size());
  const auto t0 = std::chrono::steady_clock::now();
  std::fill(b.expert_ns.begin(), b.expert_ns.end(), 0);
  std::fill(b.expert_bytes.begin(), b.expert_bytes.end(), 0);
  for (int64_t t = 0; t < T; ++t) b.host_tokens[t] = tokens[static_cast<size_t>(t)];
  for (const SeqRows& s : seqs) {
    for (int64_t t = 0; t < s.n_tok; ++t) b.host_pos[s.row0 + t] = static_cast<int32_t>(s.pos0 + t);
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
    MOESPLIT_RETURN_IF_ERROR(Attention(l, T, seqs));
    MOESPLIT_RETURN_IF_ERROR(be.Add(Lane::kMain, b.out, b.x, T * D));
    // x += ffn(ffn_norm(x))
    MOESPLIT_RETURN_IF_ERROR(be.RmsNorm(Lane::kMain, b.x, D, l.ffn_norm, T, D, c.rms_eps, b.h, D));
    MOESPLIT_RETURN_IF_ERROR(l.moe ? MoeFfn(l, il, T, prof) : DenseFfn(l, T));
  }
  if (n_out > 0) MOESPLIT_RETURN_IF_ERROR(Head(out_rows));
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

// logits [n_out x V] = output(output_norm(x[out_rows])): the rows are normed into h, packed
// (one RmsNorm per run of consecutive rows: one run for a prompt's last rows, one row per
// decoding sequence), then one product and one copy to the host.
Status HybridForward::Head(std::span<const int64_t> out_rows) {
  DenseBackend& be = *backend_;
  HybridBuffers& b = *buf_;
  const int64_t D = cfg_.n_embd, n_out = static_cast<int64_t>(out_rows.size());
  for (int64_t i = 0; i < n_out;) {
    int64_t run = 1;
    while (i + run < n_out && out_rows[i + run] == out_rows[i] + run) ++run;
    MOESPLIT_RETURN_IF_ERROR(be.RmsNorm(Lane::kMain, b.x + out_rows[i] * D, D, output_norm_, run,
                                        D, cfg_.rms_eps, b.h + i * D, D));
    i += run;
  }
  MOESPLIT_RETURN_IF_ERROR(be.MatMul(Lane::kMain, output_, b.h, n_out, b.logits));
  const size_t bytes = static_cast<size_t>(n_out * cfg_.n_vocab) * 4;
  MOESPLIT_RETURN_IF_ERROR(be.CopyToHost(Lane::kMain, b.host_logits, b.logits, bytes));
  traffic_.to_host += bytes;
  return Status::Ok();
}

// MLA in the absorbed form (forward_mla.cc, same maths) on b.h [T x D] -> b.out [T x D]:
//   q [T x H*hk] = q_b(norm(q_a h)) or q h;  kv [T x (L+R)] = kv_a h, c normed, k_pe roped
//   (all rows of the chunk together; each row at its own position)
//   per sequence: its cache rows = its kv rows;  o_lat = attention over its cache
//   qf[t, h] = [W_kb[h] q_nope (L), roped q_pe (R)];  o [T x H*hv] = W_vb[h] o_lat;  out = W_o o
Status HybridForward::Attention(const HybridLayer& l, int64_t T, std::span<const SeqRows> seqs) {
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
  // qf[t, h, 0..L) = W_kb[h] q_nope[t, h]: per head L rows of nope.
  MOESPLIT_RETURN_IF_ERROR(be.HeadMatMul(m, l.k_b, H, b.q, H * hk, hk, T, b.qf, H * W, W));
  // qf[t, h, L..W) = q_pe[t, h]: T*H rows of R floats.
  MOESPLIT_RETURN_IF_ERROR(be.Copy2D(m, b.qf + L, W * 4, b.q + nope, hk * 4, R * 4, T * H));
  for (const SeqRows& s : seqs) {
    MOESPLIT_RETURN_IF_ERROR(AppendSeq(l.cache, s));
    MOESPLIT_ASSIGN_OR_RETURN(const DevLatentCache cache, SeqCache(l.cache, s));
    const DevMlaParams p{.n_tok = s.n_tok, .n_head = H, .latent = L, .rope = R, .pos0 = s.pos0,
                         .scale = c.kq_scale};
    MOESPLIT_RETURN_IF_ERROR(
        be.MlaAttention(m, p, b.qf + s.row0 * H * W, cache, b.o_lat + s.row0 * H * L));
  }
  // o[t, h, 0..hv) = W_vb[h] o_lat[t, h]: per head hv rows of L.
  MOESPLIT_RETURN_IF_ERROR(be.HeadMatMul(m, l.v_b, H, b.o_lat, H * L, L, T, b.o, H * hv, hv));
  return be.MatMul(m, l.attn_out, b.o, T, b.out);
}

Status HybridForward::AppendSeq(const DevLatentCache& cache, const SeqRows& s) {
  const int64_t W = cache.width, B = kKvBlockSize;
  for (int64_t t = 0; t < s.n_tok;) {
    const int64_t pos = s.pos0 + t, off = pos % B;
    const int64_t run = std::min(B - off, s.n_tok - t);  // rows that land in this block
    const int64_t block = s.blocks[static_cast<size_t>(pos / B)];
    const DevLatentCache dst{static_cast<uint16_t*>(cache.data) + block * B * W, B, W};
    MOESPLIT_RETURN_IF_ERROR(
        backend_->AppendLatent(Lane::kMain, buf_->kv + (s.row0 + t) * W, run, off, dst));
    t += run;
  }
  return Status::Ok();
}

StatusOr<DevLatentCache> HybridForward::SeqCache(const DevLatentCache& cache, const SeqRows& s) {
  const int64_t B = kKvBlockSize, n_blocks = CeilDiv(s.pos0 + s.n_tok, B);
  const size_t block_bytes = static_cast<size_t>(B * cache.width * 2);
  const auto block = [&](int64_t i) { return s.blocks[static_cast<size_t>(i)]; };
  char* base = static_cast<char*>(cache.data);
  bool consecutive = true;
  for (int64_t i = 1; consecutive && i < n_blocks; ++i) consecutive = block(i) == block(0) + i;
  if (consecutive) return DevLatentCache{base + block(0) * block_bytes, n_blocks * B, cache.width};
  // Gather: one copy per run of consecutive blocks (V3: 36 KiB a block and layer).
  char* dst = static_cast<char*>(gather_);
  for (int64_t i = 0; i < n_blocks;) {
    int64_t run = 1;
    while (i + run < n_blocks && block(i + run) == block(i) + run) ++run;
    MOESPLIT_RETURN_IF_ERROR(backend_->Copy2D(Lane::kMain, dst + i * block_bytes, run * block_bytes,
                                              base + block(i) * block_bytes, run * block_bytes,
                                              run * block_bytes, 1));
    i += run;
  }
  return DevLatentCache{gather_, n_blocks * B, cache.width};
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
