// Reference quantization of IQ2_XS, IQ2_S, IQ3_XXS and IQ3_S (blocks_iq.h), following
// llama.cpp's quantize_row_iq2_xs_impl / iq2_s_impl / iq3_xxs_impl / iq3_s_impl (ggml-quants.c)
// so that the bytes are ggml's (quant_oracle_test.cc, quant_iq_test.cc compare them with
// shared/testdata/quant/).
//
// Importance matrix. llama-quantize refuses IQ2_XS, IQ2_S and IQ3_XXS without one. QuantizeRow
// quantizes all four as ggml does with a FLAT one (every weight 1.0: per-value weight w_i =
// sqrt(sigma^2 + x_i^2)), i.e. llama-quantize's bytes given an all-ones imatrix, as for IQ2_XXS
// and IQ1, so that a make-model mix is what llama-quantize writes with such an imatrix. The
// *NoImatrix variants are ggml's quantize_row_*_ref for IQ2_S (w_i = sigma^2 / 4 + x_i^2),
// IQ3_XXS and IQ3_S (x_i^2), which is how their oracle files were made.
//
// One search for all four (SearchScale), per sub-block of n values (IQ2: 16, IQ3: 32) in groups
// of the lattice's size (8, 4), on the magnitudes |x| (signs stored apart: IQ2_XS / IQ3_XXS 7
// bits a group of 8 with the 8th implied by an even count, the least-w x^2 value quantized with
// the wrong sign; IQ2_S / IQ3_S all 8 explicit):
//   trial inverse scales id = (2 kMax - 1 + is step) / max|x| (IQ2: kMax 3, is -9..9, step 0.1;
//   IQ3_XXS: kMax 8, is -15..15, step 0.2; IQ3_S: is -9..9, step 0.2); levels round((id |x| -
//   1) / 2) in 0..kMax-1 (value 2l + 1), each group snapped to the grid (exact entry, or the
//   nearest of its neighbour list by sum sqrt(w) (s q - x)^2), kept if sumqx^2 / sumq2 improves;
//   then the groups off the grid at the best trial (IQ3_S: every group, when one is off) are
//   snapped again at the best scale and the scale is refit by least squares.
// Per 256 values d = max_scale / 31 (stored times ggml's fudge: IQ2_S 0.9875, IQ3_XXS 1.0125,
// IQ3_S 1.033) and each sub-block's 4-bit s = round((scale / d - 1) / 2).
#include <cmath>
#include <cstring>
#include <limits>

#include "core/base/status.h"
#include "cpu_kernels/quant/blocks_iq.h"
#include "cpu_kernels/quant/quant_internal.h"
#include "cpu_kernels/quant/quant_iq_lattice.h"
#include "cpu_kernels/quant/quant_math.h"

