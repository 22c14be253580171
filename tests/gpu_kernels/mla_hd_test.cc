// Host checks of the GPU MLA attention's arithmetic (gpu_kernels/mla_hd.h): the online softmax
// over tiles and the merge of position-split partials against a direct double-precision
// softmax-weighted sum, the split plan, the bf16 pair decode.
#include "gpu_kernels/mla_hd.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "core/base/float16.h"

namespace moesplit::gpu {
namespace {

constexpr int kDim = 8;  // values per position in these tests (the kernel's is 512)

// One partial: (m, l) as the kernel's workspace stores them, acc [kDim].
struct Partial {
  float ml[2];
  std::vector<float> acc;
};

// The kernel's per-split loop on the host: positions [b, e) in tiles of `tile` starting at b,
// positions >= e in the last tile masked (-inf); `extra_masked_tiles` fully masked tiles after
// that (a tile_max of -inf in the middle of the stream). s [n] scores, v [n x kDim] values.
Partial RunPartial(const std::vector<float>& s, const std::vector<float>& v, int b, int e, int tile,
                   int extra_masked_tiles) {
  MlaSoftmaxState st = MlaEmptyState();
  std::vector<float> acc(kDim, 0.0f), p(static_cast<size_t>(tile));
  const int tiles = (e - b + tile - 1) / tile + extra_masked_tiles;
  for (int k = 0; k < tiles; ++k) {
    const int t0 = b + k * tile;
    float tile_max = -INFINITY;
    for (int i = 0; i < tile; ++i) {
      p[i] = t0 + i < e ? s[t0 + i] : -INFINITY;
      tile_max = std::max(tile_max, p[i]);
    }
    const float alpha = MlaOnlineRescale(&st, tile_max);
    for (float& a : acc) a *= alpha;
    float sum = 0.0f;
    for (int i = 0; i < tile; ++i) {
      p[i] = MlaExpShift(p[i], st.m);
      sum += p[i];
      for (int d = 0; d < kDim && t0 + i < e; ++d) acc[d] += p[i] * v[(t0 + i) * kDim + d];
    }
    st.l += sum;
  }
  return {{st.m, st.l}, acc};
}

// The merge kernel on the host: out [kDim] = sum_i w_i acc_i.
std::vector<float> Merge(const std::vector<Partial>& parts) {
  std::vector<float> ml, w(parts.size());
  for (const Partial& p : parts) ml.insert(ml.end(), p.ml, p.ml + 2);
  MlaMergeWeights(ml.data(), static_cast<int>(parts.size()), w.data());
  std::vector<float> out(kDim, 0.0f);
  for (size_t i = 0; i < parts.size(); ++i) {
    for (int d = 0; d < kDim; ++d) out[d] = std::fma(w[i], parts[i].acc[d], out[d]);
  }
  return out;
}

// sum_s softmax(s)_s v_s in double.
std::vector<double> DirectSoftmax(const std::vector<float>& s, const std::vector<float>& v) {
  const double m = *std::max_element(s.begin(), s.end());
  std::vector<double> out(kDim, 0.0);
  double l = 0.0;
  for (size_t i = 0; i < s.size(); ++i) {
    const double p = std::exp(static_cast<double>(s[i]) - m);
    l += p;
    for (int d = 0; d < kDim; ++d) out[d] += p * v[i * kDim + d];
  }
  for (double& o : out) o /= l;
  return out;
}

TEST(GpuMlaHd, ExpShiftAndRescaleEdgeCases) {
  EXPECT_EQ(MlaExpShift(-INFINITY, 3.0f), 0.0f);
  EXPECT_EQ(MlaExpShift(-INFINITY, -INFINITY), 0.0f);  // not NaN
  EXPECT_EQ(MlaExpShift(2.0f, 2.0f), 1.0f);
  MlaSoftmaxState st = MlaEmptyState();
  EXPECT_EQ(MlaOnlineRescale(&st, -INFINITY), 0.0f);  // a fully masked first tile
  EXPECT_EQ(st.m, -INFINITY);
  EXPECT_EQ(st.l, 0.0f);
  EXPECT_EQ(MlaOnlineRescale(&st, 5.0f), 0.0f);  // nothing accumulated yet: acc *= 0
  EXPECT_EQ(st.m, 5.0f);
  st.l = 2.0f;
  EXPECT_EQ(MlaOnlineRescale(&st, -INFINITY), 1.0f);  // a masked tile later changes nothing
  EXPECT_EQ(st.l, 2.0f);
  EXPECT_FLOAT_EQ(MlaOnlineRescale(&st, 6.0f), std::exp(-1.0f));
  EXPECT_FLOAT_EQ(st.l, 2.0f * std::exp(-1.0f));
  EXPECT_EQ(MlaSafeInverse(0.0f), 0.0f);
  EXPECT_EQ(MlaSafeInverse(4.0f), 0.25f);
}

TEST(GpuMlaHd, MergeOfEmptyPartialsIsZeroNotNan) {
  const float ml[6] = {-INFINITY, 0.0f, -INFINITY, 0.0f, -INFINITY, 0.0f};
  float w[3] = {1.0f, 1.0f, 1.0f};
  MlaMergeWeights(ml, 3, w);
  for (float x : w) EXPECT_EQ(x, 0.0f);
  // One real partial among empty ones takes all the weight: w = 1 / l.
  const float ml2[6] = {-INFINITY, 0.0f, 700.0f, 4.0f, -INFINITY, 0.0f};
  MlaMergeWeights(ml2, 3, w);
  EXPECT_EQ(w[0], 0.0f);
  EXPECT_EQ(w[1], 0.25f);
  EXPECT_EQ(w[2], 0.0f);
}

// Random scores (spread up to +-1000: exp would overflow without the max shift), values in
// [-1, 1], positions cut into random partials (empty ones included, some with fully masked
// tiles), each run tile by tile as the kernel does, merged as the merge kernel does.
// Bound: the result is a convex combination of values with |v| <= 1 computed in f32; each of
// the n-term sums (l, acc) has a relative rounding error <= (n - 1) 2^-24 in the worst case, each
// weight exp() a few ulp, so |out - direct| <= (2 n + 16) 2^-24. Observed: ~6% of it.
TEST(GpuMlaHd, MergeOfRandomSplitsMatchesDirectSoftmax) {
  std::mt19937 rng(1234);
  const int sizes[] = {1, 2, 7, 33, 500, 4097};
  const float ranges[] = {0.5f, 20.0f, 1000.0f};
  double worst_ratio = 0.0;
  for (int n : sizes) {
    for (float range : ranges) {
      for (int trial = 0; trial < 6; ++trial) {
        std::uniform_real_distribution<float> us(-range, range), uv(-1.0f, 1.0f);
        std::vector<float> s(n), v(static_cast<size_t>(n) * kDim);
        for (float& x : s) x = us(rng);
        for (float& x : v) x = uv(rng);
        // 1 .. 8 cut points in [0, n] (repeats: empty partials), plus an empty [n, n) at the end.
        std::vector<int> cuts = {0, n, n};
        const int n_cuts = std::uniform_int_distribution<int>(0, 7)(rng);
        for (int c = 0; c < n_cuts; ++c) {
          cuts.push_back(std::uniform_int_distribution<int>(0, n)(rng));
        }
        std::sort(cuts.begin(), cuts.end());
        const int tile = std::vector<int>{1, 5, 32}[trial % 3];
        std::vector<Partial> parts;
        for (size_t c = 0; c + 1 < cuts.size(); ++c) {
          parts.push_back(
              RunPartial(s, v, cuts[c], cuts[c + 1], tile, (trial + static_cast<int>(c)) % 2));
        }
        std::shuffle(parts.begin(), parts.end(), rng);  // merge order must not matter
        const std::vector<float> got = Merge(parts);
        const std::vector<double> want = DirectSoftmax(s, v);
        const double bound = (2.0 * n + 16.0) * std::ldexp(1.0, -24);
        for (int d = 0; d < kDim; ++d) {
          const double err = std::fabs(got[d] - want[d]);
          ASSERT_LE(err, bound) << "n " << n << " range " << range << " trial " << trial << " dim "
                                << d << ": " << got[d] << " vs " << want[d];
          worst_ratio = std::max(worst_ratio, err / bound);
        }
      }
    }
  }
  std::printf("worst error / bound: %.3g\n", worst_ratio);
}

// A partial whose max is far above the others: theirs underflow to weight 0, no NaN or inf.
TEST(GpuMlaHd, MergeWithDominantPartial) {
  std::vector<float> s = {-500.0f, -499.0f, 300.0f, 301.0f, -80.0f};
  std::vector<float> v(s.size() * kDim);
  for (size_t i = 0; i < v.size(); ++i) v[i] = std::sin(static_cast<float>(i));
  const std::vector<Partial> parts = {RunPartial(s, v, 0, 2, 32, 0), RunPartial(s, v, 2, 4, 32, 0),
                                      RunPartial(s, v, 4, 5, 32, 0)};
  const std::vector<float> got = Merge(parts);
  const std::vector<double> want = DirectSoftmax(s, v);
  for (int d = 0; d < kDim; ++d) EXPECT_NEAR(got[d], want[d], 1e-6) << d;
}

TEST(GpuMlaHd, SplitPlanCoversEveryRow) {
  for (int64_t n_tok : {1, 2, 33, 300}) {
    for (int64_t n_head : {1, 16, 17, 128}) {
      for (int64_t pos0 : {0, 5, 600, 4096, 100000}) {
        for (int64_t forced : {0, 1, 3, 64, 100}) {
          const MlaSplitPlan p = MlaPlanSplits(n_tok, n_head, pos0, forced);
          const int64_t n_max = pos0 + n_tok;
          SCOPED_TRACE(testing::Message()
                       << n_tok << " " << n_head << " " << pos0 << " " << forced);
          EXPECT_GE(p.n_split, 1);
          EXPECT_LE(p.n_split, kMlaMaxSplits);
          EXPECT_EQ(p.chunk % kMlaTile, 0);
          EXPECT_LT((p.n_split - 1) * p.chunk, n_max);  // the longest row reaches the last split
          EXPECT_LE(n_max, p.n_split * p.chunk);        // and every row is covered
          if (forced > 0) {
            EXPECT_LE(p.n_split, forced);
          }
        }
      }
    }
  }
  // Decode at 4097 positions splits (16 heads: one head group, 17 splits of 256); a prefill of
  // 33 tokens at position 5 does not; 300 tokens x 8 head groups are enough blocks.
  EXPECT_EQ(MlaPlanSplits(1, 16, 4096, 0).n_split, 17);
  EXPECT_GT(MlaPlanSplits(1, 128, 4096, 0).n_split, 1);
  EXPECT_EQ(MlaPlanSplits(33, 16, 5, 0).n_split, 1);
  EXPECT_EQ(MlaPlanSplits(300, 128, 4096, 0).n_split, 1);
  EXPECT_EQ(MlaPlanSplits(1, 16, 0, 0).n_split, 1);
}

TEST(GpuMlaHd, Bf16PairDecodeMatchesFloat16H) {
  std::mt19937 rng(7);
  for (int i = 0; i < 10000; ++i) {
    const uint32_t w = rng();
    const MlaFloatPair p = MlaBf16PairToFloats(w);
    const float lo = Bf16ToFp32(static_cast<uint16_t>(w & 0xffffu));
    const float hi = Bf16ToFp32(static_cast<uint16_t>(w >> 16));
    EXPECT_EQ(FloatToBits(p.x), FloatToBits(lo));
    EXPECT_EQ(FloatToBits(p.y), FloatToBits(hi));
  }
}

}  // namespace
}  // namespace moesplit::gpu
