// Reference (scalar, auto-vectorizable) element-wise ops of the CPU forward pass: RMSNorm, RoPE
// with YaRN, softmax, SiLU / SwiGLU. They follow ggml's CPU definitions (same formulas, same
// accumulation precision) so that our logits track llama.cpp's; the fast per-ISA variants come
// later and are tested against these.
#pragma once

#include <cstdint>

namespace moesplit::ops {

// y[i] = x[i] / sqrt(mean(x^2) + eps) * w[i]   (w == nullptr: no weight). x, y: [n]; y may be x.
// The sum of squares is accumulated in double, as ggml does.
void RmsNorm(const float* x, const float* w, int64_t n, float eps, float* y);

// In-place softmax over x[0..n): exp(x - max) / sum. Sum accumulated in double.
void Softmax(float* x, int64_t n);

inline float Silu(float x) { return x / (1.0f + __builtin_expf(-x)); }
inline float Sigmoid(float x) { return 1.0f / (1.0f + __builtin_expf(-x)); }

// gate[i] = silu(gate[i]) * up[i] for i in [0, n): the SwiGLU of a gated FFN.
void SwiGluInPlace(float* gate, const float* up, int64_t n);

// How the rotated dims pair up.
enum class RopeStyle {
  kNormal,  // pairs (x[2i], x[2i+1]): llama, deepseek2 (ggml GGML_ROPE_TYPE_NORMAL)
  kNeox,    // pairs (x[i], x[i + n_dims/2]): qwen3moe (GGML_ROPE_TYPE_NEOX)
};

// RoPE with optional YaRN, with ggml's parameter names (ggml_rope_ext).
//   theta_i(pos) = pos * freq_base^(-2i / n_dims), i = 0 .. n_dims/2 - 1
//   interpolated: theta * freq_scale; with YaRN (ext_factor > 0) the dims below the ramp keep the
//   extrapolated angle: theta = interp * (1 - ramp_i * ext) + extrap * ramp_i * ext, where
//   ramp_i = 1 - clamp((i - low) / max(0.001, high - low), 0, 1) and [low, high] = the YaRN
//   correction dims from beta_fast / beta_slow and n_ctx_orig; the magnitude is then scaled by
//   mscale = attn_factor * (1 + 0.1 ln(1 / freq_scale)).
//   Without YaRN: mscale = attn_factor.
struct RopeParams {
  int n_dims = 0;  // rotated dims (even); dims beyond n_dims of a head stay as they are
  RopeStyle style = RopeStyle::kNormal;
  float freq_base = 10000.0f;  // rope.freq_base
  float freq_scale = 1.0f;     // 1 / rope.scaling.factor (1 = no scaling)
  float ext_factor = 0.0f;     // 1 for YaRN, else 0
  float attn_factor = 1.0f;    // magnitude multiplier (see above)
  float beta_fast = 32.0f;
  float beta_slow = 1.0f;
  int n_ctx_orig = 0;  // rope.scaling.original_context_length (YaRN)
};

// The YaRN correction range [low, high] in dim-pair units (ggml_rope_yarn_corr_dims):
//   corr(b) = n_dims * ln(n_ctx_orig / (b * 2 pi)) / (2 ln freq_base),
//   low = max(0, floor(corr(beta_fast))), high = min(n_dims - 1, ceil(corr(beta_slow))).
void YarnCorrDims(const RopeParams& p, float* low, float* high);

// cos_sin[2i] = cos(theta_i) * mscale, cos_sin[2i+1] = sin(theta_i) * mscale for one position;
// cos_sin: [n_dims].
void RopeCosSin(const RopeParams& p, int64_t pos, float* cos_sin);

// Rotates the first n_dims values of one head vector x in place with a RopeCosSin table.
void RopeApply(const RopeParams& p, const float* cos_sin, float* x);

}  // namespace moesplit::ops
