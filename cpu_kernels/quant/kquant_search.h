// The per-sub-block scale searches of ggml's K-quant reference quantizers (make_qkx2_quants,
// make_qx_quants with rmse_type 1, make_q3_quants). Each fits a small group of values with
// integer levels and returns the group's scale; the super-block code then quantizes that scale
// itself to 4, 6 or 8 bits. Internal to quant/.
#pragma once

#include <cstdint>

namespace moesplit::quant::internal {

// Parameters of the affine (scale + min) grid search.
struct AffineSearch {
  int nmax;      // top level: q in [0, nmax]
  float rmin;    // first trial scale is (nmax + rmin) / range
  float rdelta;  // trial step
  int nstep;     // trials rmin, rmin + rdelta, ..., rmin + nstep * rdelta
  bool use_mad;  // minimize weighted |err| instead of weighted err^2
};

// Fits x[0..n) ~ scale * L[i] - min_out with L in [0, nmax] and min_out >= 0 (the offset never
// moves above zero), minimizing sum weights[i] * err_i^2 (or |err_i|). Starts from the min/max
// grid, then tries the nstep + 1 scales of `p`, each followed by a closed-form weighted
// least-squares refit of (scale, min). Returns scale (0 for a constant group; L is then 0 and
// min_out = -min(x, 0)). `laux` is scratch of n bytes.
float FitAffineQuants(int n, const float* x, const float* weights, const AffineSearch& p,
                      uint8_t* L, float* min_out, uint8_t* laux);

// Fits x[0..n) ~ scale * (L[i] - nmax) with L - nmax in [-nmax, nmax - 1], weights x^2. Starts
// at the scale that maps the largest-magnitude value to -nmax, then tries 18 nearby grids
// (nmax +- 0.1k) and keeps the one with the best weighted least-squares fit. Returns the scale,
// negative when the largest-magnitude value is positive. All-zero groups give 0 and L = 0.
float FitSymmetricQuants(int n, int nmax, const float* x, int8_t* L);

// Q3_K's variant: the same start, then up to 5 passes of coordinate descent that move single
// quants while the weighted (x^2) fit improves. L in [0, 2 nmax) on return (offset by nmax),
// except all-zero groups which give 0 and L = 0.
float FitSymmetricQuantsIterative(int n, int nmax, const float* x, int8_t* L);

}  // namespace moesplit::quant::internal
