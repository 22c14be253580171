// Reference quantization of IQ2_XXS (256 values in 66 bytes, blocks_iq.h), following
// llama.cpp's quantize_row_iq2_xxs_impl (ggml-quants.c) so that the bytes are ggml's
// (quant_oracle_test.cc compares them with shared/testdata/quant/iq2_xxs.q).
//
// Importance matrix: llama.cpp refuses IQ2_XXS without one. We quantize as ggml does with a
// FLAT importance matrix (every weight 1.0), which is what the oracle file was made with: the
// per-value weight is then w_i = 1 * sqrt(sigma^2 + x_i^2), sigma^2 = mean of x^2 over the
// 256-value block (ggml has no x^2 default for this type).
//
// Per 32-value sub-block:
//   1. signs: each group of 8 stores only 7 sign bits (the 8th makes the count of negatives
//      even), so with an odd count the value of least w x^2 is quantized with the wrong sign
//      (xval keeps it as -|x|);
//   2. a first scale from make_qp_quants (levels 0..4 on |x|), then 13 trial inverse scales
//      id = (5 + 0.1 is) / (3 * scale), is = -6..6: levels l = round((id |x| - 1) / 2) in
//      0..2 (magnitude 2l + 1), snapped to the grid (exact entry, or the nearest of the
//      neighbour list by sum sqrt(w) (s q - x)^2), kept if sumqx^2 / sumq2 improves;
//   3. one more snap at the best scale and a least-squares refit of that scale.
// The super-block scale d = max_scale / 31 and each sub-block's 4-bit s_j = round((scale / d
// - 1) / 2), so that scale ~ d (2 s_j + 1). The decoder computes d (0.5 + s_j) 0.25 * byte with
// bytes 8, 25, 43 ~ 8.5 (2l + 1), i.e. ~1.06 d (2 s_j + 1) (2l + 1): ggml's grid carries its own
// small overshoot, kept as is (the bytes are the format's).
#include <cfloat>
#include <cmath>
#include <cstring>

#include "core/base/status.h"
#include "cpu_kernels/quant/blocks_iq.h"
#include "cpu_kernels/quant/quant_internal.h"
#include "cpu_kernels/quant/quant_iq_lattice.h"
#include "cpu_kernels/quant/quant_math.h"

