// Reference quantization of IQ1_S (256 values in 50 bytes) and IQ1_M (256 values in 56 bytes),
// blocks_iq.h, following llama.cpp's quantize_row_iq1_s_impl / quantize_row_iq1_m_impl
// (ggml-quants.c) so that the bytes are ggml's (quant_oracle_test.cc compares IQ1_S with
// shared/testdata/quant/iq1_s.q, quant_iq_test.cc IQ1_M's no-imatrix variant with iq1_m.q).
//
// Importance matrix: llama-quantize refuses both types without one. QuantIQ1_S / QuantIQ1_M
// quantize as ggml does with a FLAT importance matrix (every weight 1.0): per-value weight
// w_i = 1 * sqrt(sigma^2 + x_i^2), sigma^2 = 2 * mean of x^2 over the 256-value block, so the
// bytes are those of llama-quantize given an all-ones imatrix (checked on a whole ds-tiny model
// by tests/apps/llama_compat/quantize_vs_llama.cc). ggml's IQ1_M code also has a no-imatrix
// default, w_i = x_i^2 (ggml_quantize_chunk accepts NULL for IQ1_M only); QuantIQ1_MNoImatrix
// runs that one, which is how shared/testdata/quant/iq1_m.q was made (its bytes match only this
// weighting, although the testdata README says flat imatrix); it is the oracle check of the
// shared IQ1_M search. On that file's data the flat weighting gives rel_rmse 0.505, x^2 0.600.
//
// Each group of 8 values is one grid entry of levels -1, 0, +1 plus a shared offset +-0.125
// (the "delta"): value ~ scale * (level + delta). With 3 levels the best split of a sub-block
// (IQ1_S: 32 values, IQ1_M: 16) into the -1 / 0 / +1 classes is found exhaustively: sort the
// values, and for every pair of boundaries i1 <= i2 in that order evaluate the least-squares
// fit sumqx^2 / sumq2 for each delta sign (IQ1_M: a sign per group of 8, 4 combinations).
// Groups whose levels are not a grid entry are snapped to the neighbour of least weighted
// error, and the scale refit. Sub-block scales are then coded on 3 bits against d = max / 15,
// with ggml's empirical factors on d (IQ1_S: x1.125; IQ1_M: a least-squares refit of d over
// the coded scales, x1.1125).
//
// Sorting: ggml uses qsort on the values alone; glibc's qsort is a stable merge sort for these
// sizes, so ties keep index order, as std::stable_sort does here.
#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstring>

#include "core/base/status.h"
#include "cpu_kernels/quant/blocks_iq.h"
#include "cpu_kernels/quant/iq_grids.h"
#include "cpu_kernels/quant/quant_internal.h"
#include "cpu_kernels/quant/quant_iq_lattice.h"
#include "cpu_kernels/quant/quant_math.h"

