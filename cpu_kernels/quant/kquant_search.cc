// Scale searches for the K-quant reference quantizers. The float expressions keep ggml's
// operand order ((w * l) * x, not w * (l * x)) because the chosen levels, and so the bytes,
// depend on the last bit of these sums.
#include "cpu_kernels/quant/kquant_search.h"

#include <algorithm>
#include <cmath>

#include "cpu_kernels/quant/quant_math.h"

namespace moesplit::quant::internal {
namespace {

// Groups whose largest |x| is below this are treated as all zero (ggml's GROUP_MAX_EPS).
constexpr float kGroupMaxEps = 1e-15f;

// Weighted error of the affine fit scale * L[i] + min ~ x[i].
float AffineError(int n, const float* x, const float* w, const uint8_t* L, float scale, float min,
                  bool use_mad) {
  float err = 0.0f;
  for (int i = 0; i < n; ++i) {
    float diff = scale * static_cast<float>(L[i]) + min - x[i];
    diff = use_mad ? std::fabs(diff) : diff * diff;
    err += w[i] * diff;
  }
  return err;
}

// Levels of x on the grid (x - min) * iscale, clamped to [0, nmax].
void AffineLevels(int n, const float* x, float min, float iscale, int nmax, uint8_t* L) {
  for (int i = 0; i < n; ++i) {
    L[i] = static_cast<uint8_t>(std::clamp(NearestInt(iscale * (x[i] - min)), 0, nmax));
  }
}

// Symmetric levels l = round(iscale * x) clamped to [-nmax, nmax - 1], plus their weighted
// (w = x^2) sums sum w x l and sum w l^2.
struct SymFit {
  float sumlx;
  float suml2;
};
SymFit SymmetricSums(int n, int nmax, const float* x, float iscale) {
  SymFit s{0.0f, 0.0f};
  for (int i = 0; i < n; ++i) {
    const int l = std::clamp(NearestInt(iscale * x[i]), -nmax, nmax - 1);
    const float w = x[i] * x[i];
    s.sumlx += w * x[i] * static_cast<float>(l);
    s.suml2 += w * static_cast<float>(l) * static_cast<float>(l);
  }
  return s;
}

void SymmetricLevels(int n, int nmax, const float* x, float iscale, int8_t* L) {
  for (int i = 0; i < n; ++i) {
    L[i] = static_cast<int8_t>(nmax + std::clamp(NearestInt(iscale * x[i]), -nmax, nmax - 1));
  }
}

}  // namespace

float FitAffineQuants(int n, const float* x, const float* weights, const AffineSearch& p,
                      uint8_t* L, float* min_out, uint8_t* laux) {
  float min = x[0], max = x[0];
  float sum_w = weights[0];
  float sum_x = sum_w * x[0];
  for (int i = 1; i < n; ++i) {
    min = std::min(min, x[i]);
    max = std::max(max, x[i]);
    sum_w += weights[i];
    sum_x += weights[i] * x[i];
  }
  if (min > 0.0f) min = 0.0f;
  if (max == min) {
    std::fill(L, L + n, uint8_t{0});
    *min_out = -min;
    return 0.0f;
  }
  const float nmax = static_cast<float>(p.nmax);
  float iscale = nmax / (max - min);
  float scale = 1.0f / iscale;
  AffineLevels(n, x, min, iscale, p.nmax, L);
  float best_error = AffineError(n, x, weights, L, scale, min, p.use_mad);
  for (int is = 0; p.nstep >= 1 && is <= p.nstep; ++is) {
    iscale = (p.rmin + p.rdelta * static_cast<float>(is) + nmax) / (max - min);
    AffineLevels(n, x, min, iscale, p.nmax, laux);
    float sum_l = 0.0f, sum_l2 = 0.0f, sum_xl = 0.0f;
    for (int i = 0; i < n; ++i) {
      const float w = weights[i];
      const float l = static_cast<float>(laux[i]);
      sum_l += w * l;
      sum_l2 += w * l * l;
      sum_xl += w * l * x[i];
    }
    // Weighted least squares for x ~ scale * l + min: D is the normal equations' determinant.
    const float det = sum_w * sum_l2 - sum_l * sum_l;
    if (!(det > 0.0f)) continue;
    float this_scale = (sum_w * sum_xl - sum_x * sum_l) / det;
    float this_min = (sum_l2 * sum_x - sum_l * sum_xl) / det;
    if (this_min > 0.0f) {
      this_min = 0.0f;
      this_scale = sum_xl / sum_l2;
    }
    const float err = AffineError(n, x, weights, laux, this_scale, this_min, p.use_mad);
    if (err < best_error) {
      std::copy(laux, laux + n, L);
      best_error = err;
      scale = this_scale;
      min = this_min;
    }
  }
  *min_out = -min;
  return scale;
}

float FitSymmetricQuants(int n, int nmax, const float* x, int8_t* L) {
  const float max = SignedAbsMax(x, n);
  if (std::fabs(max) < kGroupMaxEps) {
    std::fill(L, L + n, int8_t{0});
    return 0.0f;
  }
  const float fnmax = static_cast<float>(nmax);
  float iscale = -fnmax / max;
  SymmetricLevels(n, nmax, x, iscale, L);
  SymFit fit = SymmetricSums(n, nmax, x, iscale);
  float scale = fit.suml2 != 0.0f ? fit.sumlx / fit.suml2 : 0.0f;
  float best = scale * fit.sumlx;
  for (int is = -9; is <= 9; ++is) {
    if (is == 0) continue;
    iscale = -(fnmax + 0.1f * static_cast<float>(is)) / max;
    fit = SymmetricSums(n, nmax, x, iscale);
    // Maximizing sumlx^2 / suml2 is minimizing the weighted squared error at the optimal scale.
    if (fit.suml2 > 0.0f && fit.sumlx * fit.sumlx > best * fit.suml2) {
      SymmetricLevels(n, nmax, x, iscale, L);
      scale = fit.sumlx / fit.suml2;
      best = scale * fit.sumlx;
    }
  }
  return scale;
}

float FitSymmetricQuantsIterative(int n, int nmax, const float* x, int8_t* L) {
  const float max = SignedAbsMax(x, n);
  if (std::fabs(max) < kGroupMaxEps) {
    std::fill(L, L + n, int8_t{0});
    return 0.0f;
  }
  const float iscale = -static_cast<float>(nmax) / max;
  float sumlx = 0.0f, suml2 = 0.0f;
  for (int i = 0; i < n; ++i) {
    const int l = std::clamp(NearestInt(iscale * x[i]), -nmax, nmax - 1);
    L[i] = static_cast<int8_t>(l);
    const float w = x[i] * x[i];
    sumlx += w * x[i] * static_cast<float>(l);
    suml2 += w * static_cast<float>(l) * static_cast<float>(l);
  }
  for (int pass = 0; pass < 5; ++pass) {
    int changed = 0;
    for (int i = 0; i < n; ++i) {
      // Remove value i from the sums, find its best level for the rest's scale, keep the move
      // if the fit quality sumlx^2 / suml2 improves.
      const float w = x[i] * x[i];
      const float li = static_cast<float>(L[i]);
      float slx = sumlx - w * x[i] * li;
      if (!(slx > 0.0f)) continue;
      float sl2 = suml2 - w * li * li;
      const int new_l = std::clamp(NearestInt(x[i] * sl2 / slx), -nmax, nmax - 1);
      if (new_l == L[i]) continue;
      slx += w * x[i] * static_cast<float>(new_l);
      sl2 += w * static_cast<float>(new_l) * static_cast<float>(new_l);
      if (sl2 > 0.0f && slx * slx * suml2 > sumlx * sumlx * sl2) {
        L[i] = static_cast<int8_t>(new_l);
        sumlx = slx;
        suml2 = sl2;
        ++changed;
      }
    }
    if (changed == 0) break;
  }
  for (int i = 0; i < n; ++i) L[i] = static_cast<int8_t>(L[i] + nmax);
  return suml2 > 0.0f ? sumlx / suml2 : 0.0f;
}

}  // namespace moesplit::quant::internal
