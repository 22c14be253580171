// The GPU element-wise ops' and router's arithmetic (gpu_kernels/rope_hd.h, ops_hd.h,
// router_hd.h) on the host against the CPU reference (cpu_kernels/ops, moe::Route). The
// operations are the same, so the host results must be bit-exact; the tests also replay the
// kernels' parallel decompositions (strided partial sums, warp arg-max) on the host.
#include "gpu_kernels/ops_hd.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "cpu_kernels/ops/ops.h"
#include "gpu_kernels/rope_hd.h"
#include "gpu_kernels/router_hd.h"
#include "moe/routing.h"

namespace moesplit::gpu {
namespace {

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

uint32_t Bits(float f) {
  uint32_t u = 0;
  std::memcpy(&u, &f, sizeof(u));
  return u;
}

std::vector<float> RandomVec(size_t n, float lo, float hi, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

// ---------------------------------------------------------------------------------------------
// RoPE / YaRN
// ---------------------------------------------------------------------------------------------

// DeepSeek-V3 as core/model/model_config.cc derives it: YaRN factor 40 (freq_scale 1/40),
// original context 4096, beta 32 / 1, attn_factor = 1 / (1 + 0.1 ln 40) (the V3 log multiplier
// 0.1 gives mscale ratio 1, then ggml's own YaRN magnitude factor is cancelled).
ops::RopeParams DeepseekV3Rope(ops::RopeStyle style) {
  ops::RopeParams p;
  p.n_dims = 64;
  p.style = style;
  p.freq_base = 10000.0f;
  p.freq_scale = 1.0f / 40.0f;
  p.ext_factor = 1.0f;
  const float ln_s = std::log(40.0f);
  p.attn_factor = 1.0f / (1.0f + 0.1f * ln_s);
  p.beta_fast = 32.0f;
  p.beta_slow = 1.0f;
  p.n_ctx_orig = 4096;
  return p;
}

ops::RopeParams PlainRope(ops::RopeStyle style) {
  ops::RopeParams p;
  p.n_dims = 128;
  p.style = style;
  p.freq_base = 1000000.0f;
  return p;
}

TEST(GpuRopeHd, YarnCorrDimsBitExact) {
  for (int n_dims : {64, 128}) {
    ops::RopeParams p = DeepseekV3Rope(ops::RopeStyle::kNormal);
    p.n_dims = n_dims;
    float lo_ref = kNaN, hi_ref = kNaN, lo = kNaN, hi = kNaN;
    ops::YarnCorrDims(p, &lo_ref, &hi_ref);
    RopeYarnCorrDims(p, &lo, &hi);
    EXPECT_EQ(Bits(lo), Bits(lo_ref)) << n_dims;
    EXPECT_EQ(Bits(hi), Bits(hi_ref)) << n_dims;
  }
}

// The cos/sin table and the rotation of a head: bit-exact against ops::RopeCosSin / RopeApply
// (same float operations in the same order; no FMA on either side).
void CheckRope(const ops::RopeParams& p, int head_dim) {
  const int n = p.n_dims;
  for (int64_t pos : {int64_t{0}, int64_t{1}, int64_t{4095}, int64_t{100000}}) {
    std::vector<float> cs_ref(n, kNaN), cs(n, kNaN);
    ops::RopeCosSin(p, pos, cs_ref.data());
    RopeCosSinTable(p, pos, cs.data());
    for (int i = 0; i < n; ++i) {
      ASSERT_EQ(Bits(cs[i]), Bits(cs_ref[i])) << "pos " << pos << " entry " << i;
    }
    // The kernel's per-pair form with constants made once.
    const RopeConsts k = RopeConstsFor(p);
    for (int i = 0; i < n / 2; ++i) {
      float c = kNaN, s = kNaN;
      RopeCosSinAt(p, k, pos, i, &c, &s);
      ASSERT_EQ(Bits(c), Bits(cs_ref[2 * i])) << "pos " << pos << " pair " << i;
      ASSERT_EQ(Bits(s), Bits(cs_ref[2 * i + 1])) << "pos " << pos << " pair " << i;
    }
    const std::vector<float> x = RandomVec(head_dim, -2.0f, 2.0f, static_cast<uint32_t>(pos + 7));
    std::vector<float> y_ref = x, y = x;
    ops::RopeApply(p, cs_ref.data(), y_ref.data());
    RopeApplyTable(p, cs.data(), y.data());
    for (int i = 0; i < head_dim; ++i) {
      ASSERT_EQ(Bits(y[i]), Bits(y_ref[i])) << "pos " << pos << " dim " << i;
    }
    for (int i = n; i < head_dim; ++i) EXPECT_EQ(Bits(y[i]), Bits(x[i]));  // not rotated
  }
}

TEST(GpuRopeHd, DeepseekV3YarnNormalBitExact) {
  CheckRope(DeepseekV3Rope(ops::RopeStyle::kNormal), 64);
}
TEST(GpuRopeHd, DeepseekV3YarnNeoxBitExact) {
  CheckRope(DeepseekV3Rope(ops::RopeStyle::kNeox), 96);
}
TEST(GpuRopeHd, PlainNormalBitExact) { CheckRope(PlainRope(ops::RopeStyle::kNormal), 128); }
TEST(GpuRopeHd, PlainNeoxBitExact) { CheckRope(PlainRope(ops::RopeStyle::kNeox), 160); }
TEST(GpuRopeHd, PlainWithAttnFactorBitExact) {
  ops::RopeParams p = PlainRope(ops::RopeStyle::kNormal);
  p.n_dims = 6;  // fewer pairs than a warp, 3 pairs
  p.freq_scale = 0.25f;
  p.attn_factor = 0.75f;
  CheckRope(p, 10);
}

// ---------------------------------------------------------------------------------------------
// RMSNorm, SwiGLU, softmax
// ---------------------------------------------------------------------------------------------

// ops::RmsNorm's sequential double sum, then the hd scale / apply: bit-exact.
TEST(GpuOpsHd, RmsNormBitExact) {
  for (int64_t n : {int64_t{1}, int64_t{33}, int64_t{511}, int64_t{7168}}) {
    const std::vector<float> x = RandomVec(n, -3.0f, 3.0f, static_cast<uint32_t>(n));
    const std::vector<float> w = RandomVec(n, 0.5f, 1.5f, static_cast<uint32_t>(n + 1));
    for (const float* wp : {w.data(), static_cast<const float*>(nullptr)}) {
      std::vector<float> ref(n, kNaN), y(n, kNaN);
      ops::RmsNorm(x.data(), wp, n, 1e-6f, ref.data());
      double sum = 0.0;
      for (int64_t i = 0; i < n; ++i) sum += static_cast<double>(x[i]) * x[i];
      const float scale = RmsNormScale(sum, n, 1e-6f);
      for (int64_t i = 0; i < n; ++i) y[i] = RmsNormApply(x[i], scale, wp, i);
      for (int64_t i = 0; i < n; ++i) ASSERT_EQ(Bits(y[i]), Bits(ref[i])) << n << " " << i;
    }
  }
}

// A GPU-like summation order (256 strided partials, then a pairwise tree) keeps the result within
// the bound ops.h states: 4 ulp.
TEST(GpuOpsHd, RmsNormTreeOrderWithinFourUlp) {
  const int64_t n = 7168;
  for (uint32_t seed = 0; seed < 20; ++seed) {
    const std::vector<float> x = RandomVec(n, -3.0f, 3.0f, seed);
    std::vector<float> ref(n, kNaN);
    ops::RmsNorm(x.data(), nullptr, n, 1e-6f, ref.data());
    std::vector<double> part(256, 0.0);
    for (int64_t i = 0; i < n; ++i) part[i % 256] += static_cast<double>(x[i]) * x[i];
    for (size_t width = 128; width >= 1; width /= 2) {
      for (size_t j = 0; j < width; ++j) part[j] += part[j + width];
    }
    const float scale = RmsNormScale(part[0], n, 1e-6f);
    for (int64_t i = 0; i < n; ++i) {
      const float y = RmsNormApply(x[i], scale, nullptr, i);
      const float ulp = std::nextafter(std::fabs(ref[i]), INFINITY) - std::fabs(ref[i]);
      ASSERT_LE(std::fabs(y - ref[i]), 4.0f * ulp) << "seed " << seed << " i " << i;
    }
  }
}

TEST(GpuOpsHd, SwiGluBitExact) {
  const int64_t n = 1000;
  std::vector<float> gate = RandomVec(n, -20.0f, 20.0f, 3);
  const std::vector<float> up = RandomVec(n, -2.0f, 2.0f, 4);
  std::vector<float> y(n, kNaN);
  for (int64_t i = 0; i < n; ++i) y[i] = SiluMul(gate[i], up[i]);
  ops::SwiGluInPlace(gate.data(), up.data(), n);
  for (int64_t i = 0; i < n; ++i) ASSERT_EQ(Bits(y[i]), Bits(gate[i])) << i;
}

TEST(GpuOpsHd, SoftmaxBitExact) {
  for (int64_t n : {int64_t{1}, int64_t{7}, int64_t{256}, int64_t{1000}}) {
    std::vector<float> x = RandomVec(n, -10.0f, 10.0f, static_cast<uint32_t>(n));
    if (n > 2) x[1] = -INFINITY;  // a masked entry
    std::vector<float> y(n, kNaN);
    float max = -INFINITY;
    for (float v : x) max = std::max(max, v);
    double sum = 0.0;
    for (int64_t i = 0; i < n; ++i) sum += y[i] = SoftmaxExp(x[i], max);
    const float inv = SoftmaxInv(sum);
    for (float& v : y) v *= inv;
    ops::Softmax(x.data(), n);
    for (int64_t i = 0; i < n; ++i) ASSERT_EQ(Bits(y[i]), Bits(x[i])) << n << " " << i;
  }
}

// ---------------------------------------------------------------------------------------------
// Router
// ---------------------------------------------------------------------------------------------

struct RouterCase {
  moe::RouterConfig ref;
  RouterConfig gpu;
};

RouterCase MakeRouter(int E, int k, int groups, int groups_used, bool sigmoid, bool norm,
                      float scale) {
  RouterCase c;
  c.ref.n_expert = c.gpu.n_expert = E;
  c.ref.n_expert_used = c.gpu.n_expert_used = k;
  c.ref.n_group = c.gpu.n_group = groups;
  c.ref.n_group_used = c.gpu.n_group_used = groups_used;
  c.ref.gating = sigmoid ? moe::Gating::kSigmoid : moe::Gating::kSoftmax;
  c.gpu.gating = sigmoid ? RouterGating::kSigmoid : RouterGating::kSoftmax;
  c.ref.norm_weights = c.gpu.norm_weights = norm;
  c.ref.weights_scale = c.gpu.weights_scale = scale;
  return c;
}

// The kernel's top-k: lane l scans experts l, l + 32, ...; a butterfly of RouterBetter picks the
// warp's best; k rounds, each after the previous pick.
void WarpTopKEmulated(const float* select, int E, int k, int32_t* out) {
  float prev_v = 0.0f;
  int prev_i = -1;
  for (int j = 0; j < k; ++j) {
    float v[32];
    int idx[32];
    for (int lane = 0; lane < 32; ++lane) {
      idx[lane] = RouterBestAfter(select, lane, E, 32, prev_v, prev_i, &v[lane]);
    }
    for (int o = 16; o > 0; o >>= 1) {
      float nv[32];
      int ni[32];
      for (int lane = 0; lane < 32; ++lane) {
        const int other = lane ^ o;
        nv[lane] = v[lane];
        ni[lane] = idx[lane];
        if (idx[other] >= 0 &&
            (idx[lane] < 0 || RouterBetter(v[other], idx[other], v[lane], idx[lane]))) {
          nv[lane] = v[other];
          ni[lane] = idx[other];
        }
      }
      std::copy(nv, nv + 32, v);
      std::copy(ni, ni + 32, idx);
    }
    for (int lane = 1; lane < 32; ++lane) ASSERT_EQ(idx[lane], idx[0]);  // warp-uniform
    out[j] = idx[0];
    prev_v = v[0];
    prev_i = idx[0];
  }
}

// Routes n_tok tokens with moe::Route and with RouteToken (and the warp top-k replay): ids
// identical, weights bit-exact (the tolerance 1e-6 relative is never needed).
void CheckRouter(const RouterCase& c, const std::vector<float>& logits, const float* bias) {
  const int E = c.gpu.n_expert, k = c.gpu.n_expert_used;
  const int64_t n_tok = static_cast<int64_t>(logits.size()) / E;
  std::vector<int32_t> ids_ref(n_tok * k, -1), ids(n_tok * k, -1);
  std::vector<float> w_ref(n_tok * k, kNaN), w(n_tok * k, kNaN);
  moe::Route(c.ref, logits.data(), bias, n_tok, ids_ref.data(), w_ref.data());
  std::vector<float> scores(E, kNaN), select(E, kNaN), group_score(std::max(1, c.gpu.n_group));
  for (int64_t t = 0; t < n_tok; ++t) {
    RouteToken(c.gpu, logits.data() + t * E, bias, scores.data(), select.data(), group_score.data(),
               ids.data() + t * k, w.data() + t * k);
    std::vector<int32_t> warp_ids(k, -1);
    WarpTopKEmulated(select.data(), E, k, warp_ids.data());
    for (int j = 0; j < k; ++j) ASSERT_EQ(warp_ids[j], ids[t * k + j]) << "token " << t;
  }
  for (int64_t i = 0; i < n_tok * k; ++i) {
    ASSERT_EQ(ids[i], ids_ref[i]) << "token " << i / k << " slot " << i % k;
    EXPECT_NEAR(w[i], w_ref[i], 1e-6 * std::fabs(w_ref[i])) << i;
    EXPECT_EQ(Bits(w[i]), Bits(w_ref[i])) << i;
  }
}

TEST(GpuRouterHd, DeepseekV3SigmoidBiasGroups) {
  const RouterCase c = MakeRouter(256, 8, 8, 4, /*sigmoid=*/true, /*norm=*/true, 2.5f);
  const std::vector<float> logits = RandomVec(256 * 37, -4.0f, 4.0f, 11);
  const std::vector<float> bias = RandomVec(256, -0.5f, 0.5f, 12);
  CheckRouter(c, logits, bias.data());
  CheckRouter(c, logits, nullptr);
}

TEST(GpuRouterHd, DeepseekV2LiteSoftmax) {
  const RouterCase c = MakeRouter(64, 6, 0, 0, /*sigmoid=*/false, /*norm=*/false, 1.0f);
  CheckRouter(c, RandomVec(64 * 29, -6.0f, 6.0f, 13), nullptr);
  const RouterCase norm = MakeRouter(64, 6, 1, 1, /*sigmoid=*/false, /*norm=*/true, 0.0f);
  CheckRouter(norm, RandomVec(64 * 5, -6.0f, 6.0f, 14), nullptr);
}

TEST(GpuRouterHd, OddShapes) {
  // E not a multiple of 32, k = E, groups of one expert.
  CheckRouter(MakeRouter(7, 7, 0, 0, false, true, 0.0f), RandomVec(7 * 3, -1.0f, 1.0f, 15),
              nullptr);
  const std::vector<float> bias = RandomVec(12, -0.1f, 0.1f, 16);
  CheckRouter(MakeRouter(12, 3, 12, 5, true, true, 1.5f), RandomVec(12 * 4, -2.0f, 2.0f, 17),
              bias.data());
  CheckRouter(MakeRouter(512, 16, 16, 3, true, false, 0.0f), RandomVec(512 * 3, -3.0f, 3.0f, 18),
              nullptr);
}

// Exact ties everywhere: lower index first, for experts and for groups.
TEST(GpuRouterHd, Ties) {
  const RouterCase v3 = MakeRouter(256, 8, 8, 4, true, true, 2.5f);
  std::vector<float> logits(256 * 4, 0.0f);  // token 0: all equal
  for (int e = 0; e < 256; ++e) {
    logits[256 + e] = static_cast<float>(e % 4);        // token 1: 4 distinct values, repeated
    logits[512 + e] = (e % 32 < 2) ? 1.0f : 0.0f;       // token 2: every group scores the same
    logits[768 + e] = static_cast<float>((e / 3) % 2);  // token 3: ties across group borders
  }
  CheckRouter(v3, logits, nullptr);
  std::vector<float> bias(256, 0.0f);
  for (int e = 0; e < 256; e += 2) bias[e] = 0.25f;  // ties that the bias creates
  CheckRouter(v3, logits, bias.data());
  const RouterCase lite = MakeRouter(64, 6, 0, 0, false, false, 1.0f);
  CheckRouter(lite, std::vector<float>(64 * 2, 0.5f), nullptr);
  // The first tokens' picks are the lowest indices (groups 0..3, experts 0..7).
  std::vector<float> scores(256), select(256), gs(8), w(8);
  std::vector<int32_t> ids(8);
  RouteToken(v3.gpu, logits.data(), nullptr, scores.data(), select.data(), gs.data(), ids.data(),
             w.data());
  for (int j = 0; j < 8; ++j) EXPECT_EQ(ids[j], j);
}

// With fewer eligible experts than k the masked (-inf) ones fill up, lowest index first.
TEST(GpuRouterHd, MoreUsedThanEligible) {
  CheckRouter(MakeRouter(32, 16, 8, 1, true, true, 1.0f), RandomVec(32 * 3, -1.0f, 1.0f, 19),
              nullptr);
}

}  // namespace
}  // namespace moesplit::gpu