namespace moesplit::quant::internal {
namespace {

constexpr int kMaxSub = 32;  // values per sub-block at most (IQ3)

// The trial grid and re-snap rule of one type's search.
struct Search {
  const IqLattice* lat;
  int kmax;         // levels 0 .. kmax - 1
  int is_min;       // trials is_min .. -is_min
  float step;       // id = (2 kmax - 1 + is step) / max
  bool resnap_all;  // IQ3_S: every group is snapped again (ggml's skip is commented out)
  bool on_grid0;    // the groups' on-grid flags before any trial (IQ3_S: false)
};

// The scale of n magnitudes xval (max > 0) and their on-grid levels L[0..n).
float SearchScale(const Search& s, int n, const float* xval, const float* weight, const float* waux,
                  float max, int8_t* L) {
  const int g = s.lat->group(), groups = n / g;
  bool on_grid[kMaxSub / 4], on_aux[kMaxSub / 4];
  for (int k = 0; k < groups; ++k) on_grid[k] = s.on_grid0;
  int8_t Laux[kMaxSub];
  std::memset(L, 0, n);
  float best = 0, scale = max / (2 * s.kmax - 1);
  for (int is = s.is_min; is <= -s.is_min; ++is) {
    const float id = (2 * s.kmax - 1 + is * s.step) / max;
    const float this_scale = 1 / id;
    for (int k = 0; k < groups; ++k) {
      on_aux[k] =
          SnapLevels(*s.lat, s.kmax, xval + g * k, waux + g * k, id, this_scale, Laux + g * k);
    }
    float sumqx, sumq2;
    OddSums(n, xval, weight, Laux, &sumqx, &sumq2);
    if (sumq2 > 0 && sumqx * sumqx > best * sumq2) {
      scale = sumqx / sumq2;
      best = scale * sumqx;
      std::memcpy(L, Laux, n);
      for (int k = 0; k < groups; ++k) on_grid[k] = on_aux[k];
    }
  }
  int off_grid = 0;
  for (int k = 0; k < groups; ++k) off_grid += !on_grid[k];
  if (off_grid > 0 && scale > 0) {
    const float id = 1 / scale;
    for (int k = 0; k < groups; ++k) {
      if (s.resnap_all || !on_grid[k])
        SnapLevels(*s.lat, s.kmax, xval + g * k, waux + g * k, id, scale, L + g * k);
    }
    float sumqx, sumq2;
    OddSums(n, xval, weight, L, &sumqx, &sumq2);
    if (sumq2 > 0) scale = sumqx / sumq2;
  }
  return scale;
}

// How a type weighs its values: w_i = sqrt(sigma2 + x_i^2) (a flat importance matrix), sigma2 /
// 4 + x_i^2 (IQ2_S without one) or x_i^2 (IQ3 without one).
enum class Weighting { kFlatImatrix, kQuarterSigma, kSquare };

void Weights(Weighting how, int n, const float* xb, float sigma2, float* w, float* waux) {
  for (int i = 0; i < n; ++i) {
    switch (how) {
      case Weighting::kFlatImatrix:
        w[i] = std::sqrt(sigma2 + xb[i] * xb[i]);
        break;
      case Weighting::kQuarterSigma:
        w[i] = 0.25f * sigma2 + xb[i] * xb[i];
        break;
      case Weighting::kSquare:
        w[i] = xb[i] * xb[i];
        break;
    }
    waux[i] = std::sqrt(w[i]);
  }
}

// One sub-block of n values: false if its largest magnitude is below eps (ggml stores nothing
// for it), else its scale, on-grid levels L and per-8-value sign bytes `signs` (flipped, as
// ggml does, if the scale came out negative).
bool QuantizeSub(const Search& s, Weighting how, bool parity, float eps, int n, const float* xb,
                 float sigma2, float* scale, int8_t* L, uint8_t* signs) {
  float weight[kMaxSub], waux[kMaxSub], xval[kMaxSub];
  Weights(how, n, xb, sigma2, weight, waux);
  for (int k = 0; k < n / 8; ++k) {
    signs[k] = GroupSigns(xb + 8 * k, weight + 8 * k, parity, xval + 8 * k);
  }
  float max = xval[0];
  for (int i = 1; i < n; ++i) max = max > xval[i] ? max : xval[i];
  if (max < eps) return false;
  *scale = SearchScale(s, n, xval, weight, waux, max, L);
  if (*scale < 0) {  // ggml guards it (never seen): flip the scale and the stored signs
    *scale = -*scale;
    for (int k = 0; k < n / 8; ++k) {
      signs[k] = static_cast<uint8_t>(~signs[k] & (parity ? 127 : 255));
    }
  }
  return true;
}

// The 4-bit sub-block scale round((scale / d - 1) / 2) for id = 1 / d.
int ScaleNibble(float scale, float id) {
  const int l = NearestInt(0.5f * (id * scale - 1));
  return l < 0 ? 0 : (l > 15 ? 15 : l);
}

float Sigma2(const float* xbl, float factor) {
  float sumx2 = 0;
  for (int i = 0; i < kQkK; ++i) sumx2 += xbl[i] * xbl[i];
  return factor * sumx2 / kQkK;
}

// What differs between the four types' block loops.
struct BlockRule {
  Weighting how;
  bool parity;         // 7 stored sign bits per 8 values (IQ2_XS, IQ3_XXS)
  float eps;           // sub-blocks whose largest |x| is below it store nothing
  float sigma_factor;  // sigma^2 = factor * mean x^2 (IQ2_XS: 1, the others 2)
  float d_fudge;       // the stored d is max_scale / 31 times this
};

// The 256-value blocks of kSub-value sub-blocks (IQ2: 16, IQ3: 32): sub-block ib's grid entries
// (kSub / group of them) and kSub / 8 sign bytes go to store(block, ib, entries, signs), its
// 4-bit scales to put_scales(block, nibbles[kQkK / kSub]).
template <int kSub, typename Block, typename Store, typename PutScales>
void QuantBlocks(const Search& s, const BlockRule& rule, const float* src, Block* blocks,
                 int64_t nb, Store store, PutScales put_scales) {
  const int g = s.lat->group();
  for (int64_t ibl = 0; ibl < nb; ++ibl) {
    const float* xbl = src + kQkK * ibl;
    Block& y = blocks[ibl];
    std::memset(&y, 0, sizeof(y));
    const float sigma2 = Sigma2(xbl, rule.sigma_factor);
    float scales[kQkK / kSub] = {}, max_scale = 0;
    for (int ib = 0; ib < kQkK / kSub; ++ib) {
      int8_t L[kSub];
      uint8_t signs[kSub / 8];
      if (!QuantizeSub(s, rule.how, rule.parity, rule.eps, kSub, xbl + kSub * ib, sigma2,
                       &scales[ib], L, signs)) {
        continue;
      }
      int entries[kSub / 4];  // [kSub / g]
      for (int k = 0; k < kSub / g; ++k) entries[k] = s.lat->Entry(L + g * k);
      store(y, ib, entries, signs);
      max_scale = max_scale > scales[ib] ? max_scale : scales[ib];
    }
    if (!(max_scale != 0)) {
      std::memset(&y, 0, sizeof(y));
      continue;
    }
    const float d = max_scale / 31;
    y.d = ToHalf(d * rule.d_fudge);
    const float id = 1 / d;
    int nibbles[kQkK / kSub];
    for (int ib = 0; ib < kQkK / kSub; ++ib) nibbles[ib] = ScaleNibble(scales[ib], id);
    put_scales(y, nibbles);
  }
}

// IQ2_XS / IQ2_S: two 4-bit scales per byte, sub-block ib's in nibble ib % 2 of byte ib / 2.
template <typename Block>
void PutIq2Scales(Block& y, const int* nibbles) {
  for (int ib = 0; ib < kQkK / 16; ++ib) {
    y.scales[ib / 2] |= static_cast<uint8_t>(nibbles[ib] << (4 * (ib % 2)));
  }
}

void QuantIq2S(Weighting how, const float* src, void* dst, int64_t nb) {
  static const Search s{&Iq2SLattice(), 3, -9, 0.1f, false, true};
  QuantBlocks<16>(
      s, {how, false, 1e-8f, 2.0f, 0.9875f}, src, static_cast<BlockIQ2_S*>(dst), nb,
      [](BlockIQ2_S& y, int ib, const int* entries, const uint8_t* signs) {
        for (int k = 0; k < 2; ++k) {
          const int i8 = 2 * ib + k;
          y.qs[i8] = static_cast<uint8_t>(entries[k] & 255);
          y.qh[i8 / 4] |= static_cast<uint8_t>((entries[k] >> 8) << (2 * (i8 % 4)));
          y.qs[kQkK / 8 + i8] = signs[k];
        }
      },
      PutIq2Scales<BlockIQ2_S>);
}

void QuantIq3Xxs(Weighting how, const float* src, void* dst, int64_t nb) {
  static const Search s{&Iq3XxsLattice(), 8, -15, 0.2f, false, true};
  QuantBlocks<32>(
      s, {how, true, 1e-8f, 2.0f, 1.0125f}, src, static_cast<BlockIQ3_XXS*>(dst), nb,
      [](BlockIQ3_XXS& y, int ib, const int* entries, const uint8_t* signs) {
        for (int k = 0; k < 8; ++k) y.qs[8 * ib + k] = static_cast<uint8_t>(entries[k]);
        const uint32_t word = signs[0] | signs[1] << 7 | signs[2] << 14 | signs[3] << 21;
        std::memcpy(y.qs + kQkK / 4 + 4 * ib, &word, 4);
      },
      [](BlockIQ3_XXS& y, const int* nibbles) {
        for (int ib = 0; ib < kQkK / 32; ++ib) {
          uint32_t word;
          std::memcpy(&word, y.qs + kQkK / 4 + 4 * ib, 4);
          word |= static_cast<uint32_t>(nibbles[ib]) << 28;
          std::memcpy(y.qs + kQkK / 4 + 4 * ib, &word, 4);
        }
      });
}

// ggml's `!max` test: skip only an all-zero sub-block (the least positive float as eps).
void QuantIq3S(Weighting how, const float* src, void* dst, int64_t nb) {
  static const Search s{&Iq3SLattice(), 8, -9, 0.2f, true, false};
  QuantBlocks<32>(
      s, {how, false, std::numeric_limits<float>::denorm_min(), 2.0f, 1.033f}, src,
      static_cast<BlockIQ3_S*>(dst), nb,
      [](BlockIQ3_S& y, int ib, const int* entries, const uint8_t* signs) {
        for (int k = 0; k < 8; ++k) {
          y.qs[8 * ib + k] = static_cast<uint8_t>(entries[k] & 255);
          y.qh[ib] |= static_cast<uint8_t>((entries[k] >> 8) << k);
        }
        for (int k = 0; k < 4; ++k) y.signs[4 * ib + k] = signs[k];
      },
      [](BlockIQ3_S& y, const int* nibbles) {
        for (int ib = 0; ib < kQkK / 32; ib += 2) {
          y.scales[ib / 2] = static_cast<uint8_t>(nibbles[ib] | nibbles[ib + 1] << 4);
        }
      });
}

}  // namespace

void QuantIQ3_XXS(const float* src, void* dst, int64_t nb) {
  QuantIq3Xxs(Weighting::kFlatImatrix, src, dst, nb);
}
void QuantIQ3_XXSNoImatrix(const float* src, void* dst, int64_t nb) {
  QuantIq3Xxs(Weighting::kSquare, src, dst, nb);
}
void QuantIQ3_S(const float* src, void* dst, int64_t nb) {
  QuantIq3S(Weighting::kFlatImatrix, src, dst, nb);
}
void QuantIQ3_SNoImatrix(const float* src, void* dst, int64_t nb) {
  QuantIq3S(Weighting::kSquare, src, dst, nb);
}

void QuantIQ2_XS(const float* src, void* dst, int64_t nb) {
  static const Search s{&Iq2XsLattice(), 3, -9, 0.1f, false, true};
  QuantBlocks<16>(
      s, {Weighting::kFlatImatrix, true, 1e-15f, 1.0f, 1.0f}, src, static_cast<BlockIQ2_XS*>(dst),
      nb,
      [](BlockIQ2_XS& y, int ib, const int* entries, const uint8_t* signs) {
        for (int k = 0; k < 2; ++k) {
          y.qs[2 * ib + k] = static_cast<uint16_t>(entries[k] | (signs[k] << 9));
        }
      },
      PutIq2Scales<BlockIQ2_XS>);
}

void QuantIQ2_S(const float* src, void* dst, int64_t nb) {
  QuantIq2S(Weighting::kFlatImatrix, src, dst, nb);
}
void QuantIQ2_SNoImatrix(const float* src, void* dst, int64_t nb) {
  QuantIq2S(Weighting::kQuarterSigma, src, dst, nb);
}

}  // namespace moesplit::quant::internal
