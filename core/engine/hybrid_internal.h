// Internal to core/engine: the device-side state of HybridForward (hybrid_forward.h), shared by
// hybrid_forward.cc (upload, allocation) and hybrid_layers.cc (the blocks).
#pragma once

#include <cstdint>
#include <vector>

#include "core/engine/hybrid_forward.h"

namespace moesplit::engine {

// A layer's tensors in device memory (absent ones: data == nullptr). Matrices are [rows x cols]
// as the products see them (ggml's [K, M] tensor is M rows of K).
struct HybridLayer {
  const float* attn_norm = nullptr;   // [D]
  const float* ffn_norm = nullptr;    // [D]
  const float* q_a_norm = nullptr;    // [Q]
  const float* kv_a_norm = nullptr;   // [L]
  const float* probs_b = nullptr;     // [E] router selection bias
  DevMatrix q_a, q_b, q;              // [Q x D], [H*hk x Q], [H*hk x D]
  DevMatrix kv_a;                     // [(L+R) x D]
  DevMatrix k_b;                      // per head [L x nope] (H of them back to back)
  DevMatrix v_b;                      // per head [v x L]
  DevMatrix attn_out;                 // [D x H*v]
  DevMatrix gate, up, down;           // dense FFN [F x D], [F x D], [D x F]
  DevMatrix gate_inp;                 // [E x D] router (f32 in DeepSeek files)
  DevMatrix sh_gate, sh_up, sh_down;  // shared expert [Fs x D], [Fs x D], [D x Fs]
  DevLatentCache cache;               // [ctx x (L+R)] f16
  bool moe = false;
  // Routed experts in device memory (device_experts layers): per expert [Fe x D], [Fe x D],
  // [D x Fe], E of each back to back; data == nullptr: they run on the CPU.
  DevMatrix ex_gate, ex_up, ex_down;
};

// Activations of one chunk of B <= max_batch tokens (device unless "host").
struct HybridBuffers {
  int32_t* tokens = nullptr;  // [B]
  int32_t* pos = nullptr;     // [B] positions (RoPE)
  float* x = nullptr;         // [B x D] residual stream
  float* h = nullptr;         // [B x D] normed block input
  float* out = nullptr;       // [B x D] block output
  float* qa = nullptr;        // [B x Q]
  float* q = nullptr;         // [B x H*hk]
  float* kv = nullptr;        // [B x (L+R)] latent rows, normed and roped in place
  float* qf = nullptr;        // [B x H x (L+R)] absorbed queries
  float* o_lat = nullptr;     // [B x H x L]
  float* o = nullptr;         // [B x H*v]
  float* ff_a = nullptr;      // [B x max(F, Fs)] dense FFN gate (main lane)
  float* ff_b = nullptr;      // [B x max(F, Fs)] dense FFN up
  float* sh_a = nullptr;      // [B x Fs] shared expert gate (side lane)
  float* sh_b = nullptr;      // [B x Fs] shared expert up
  float* sh_out = nullptr;    // [B x D] shared expert output
  float* router = nullptr;    // [B x E]
  int32_t* ids = nullptr;     // [B x k]
  float* weights = nullptr;   // [B x k]
  float* logits = nullptr;    // [B x V]
  float* ex_a = nullptr;      // [B*k x Fe] routed experts in VRAM: gate per (token, expert)
  float* ex_b = nullptr;      // [B*k x Fe] up
  float* ex_y = nullptr;      // [B*k x D] down, before the weighted sum
  // Host staging (pinned for CUDA).
  int32_t* host_tokens = nullptr;      // [B]
  int32_t* host_pos = nullptr;         // [B]
  float* host_h = nullptr;             // [B x D] the experts' input
  int32_t* host_ids = nullptr;         // [B x k]
  float* host_weights = nullptr;       // [B x k]
  float* host_out = nullptr;           // [B x D] the experts' output
  float* host_logits = nullptr;        // [B x V]
  std::vector<uint64_t> expert_ns;     // [n_layer] CPU expert time of the current chunk
  std::vector<uint64_t> expert_bytes;  // [n_layer] their distinct experts' bytes
};

}  // namespace moesplit::engine