namespace moesplit::quant::internal {
namespace {

constexpr float kGroupMaxEps = 1e-15f;  // ggml's GROUP_MAX_EPS
constexpr int kMaxQ = 3;                // levels 0..kMaxQ-1 after the grid snap

// ggml's make_qp_quants for n values >= 0 (at most one slightly negative here), levels 0..nmax:
// the scale of the best of 9 trial grids, refined by up to 5 passes of coordinate descent.
// Levels are stored as uint8_t like ggml's, including the wrap of a -1 level to 255 in the
// first error estimate (it changes which trial wins, so it is kept for identical bytes).
float MakeQpQuants(int n, int nmax, const float* x, uint8_t* L, const float* w) {
  float max = 0;
  for (int i = 0; i < n; ++i) max = max > x[i] ? max : x[i];
  if (max < kGroupMaxEps) {
    std::memset(L, 0, n);
    return 0.0f;
  }
  float iscale = nmax / max;
  for (int i = 0; i < n; ++i) L[i] = static_cast<uint8_t>(NearestInt(iscale * x[i]));
  const float scale = 1 / iscale;
  float best_mse = 0;
  for (int i = 0; i < n; ++i) {
    const float diff = x[i] - scale * L[i];
    best_mse += w[i] * diff * diff;
  }
  for (int is = -4; is <= 4; ++is) {
    if (is == 0) continue;
    const float iscale_is = (0.1f * is + nmax) / max;
    const float scale_is = 1 / iscale_is;
    float mse = 0;
    for (int i = 0; i < n; ++i) {
      int l = NearestInt(iscale_is * x[i]);
      l = nmax < l ? nmax : l;
      const float diff = x[i] - scale_is * l;
      mse += w[i] * diff * diff;
    }
    if (mse < best_mse) {
      best_mse = mse;
      iscale = iscale_is;
    }
  }
  float sumlx = 0, suml2 = 0;
  for (int i = 0; i < n; ++i) {
    int l = NearestInt(iscale * x[i]);
    l = nmax < l ? nmax : l;
    L[i] = static_cast<uint8_t>(l);
    sumlx += w[i] * x[i] * l;
    suml2 += w[i] * l * l;
  }
  for (int itry = 0; itry < 5; ++itry) {
    int n_changed = 0;
    for (int i = 0; i < n; ++i) {
      float slx = sumlx - w[i] * x[i] * L[i];
      float sl2 = suml2 - w[i] * L[i] * L[i];
      if (slx > 0 && sl2 > 0) {
        int new_l = NearestInt(x[i] * sl2 / slx);
        new_l = nmax < new_l ? nmax : new_l;
        if (new_l != L[i]) {
          slx += w[i] * x[i] * new_l;
          sl2 += w[i] * new_l * new_l;
          if (slx * slx * suml2 > sumlx * sumlx * sl2) {
            L[i] = static_cast<uint8_t>(new_l);
            sumlx = slx;
            suml2 = sl2;
            ++n_changed;
          }
        }
      }
    }
    if (!n_changed) break;
  }
  return suml2 > 0.0f ? sumlx / suml2 : 0.0f;
}

// One 32-value sub-block: its scale (0 for an all-zero one) and packed words q2[0..1] (grid
// indices; 7-bit signs of each group at bits 7k), the 4-bit scale still to be added.
float QuantizeSubBlock(const IqLattice& lat, const float* xb, float sigma2, uint32_t q2[2]) {
  float weight[32], waux[32], xval[32];
  for (int i = 0; i < 32; ++i) weight[i] = std::sqrt(sigma2 + xb[i] * xb[i]);
  for (int i = 0; i < 32; ++i) waux[i] = std::sqrt(weight[i]);
  uint8_t signs[4];
  for (int k = 0; k < 4; ++k) signs[k] = GroupSigns(xb + 8 * k, weight + 8 * k, true, xval + 8 * k);
  float max = xval[0];
  for (int i = 1; i < 32; ++i) max = max > xval[i] ? max : xval[i];
  if (max < kGroupMaxEps) return 0.0f;
  uint8_t Lqp[32];
  float scale = MakeQpQuants(32, kMaxQ + 1, xval, Lqp, weight);
  const float eff_max = scale * kMaxQ;
  if (eff_max <= 0) return 0.0f;
  int8_t L[32] = {}, Laux[32];
  float best = 0;
  for (int is = -6; is <= 6; ++is) {
    const float id = (2 * kMaxQ - 1 + is * 0.1f) / eff_max;
    const float this_scale = 1 / id;
    for (int k = 0; k < 4; ++k) {
      SnapLevels(lat, kMaxQ, xval + 8 * k, waux + 8 * k, id, this_scale, Laux + 8 * k);
    }
    float sumqx, sumq2;
    OddSums(32, xval, weight, Laux, &sumqx, &sumq2);
    if (sumq2 > 0 && sumqx * sumqx > best * sumq2) {
      scale = sumqx / sumq2;
      best = scale * sumqx;
      std::memcpy(L, Laux, 32);
    }
  }
  if (scale > 0) {
    const float id = 1 / scale;
    for (int k = 0; k < 4; ++k) {
      SnapLevels(lat, kMaxQ, xval + 8 * k, waux + 8 * k, id, scale, L + 8 * k);
    }
    float sumqx, sumq2;
    OddSums(32, xval, weight, L, &sumqx, &sumq2);
    if (sumq2 > 0) scale = sumqx / sumq2;
  }
  if (scale < 0) {  // ggml guards it (never seen): flip the scale and the stored signs
    scale = -scale;
    for (uint8_t& s : signs) s = static_cast<uint8_t>(~s & 127);
  }
  for (int k = 0; k < 4; ++k) {
    q2[0] |= static_cast<uint32_t>(lat.Entry(L + 8 * k)) << (8 * k);
    q2[1] |= static_cast<uint32_t>(signs[k]) << (7 * k);
  }
  return scale;
}

}  // namespace

void QuantIQ2_XXS(const float* src, void* dst, int64_t nb) {
  const IqLattice& lat = Iq2XxsLattice();
  auto* blocks = static_cast<BlockIQ2_XXS*>(dst);
  for (int64_t ibl = 0; ibl < nb; ++ibl) {
    const float* xbl = src + kQkK * ibl;
    uint32_t q2[2 * (kQkK / 32)] = {};  // [16] words 2j, 2j + 1 of sub-block j (blocks_iq.h)
    float scales[kQkK / 32];
    float sumx2 = 0;
    for (int i = 0; i < kQkK; ++i) sumx2 += xbl[i] * xbl[i];
    const float sigma2 = sumx2 / kQkK;
    float max_scale = 0;
    for (int ib = 0; ib < kQkK / 32; ++ib) {
      scales[ib] = QuantizeSubBlock(lat, xbl + 32 * ib, sigma2, q2 + 2 * ib);
      max_scale = max_scale > scales[ib] ? max_scale : scales[ib];
    }
    BlockIQ2_XXS& y = blocks[ibl];
    y.d = ToHalf(0.0f);
    if (!(max_scale != 0)) {
      std::memset(y.qs, 0, sizeof(y.qs));
      continue;
    }
    const float d = max_scale / 31;
    y.d = ToHalf(d);
    const float id = 1 / d;
    for (int ib = 0; ib < kQkK / 32; ++ib) {
      int l = NearestInt(0.5f * (id * scales[ib] - 1));
      l = l < 0 ? 0 : (l > 15 ? 15 : l);
      q2[2 * ib + 1] |= static_cast<uint32_t>(l) << 28;
    }
    std::memcpy(y.qs, q2, sizeof(y.qs));
  }
}

}  // namespace moesplit::quant::internal