namespace moesplit::quant::internal {
namespace {

constexpr float kEpsIq1S = 1e-12f;  // ggml's GROUP_MAX_EPS_IQ1_S
constexpr float kEpsIq1M = 1e-7f;   // ggml's GROUP_MAX_EPS_IQ1_M
// The three reconstruction points level + delta, for a positive and a negative delta.
constexpr float kXp[3] = {-1 + kIq1Delta, kIq1Delta, 1 + kIq1Delta};
constexpr float kXm[3] = {-1 - kIq1Delta, -kIq1Delta, 1 - kIq1Delta};

// Per-value weights sqrt(sigma2 + x^2) of n values.
void Weights(const float* x, int n, float sigma2, float* w) {
  for (int i = 0; i < n; ++i) w[i] = std::sqrt(sigma2 + x[i] * x[i]);
}

// IQ1_M's per-value weights: with the flat importance matrix sqrt(sigma2 + x^2) (as IQ1_S),
// without one ggml's x^2.
struct Iq1mWeighting {
  bool flat_imatrix;
  float sigma2;  // 2 * mean x^2 of the 256-value block (flat_imatrix only)
};
void Iq1mWeights(const float* x, int n, const Iq1mWeighting& wt, float* w) {
  if (wt.flat_imatrix) {
    Weights(x, n, wt.sigma2, w);
  } else {
    for (int i = 0; i < n; ++i) w[i] = x[i] * x[i];
  }
}

float AbsMax(const float* x, int n) {
  float max = std::fabs(x[0]);
  for (int i = 1; i < n; ++i) max = max > std::fabs(x[i]) ? max : std::fabs(x[i]);
  return max;
}

// order[0..n) = indices of x sorted by value, ties in index order.
void SortedOrder(const float* x, int n, int* order) {
  for (int i = 0; i < n; ++i) order[i] = i;
  std::stable_sort(order, order + n, [x](int a, int b) { return x[a] < x[b]; });
}

// Levels of the split: the values before position i1 of `order` get level 0 (-1), up to i2
// level 1 (0), the rest level 2 (+1).
void SplitLevels(const int* order, int n, int i1, int i2, int8_t* L) {
  for (int j = 0; j < n; ++j) L[order[j]] = static_cast<int8_t>(j < i1 ? 0 : (j < i2 ? 1 : 2));
}

// The grid entry for the 8 levels L (0..2): the exact one, or the neighbour of least
// sum w (scale * xx[level] - x)^2 (first on ties; ggml's iq1_find_best_neighbour2). L is set
// to the chosen entry's levels. Candidates are scored together value by value, each sum adding
// its terms in ggml's order, so the result is ggml's. ggml falls back to a full-grid search
// when no neighbour has a finite error (non-finite input); this CHECKs instead.
int SnapToGrid(const IqLattice& lat, const float* x, const float* w, float scale, const float* xx,
               int8_t* L, bool* on_grid) {
  const uint16_t key = lat.Key(L);
  int e = lat.Exact(key);
  if (e < 0) {
    *on_grid = false;
    e = lat.NearestNeighbour(key, x, w, scale, xx);
    for (int i = 0; i < 8; ++i) L[i] = static_cast<int8_t>(lat.Level(e, i));
  }
  return e;
}

// Least-squares refit sumqx / sumq2 over ngroups groups of 8 with entries index[k] and
// reconstruction points xxs[k]; returns `scale` unchanged unless both sums are positive.
float Refit(const IqLattice& lat, const float* x, const float* w, const uint16_t* index,
            const float* const* xxs, int ngroups, float scale) {
  float sumqx = 0, sumq2 = 0;
  for (int k = 0; k < ngroups; ++k) {
    for (int j = 0; j < 8; ++j) {
      const float q = xxs[k][lat.Level(index[k], j)];
      sumqx += w[8 * k + j] * q * x[8 * k + j];
      sumq2 += w[8 * k + j] * q * q;
    }
  }
  return sumqx > 0 && sumq2 > 0 ? sumqx / sumq2 : scale;
}

// IQ1_S, one 32-value sub-block: returns its scale (0: all zero or no fit) and sets the 4
// grid indices and the delta sign (+1 / -1).
float Iq1sSubBlock(const IqLattice& lat, const float* xb, float sigma2, uint16_t index[4],
                   int* shift) {
  constexpr int n = 32;
  float w[n];
  Weights(xb, n, sigma2, w);
  index[0] = index[1] = index[2] = index[3] = 0;
  *shift = 1;
  const float max = AbsMax(xb, n);
  if (max < kEpsIq1S) return 0.0f;
  int order[n];
  SortedOrder(xb, n, order);
  float sumx[n + 1], sumw[n + 1];  // prefix sums of w x and w in sorted order
  sumx[0] = sumw[0] = 0;
  for (int j = 0; j < n; ++j) {
    sumx[j + 1] = sumx[j] + w[order[j]] * xb[order[j]];
    sumw[j + 1] = sumw[j] + w[order[j]];
  }
  float best = -FLT_MAX, scale = max;
  int b1 = -1, b2 = -1, best_shift = 0;
  for (int i1 = 0; i1 <= n; ++i1) {
    for (int i2 = i1; i2 <= n; ++i2) {
      for (int s = 0; s < 2; ++s) {  // ggml tries the + delta first
        const float* xp = s == 0 ? kXp : kXm;
        const float sumqx = (sumx[i1] - sumx[0]) * xp[0] + (sumx[i2] - sumx[i1]) * xp[1] +
                            (sumx[n] - sumx[i2]) * xp[2];
        const float sumq2 = (sumw[i1] - sumw[0]) * xp[0] * xp[0] +
                            (sumw[i2] - sumw[i1]) * xp[1] * xp[1] +
                            (sumw[n] - sumw[i2]) * xp[2] * xp[2];
        if (sumq2 > 0 && sumqx * sumqx > best * sumq2) {
          scale = sumqx / sumq2;
          best = scale * sumqx;
          b1 = i1;
          b2 = i2;
          best_shift = s == 0 ? 1 : -1;
        }
      }
    }
  }
  if (b1 < 0 || b2 < 0 || best_shift == 0) return 0.0f;
  int8_t L[n];
  SplitLevels(order, n, b1, b2, L);
  if (scale < 0) {  // mirror: levels and delta sign flip with the scale
    for (int8_t& l : L) l = static_cast<int8_t>(2 - l);
    scale = -scale;
    best_shift = -best_shift;
  }
  const float* xx = best_shift == 1 ? kXp : kXm;
  bool on_grid = true;
  for (int k = 0; k < 4; ++k) {
    index[k] = static_cast<uint16_t>(
        SnapToGrid(lat, xb + 8 * k, w + 8 * k, scale, xx, L + 8 * k, &on_grid));
  }
  const float* xxs[4] = {xx, xx, xx, xx};
  if (!on_grid) scale = Refit(lat, xb, w, index, xxs, 4, scale);
  *shift = best_shift;
  MOESPLIT_CHECK(scale >= 0);
  return scale;
}

// IQ1_M's delta points of group k (0, 1) of a 16-value sub-block under sign combination c:
// c = 0: +,+  1: +,-  2: -,+  3: -,- (ggml's order; c < 2 means group 0 positive).
const float* Iq1mPoints(int c, int k) {
  const bool positive = k == 0 ? c < 2 : c % 2 == 0;
  return positive ? kXp : kXm;
}

// The products ggml's IQ1_M split search adds, per sorted position j (value order[j]), level
// lv and sign combination c: qx = (w * q) * x and q2 = (w * q) * q, q the level's point for
// that value's group under c. Computing them once is exact: each is the same two products.
struct Iq1mTerms {
  Iq1mTerms(const float* xb, const float* w, const int* order) {
    for (int j = 0; j < 16; ++j) {
      const int i = order[j];
      for (int lv = 0; lv < 3; ++lv) {
        for (int c = 0; c < 4; ++c) {
          const float q = Iq1mPoints(c, i < 8 ? 0 : 1)[lv];
          qx[j][lv][c] = w[i] * q * xb[i];
          q2[j][lv][c] = w[i] * q * q;
        }
      }
    }
  }
  float qx[16][3][4];  // [sorted position][level][combination]
  float q2[16][3][4];
};

// Adds position j's terms at level lv to the 4 running fits.
inline void AddTerms(const Iq1mTerms& t, int j, int lv, float* sqx, float* sq2) {
  for (int c = 0; c < 4; ++c) {
    sqx[c] += t.qx[j][lv][c];
    sq2[c] += t.q2[j][lv][c];
  }
}

// ggml's exhaustive search over the splits i1 <= i2 of the 16 sorted values into levels
// 0 / 1 / 2 and the 4 sign combinations, keeping the largest sumqx^2 / sumq2 (first found on
// ties). ggml sums each split's 16 terms from zero in position order; the partial sums over the
// first i2 positions do not depend on where the later boundary lies, so they are carried from
// split to split — the same additions in the same order, hence the same floats — and only the
// level-2 tail is summed per split.
void Iq1mSplitSearch(const Iq1mTerms& t, float* best, float* scale, int* b1, int* b2, int* best_c) {
  constexpr int n = 16;
  float lo_qx[4] = {0, 0, 0, 0}, lo_q2[4] = {0, 0, 0, 0};  // positions < i1 at level 0
  for (int i1 = 0; i1 <= n; ++i1) {
    if (i1 > 0) AddTerms(t, i1 - 1, 0, lo_qx, lo_q2);
    float mid_qx[4], mid_q2[4];  // and positions i1 .. i2-1 at level 1
    std::memcpy(mid_qx, lo_qx, sizeof(mid_qx));
    std::memcpy(mid_q2, lo_q2, sizeof(mid_q2));
    for (int i2 = i1; i2 <= n; ++i2) {
      if (i2 > i1) AddTerms(t, i2 - 1, 1, mid_qx, mid_q2);
      float sqx[4], sq2[4];
      std::memcpy(sqx, mid_qx, sizeof(sqx));
      std::memcpy(sq2, mid_q2, sizeof(sq2));
      for (int j = i2; j < n; ++j) AddTerms(t, j, 2, sqx, sq2);
      for (int c = 0; c < 4; ++c) {
        if (sq2[c] > 0 && sqx[c] * sqx[c] > *best * sq2[c]) {
          *scale = sqx[c] / sq2[c];
          *best = *scale * sqx[c];
          *b1 = i1;
          *b2 = i2;
          *best_c = c;
        }
      }
    }
  }
}

// IQ1_M, one 16-value sub-block: returns its scale (0: all zero or no fit) and sets the 2
// grid indices and the sign combination.
float Iq1mSubBlock(const IqLattice& lat, const float* xb, const Iq1mWeighting& wt,
                   uint16_t index[2], int* combo) {
  constexpr int n = 16;
  float w[n];
  Iq1mWeights(xb, n, wt, w);
  index[0] = index[1] = 0;
  *combo = 0;
  const float max = AbsMax(xb, n);
  if (max < kEpsIq1M) return 0.0f;
  int order[n];
  SortedOrder(xb, n, order);
  float best = -FLT_MAX, scale = max;
  int b1 = -1, b2 = -1, best_c = -1;
  Iq1mSplitSearch(Iq1mTerms(xb, w, order), &best, &scale, &b1, &b2, &best_c);
  if (b1 < 0 || b2 < 0 || best_c < 0) return 0.0f;
  int8_t L[n];
  SplitLevels(order, n, b1, b2, L);
  if (scale < 0) {  // mirror: levels flip, and so does each group's delta sign
    for (int8_t& l : L) l = static_cast<int8_t>(2 - l);
    scale = -scale;
    best_c = 3 - best_c;
  }
  const float* xxs[2] = {Iq1mPoints(best_c, 0), Iq1mPoints(best_c, 1)};
  bool on_grid = true;
  for (int k = 0; k < 2; ++k) {
    index[k] = static_cast<uint16_t>(
        SnapToGrid(lat, xb + 8 * k, w + 8 * k, scale, xxs[k], L + 8 * k, &on_grid));
  }
  if (!on_grid) scale = Refit(lat, xb, w, index, xxs, 2, scale);
  *combo = best_c;
  MOESPLIT_CHECK(scale >= 0);
  return scale;
}

// IQ1_M's super-scale: the least-squares d over the coded 3-bit scales l_j (values ~ d (2 l_j
// + 1) * point), times ggml's empirical 1.1125; max_scale / 15 if the fit is degenerate.
float Iq1mSuperScale(const IqLattice& lat, const float* xbl, const Iq1mWeighting& wt, const int* l,
                     const uint16_t (*index)[2], const int* combo, float d) {
  float sumqx = 0, sumq2 = 0;
  for (int ib = 0; ib < kQkK / 16; ++ib) {
    const float* xb = xbl + 16 * ib;
    float w[16];
    Iq1mWeights(xb, 16, wt, w);
    for (int k = 0; k < 2; ++k) {
      const float* xx = Iq1mPoints(combo[ib], k);
      for (int j = 0; j < 8; ++j) {
        const float q = xx[lat.Level(index[ib][k], j)] * static_cast<float>(2 * l[ib] + 1);
        sumqx += w[8 * k + j] * q * xb[8 * k + j];
        sumq2 += w[8 * k + j] * q * q;
      }
    }
  }
  if (sumq2 > 0) d = sumqx / sumq2;
  return d * 1.1125f;
}

}  // namespace

void QuantIQ1_S(const float* src, void* dst, int64_t nb) {
  const IqLattice& lat = Iq1Lattice();
  auto* blocks = static_cast<BlockIQ1_S*>(dst);
  for (int64_t ibl = 0; ibl < nb; ++ibl) {
    const float* xbl = src + kQkK * ibl;
    BlockIQ1_S& y = blocks[ibl];
    y.d = ToHalf(0.0f);
    std::memset(y.qs, 0, sizeof(y.qs));
    std::memset(y.qh, 0, sizeof(y.qh));
    float sumx2 = 0;
    for (int i = 0; i < kQkK; ++i) sumx2 += xbl[i] * xbl[i];
    const float sigma2 = 2 * sumx2 / kQkK;
    float scales[kQkK / 32];
    int shifts[kQkK / 32];
    float max_scale = 0;
    for (int ib = 0; ib < kQkK / 32; ++ib) {
      uint16_t index[4];
      scales[ib] = Iq1sSubBlock(lat, xbl + 32 * ib, sigma2, index, &shifts[ib]);
      uint16_t h = 0;
      for (int k = 0; k < 4; ++k) {
        y.qs[4 * ib + k] = static_cast<uint8_t>(index[k] & 255);
        h |= static_cast<uint16_t>((index[k] >> 8) << (3 * k));
      }
      y.qh[ib] = h;
      max_scale = max_scale > scales[ib] ? max_scale : scales[ib];
    }
    if (max_scale == 0) continue;
    const float d = max_scale / 15;
    y.d = ToHalf(d * 1.125f);  // ggml's empirical factor
    const float id = 1 / d;
    for (int ib = 0; ib < kQkK / 32; ++ib) {
      int l = NearestInt(0.5f * (id * scales[ib] - 1));
      l = l < 0 ? 0 : (l > 7 ? 7 : l);
      if (shifts[ib] == -1) l |= 8;
      y.qh[ib] |= static_cast<uint16_t>(l << 12);
    }
  }
}

// The IQ1_M quantizer with either weighting (Iq1mWeighting).
static void QuantIQ1_MWeighted(const float* src, void* dst, int64_t nb, bool flat_imatrix) {
  constexpr uint8_t kSignMasks[4] = {0x00, 0x80, 0x08, 0x88};  // qh delta-sign bits per combo
  const IqLattice& lat = Iq1Lattice();
  auto* blocks = static_cast<BlockIQ1_M*>(dst);
  for (int64_t ibl = 0; ibl < nb; ++ibl) {
    const float* xbl = src + kQkK * ibl;
    BlockIQ1_M& y = blocks[ibl];
    std::memset(&y, 0, sizeof(y));
    float sumx2 = 0;
    for (int i = 0; i < kQkK; ++i) sumx2 += xbl[i] * xbl[i];
    const Iq1mWeighting wt{flat_imatrix, 2 * sumx2 / kQkK};
    float scales[kQkK / 16];
    int combo[kQkK / 16];
    uint16_t index[kQkK / 16][2];  // grid entries of the two groups of sub-block ib
    float max_scale = 0;
    for (int ib = 0; ib < kQkK / 16; ++ib) {
      scales[ib] = Iq1mSubBlock(lat, xbl + 16 * ib, wt, index[ib], &combo[ib]);
      y.qs[2 * ib] = static_cast<uint8_t>(index[ib][0] & 255);
      y.qs[2 * ib + 1] = static_cast<uint8_t>(index[ib][1] & 255);
      y.qh[ib] = static_cast<uint8_t>((index[ib][0] >> 8) | ((index[ib][1] >> 8) << 4));
      max_scale = max_scale > scales[ib] ? max_scale : scales[ib];
    }
    if (max_scale == 0) continue;
    uint16_t sc[4] = {0, 0, 0, 0};  // the 4 little-endian words of y.scales
    const float d = max_scale / 15;
    const float id = 1 / d;
    int l[kQkK / 16];
    for (int ib = 0; ib < kQkK / 16; ++ib) {
      l[ib] = NearestInt(0.5f * (id * scales[ib] - 1));
      l[ib] = l[ib] < 0 ? 0 : (l[ib] > 7 ? 7 : l[ib]);
      sc[ib / 4] |= static_cast<uint16_t>(l[ib] << (3 * (ib % 4)));
      y.qh[ib] |= kSignMasks[combo[ib]];
    }
    const uint16_t h = ToHalf(Iq1mSuperScale(lat, xbl, wt, l, index, combo, d));
    sc[0] |= static_cast<uint16_t>((h & 0x000f) << 12);
    sc[1] |= static_cast<uint16_t>((h & 0x00f0) << 8);
    sc[2] |= static_cast<uint16_t>((h & 0x0f00) << 4);
    sc[3] |= static_cast<uint16_t>(h & 0xf000);
    std::memcpy(y.scales, sc, sizeof(sc));
  }
}

void QuantIQ1_M(const float* src, void* dst, int64_t nb) {
  QuantIQ1_MWeighted(src, dst, nb, /*flat_imatrix=*/true);
}

void QuantIQ1_MNoImatrix(const float* src, void* dst, int64_t nb) {
  QuantIQ1_MWeighted(src, dst, nb, /*flat_imatrix=*/false);
}

}  // namespace moesplit::quant::internal
