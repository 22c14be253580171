// MLA attention in the engine's absorbed form (latent cache, q absorbed through W_kb, output
// through W_vb) against a naive float64 computation of the expanded form (per-head keys
// k = [W_kb c, rope(k_pe)], values v = W_vb c), on random small F32 weights, for both tensor
// layouts (split attn_k_b/attn_v_b and legacy attn_kv_b holding the same maps), with and without
// q compression, with YaRN rope and an arbitrary attention scale, over two calls (3 tokens, then
// 2 more through the cache), and the long-context decode split over positions. 17 heads: the
// split form's head group takes row_scores' 16-head panel and a 1-head rest.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "core/base/int_math.h"
#include "core/engine/forward.h"
#include "core/engine/kv_cache.h"
#include "core/engine/mla_split.h"
#include "cpu_kernels/cpu_features.h"
#include "moe/expert_store.h"
#include "moe/grouped_experts.h"
#include "numa/thread_pool.h"
#include "tests/core/engine/f32_view.h"

namespace moesplit::engine {
namespace {

constexpr int64_t D = 32, H = 17, L = 16, NOPE = 8, R = 4, V = 6;

struct Weights {
  int64_t Q;                                 // q_lora (0 = attn_q directly)
  std::vector<float> q_a, q_a_norm, q_b, q;  // [Q x D], [Q], [H*12 x Q] | [H*12 x D]
  std::vector<float> kv_a, kv_a_norm;        // [(L+R) x D], [L]
  std::vector<float> k_b;                    // [H][L][NOPE]: k_nope[h][n] = sum_l k_b[h][l][n] c[l]
  std::vector<float> v_b;                    // [H][V][L]:    v[h][j] = sum_l v_b[h][j][l] c[l]
  std::vector<float> kv_b;                   // legacy [H*(NOPE+V) x L]: the same maps
  std::vector<float> out;                    // [D x H*V]
};

Weights MakeWeights(int64_t Q, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> n(0.0f, 0.4f);
  auto fill = [&](int64_t count) {
    std::vector<float> v(static_cast<size_t>(count));
    for (float& x : v) x = n(rng);
    return v;
  };
  Weights w;
  w.Q = Q;
  const int64_t qw = H * (NOPE + R);
  if (Q > 0) {
    w.q_a = fill(Q * D), w.q_b = fill(qw * Q), w.q_a_norm = fill(Q);
  } else {
    w.q = fill(qw * D);
  }
  w.kv_a = fill((L + R) * D), w.kv_a_norm = fill(L);
  w.k_b = fill(H * L * NOPE), w.v_b = fill(H * V * L), w.out = fill(D * H * V);
  w.kv_b.resize(static_cast<size_t>(H * (NOPE + V) * L));
  for (int64_t h = 0; h < H; ++h) {
    for (int64_t l = 0; l < L; ++l) {
      for (int64_t i = 0; i < NOPE; ++i)
        w.kv_b[(h * (NOPE + V) + i) * L + l] = w.k_b[(h * L + l) * NOPE + i];
      for (int64_t j = 0; j < V; ++j)
        w.kv_b[(h * (NOPE + V) + NOPE + j) * L + l] = w.v_b[(h * V + j) * L + l];
    }
  }
  return w;
}

using testing::F32View;

ModelConfig Config(int64_t Q, bool split) {
  ModelConfig c;
  c.arch = ModelArch::kDeepseek2;
  c.n_embd = D, c.n_layer = 1, c.n_head = H, c.n_head_kv = 1;
  c.q_lora_rank = Q, c.kv_lora_rank = L, c.qk_nope = NOPE, c.qk_rope = R, c.n_rot = R;
  c.head_dim_k = NOPE + R, c.head_dim_v = V, c.mla_split = split;
  c.rms_eps = 1e-6f;
  // YaRN: factor 4 over an original context of 8: correction range [0, 1], so pair 0 keeps the
  // extrapolated angle and pair 1 is interpolated (angle / 4); magnitude 0.9 * (1 + 0.1 ln 4).
  c.rope_freq_base = 100.0f, c.rope_freq_scale = 0.25f, c.rope_ext_factor = 1.0f;
  c.rope_attn_factor_eff = 0.9f, c.yarn_orig_ctx = 8;
  c.kq_scale = 0.37f;
  return c;
}

LayerWeights Layer(const Weights& w, const ModelConfig& c) {
  LayerWeights l;
  const int64_t qw = H * (NOPE + R);
  if (w.Q > 0) {
    l.attn_q_a = F32View(w.q_a, {D, w.Q, 1, 1}, 2);
    l.attn_q_a_norm = F32View(w.q_a_norm, {w.Q, 1, 1, 1}, 1);
    l.attn_q_b = F32View(w.q_b, {w.Q, qw, 1, 1}, 2);
  } else {
    l.attn_q = F32View(w.q, {D, qw, 1, 1}, 2);
  }
  l.attn_kv_a_mqa = F32View(w.kv_a, {D, L + R, 1, 1}, 2);
  l.attn_kv_a_norm = F32View(w.kv_a_norm, {L, 1, 1, 1}, 1);
  if (c.mla_split) {
    l.attn_k_b = F32View(w.k_b, {NOPE, L, H, 1}, 3);
    l.attn_v_b = F32View(w.v_b, {L, V, H, 1}, 3);
  } else {
    l.attn_kv_b = F32View(w.kv_b, {L, H * (NOPE + V), 1, 1}, 2);
  }
  l.attn_output = F32View(w.out, {H * V, D, 1, 1}, 2);
  return l;
}

// y[M] = W[M x K] x[K] in double.
std::vector<double> Mv(const std::vector<float>& w, int64_t M, int64_t K, const double* x) {
  std::vector<double> y(static_cast<size_t>(M), 0.0);
  for (int64_t m = 0; m < M; ++m)
    for (int64_t k = 0; k < K; ++k) y[m] += double(w[m * K + k]) * x[k];
  return y;
}
void RmsNormD(double* x, int64_t n, const std::vector<float>& w) {
  double ss = 0;
  for (int64_t i = 0; i < n; ++i) ss += x[i] * x[i];
  const double s = 1.0 / std::sqrt(ss / n + 1e-6);
  for (int64_t i = 0; i < n; ++i) x[i] *= s * w[i];
}
// YaRN rope of adjacent pairs, written out from the formulas (not via ops::RopeCosSin).
void RopeD(const ModelConfig& c, int64_t pos, double* x) {
  auto corr_dim = [&](double beta) {
    return R * std::log(c.yarn_orig_ctx / (beta * 2 * M_PI)) / (2 * std::log(c.rope_freq_base));
  };
  const double low = std::max(0.0, std::floor(corr_dim(32.0)));
  const double high = std::min(double(R - 1), std::ceil(corr_dim(1.0)));
  const double mscale = c.rope_attn_factor_eff * (1 + 0.1 * std::log(1 / c.rope_freq_scale));
  for (int64_t i = 0; i < R / 2; ++i) {
    const double extrap = pos * std::pow(double(c.rope_freq_base), -2.0 * i / R);
    const double ramp = 1 - std::min(1.0, std::max(0.0, (i - low) / std::max(0.001, high - low)));
    const double th = extrap * c.rope_freq_scale * (1 - ramp) + extrap * ramp;
    const double a = x[2 * i], b = x[2 * i + 1];
    x[2 * i] = (a * std::cos(th) - b * std::sin(th)) * mscale;
    x[2 * i + 1] = (a * std::sin(th) + b * std::cos(th)) * mscale;
  }
}

// Naive expanded MLA for all tokens hs[n x D] at positions 0..n-1: out [n x D].
std::vector<double> Naive(const Weights& w, const ModelConfig& c, const std::vector<float>& hs,
                          int64_t n) {
  std::vector<std::vector<double>> q(n), knope(n), kpe(n), v(n);
  for (int64_t t = 0; t < n; ++t) {
    std::vector<double> h(hs.begin() + t * D, hs.begin() + (t + 1) * D);
    if (w.Q > 0) {
      std::vector<double> qa = Mv(w.q_a, w.Q, D, h.data());
      RmsNormD(qa.data(), w.Q, w.q_a_norm);
      q[t] = Mv(w.q_b, H * (NOPE + R), w.Q, qa.data());
    } else {
      q[t] = Mv(w.q, H * (NOPE + R), D, h.data());
    }
    for (int64_t hh = 0; hh < H; ++hh) RopeD(c, t, &q[t][hh * (NOPE + R) + NOPE]);
    std::vector<double> kv = Mv(w.kv_a, L + R, D, h.data());
    RmsNormD(kv.data(), L, w.kv_a_norm);
    kpe[t].assign(kv.begin() + L, kv.end());
    RopeD(c, t, kpe[t].data());
    knope[t].assign(H * NOPE, 0.0);
    v[t].assign(H * V, 0.0);
    for (int64_t hh = 0; hh < H; ++hh) {
      for (int64_t l = 0; l < L; ++l) {
        for (int64_t i = 0; i < NOPE; ++i)
          knope[t][hh * NOPE + i] += w.k_b[(hh * L + l) * NOPE + i] * kv[l];
        for (int64_t j = 0; j < V; ++j) v[t][hh * V + j] += w.v_b[(hh * V + j) * L + l] * kv[l];
      }
    }
  }
  std::vector<double> out(static_cast<size_t>(n * D));
  for (int64_t t = 0; t < n; ++t) {
    std::vector<double> o(H * V, 0.0);
    for (int64_t hh = 0; hh < H; ++hh) {
      std::vector<double> s(t + 1);
      double mx = -1e300, sum = 0;
      for (int64_t u = 0; u <= t; ++u) {
        double d = 0;
        for (int64_t i = 0; i < NOPE; ++i) d += q[t][hh * (NOPE + R) + i] * knope[u][hh * NOPE + i];
        for (int64_t i = 0; i < R; ++i) d += q[t][hh * (NOPE + R) + NOPE + i] * kpe[u][i];
        s[u] = d * c.kq_scale;
        mx = std::max(mx, s[u]);
      }
      for (double& x : s) sum += x = std::exp(x - mx);
      for (int64_t u = 0; u <= t; ++u)
        for (int64_t j = 0; j < V; ++j) o[hh * V + j] += s[u] / sum * v[u][hh * V + j];
    }
    std::vector<double> y = Mv(w.out, D, H * V, o.data());
    std::copy(y.begin(), y.end(), out.begin() + t * D);
  }
  return out;
}

// How RunMla keeps its cache: the element type, and blocks of 8 positions in reverse order (a
// fragmented block table) instead of one sequence in order.
struct CacheLayout {
  KvCacheType type = KvCacheType::kF32;
  bool reversed_blocks = false;
};

// MLA's outputs [n x D] over calls of sizes[0], sizes[1], ... tokens (each through the cache of
// the ones before; n their sum), with `tier`'s kernel table; hs [n x D] the inputs.
// One layer of attention only on 2 threads: a KV pool of `positions` in blocks of 8, and an
// expert store with no MoE layer.
struct MlaRig {
  MlaRig(const Weights& w, const ModelConfig& c, int64_t positions, cpu::IsaTier tier,
         KvCacheType type)
      : kv(c, RoundUp(positions, kBlock), type, kBlock),
        store(*moe::ExpertStore::Build(std::vector<moe::ExpertEngine::Layer>(1), {.nodes = {0}})),
        experts(store.get(), {&pool}, {}, &gemv::KernelsFor(tier)),
        ctx{c, mw, pool, kv, experts, RopeParamsFor(c), gemv::KernelsFor(tier), ws} {
    mw.layers.push_back(Layer(w, c));
  }
  static constexpr int64_t kBlock = 8;
  ModelWeights mw;
  numa::ThreadPool pool{2};
  KvCache kv;
  std::unique_ptr<moe::ExpertStore> store;
  moe::GroupedExperts experts;
  Workspace ws;
  ForwardContext ctx;
};

std::vector<float> RunMla(const Weights& w, const ModelConfig& c, const std::vector<float>& hs,
                          MlaForm form, const std::vector<int64_t>& sizes, cpu::IsaTier tier,
                          CacheLayout layout = {}) {
  const int64_t n_all = static_cast<int64_t>(hs.size()) / D;
  MlaRig rig(w, c, n_all, tier, layout.type);
  ForwardContext& ctx = rig.ctx;
  std::vector<int32_t> blocks(static_cast<size_t>(rig.kv.n_blocks()));
  for (size_t b = 0; b < blocks.size(); ++b) {
    blocks[b] = static_cast<int32_t>(layout.reversed_blocks ? blocks.size() - 1 - b : b);
  }
  std::vector<float> out(static_cast<size_t>(n_all * D), NAN);
  int64_t pos = 0;
  for (int64_t n_tok : sizes) {
    const SeqRows seq{blocks, 0, n_tok, pos};
    ctx.seqs = {&seq, 1};
    MlaAttention(ctx, 0, hs.data() + pos * D, n_tok, out.data() + pos * D, form);
    pos += n_tok;
  }
  return out;
}

std::vector<float> Inputs(const std::vector<int64_t>& sizes) {
  int64_t n_all = 0;
  for (int64_t n : sizes) n_all += n;
  std::mt19937 rng(1);
  std::normal_distribution<float> n(0.0f, 1.0f);
  std::vector<float> hs(static_cast<size_t>(n_all * D));
  for (float& x : hs) x = n(rng);
  return hs;
}

// RunMla against Naive.
void CheckMla(int64_t Q, bool split, MlaForm form = MlaForm::kAuto,
              std::vector<int64_t> sizes = {3, 2}, cpu::IsaTier tier = cpu::IsaTier::kScalar,
              CacheLayout layout = {}) {
  const Weights w = MakeWeights(Q, 42);
  const ModelConfig c = Config(Q, split);
  const std::vector<float> hs = Inputs(sizes);
  const int64_t n_all = static_cast<int64_t>(hs.size()) / D;
  const std::vector<float> out = RunMla(w, c, hs, form, sizes, tier, layout);
  const std::vector<double> ref = Naive(w, c, hs, n_all);
  for (int64_t i = 0; i < n_all * D; ++i) {
    ASSERT_NEAR(out[i], ref[i], 2e-4 * (1 + std::fabs(ref[i])))
        << "q_lora " << Q << (split ? " split" : " legacy") << " token " << i / D;
  }
}

TEST(MlaTest, SplitLayoutWithQLora) { CheckMla(10, true); }
TEST(MlaTest, ExpandedFormSplitLayout) {
  CheckMla(10, true, MlaForm::kExpanded);
  CheckMla(0, true, MlaForm::kExpanded);
}
TEST(MlaTest, ExpandedFormLegacyLayout) {
  CheckMla(10, false, MlaForm::kExpanded);
  CheckMla(0, false, MlaForm::kExpanded);
}
TEST(MlaTest, AbsorbedFormBothLayouts) {
  CheckMla(10, true, MlaForm::kAbsorbed);
  CheckMla(10, false, MlaForm::kAbsorbed);
}
// DeepSeek-V3 shapes: prefill of 32+ tokens from position 0 expands; decode, batches under 32
// tokens, and a short batch deep in the context stay absorbed.
TEST(MlaTest, FormChoiceFollowsTheMultiplyAdds) {
  ModelConfig c;
  c.n_head = 128;
  c.kv_lora_rank = 512;
  c.qk_rope = 64;
  c.qk_nope = 128;
  c.head_dim_v = 128;
  c.head_dim_k = 192;
  EXPECT_TRUE(MlaExpandedIsCheaper(c, 512, 0));
  EXPECT_TRUE(MlaExpandedIsCheaper(c, 32, 0));
  EXPECT_FALSE(MlaExpandedIsCheaper(c, 16, 0));
  EXPECT_TRUE(MlaExpandedIsCheaper(c, 4096, 0));
  EXPECT_FALSE(MlaExpandedIsCheaper(c, 1, 100));
  EXPECT_FALSE(MlaExpandedIsCheaper(c, 64, 4000));
  EXPECT_TRUE(MlaExpandedIsCheaper(c, 2048, 4000));
}
TEST(MlaTest, LegacyLayoutWithQLora) { CheckMla(10, false); }
// Long-context decode split over positions (16-position chunks here): 37 tokens as one batch,
// then batches of 1, 3, 5 and 4 over 3-4 chunks, the last one's first token before the last
// chunk (a chunk it sees nothing of); both layouts, with and without q compression, the
// scalar kernel table and the machine's best.
TEST(MlaTest, AbsorbedFormSplitOverPositions) {
  const std::vector<int64_t> sizes = {37, 1, 3, 5, 4};
  const cpu::IsaTier best = cpu::BestTier(cpu::DetectCpuFeatures());
  for (const cpu::IsaTier tier : {cpu::IsaTier::kScalar, best}) {
    CheckMla(10, true, MlaForm::kAbsorbedSplit, sizes, tier);
    CheckMla(10, false, MlaForm::kAbsorbedSplit, sizes, tier);
    CheckMla(0, true, MlaForm::kAbsorbedSplit, sizes, tier);
    CheckMla(10, true, MlaForm::kAbsorbedSplit, sizes, tier, {.reversed_blocks = true});
  }
}
// The split form's tasks read their chunks through the block table themselves (in place, or
// gathered when the blocks are out of order) and convert an f16 cache: on a reversed table of
// 8-position blocks, with f32 and f16 caches, it gives the unsplit form's outputs on the same
// cache (which the f16 cache rounds alike for both; within 1e-5).
TEST(MlaTest, SplitFormReadsFragmentedAndF16Caches) {
  const std::vector<int64_t> sizes = {37, 1, 3, 5, 4};
  const Weights w = MakeWeights(10, 42);
  const ModelConfig c = Config(10, true);
  const std::vector<float> hs = Inputs(sizes);
  const cpu::IsaTier best = cpu::BestTier(cpu::DetectCpuFeatures());
  for (const KvCacheType type : {KvCacheType::kF32, KvCacheType::kF16}) {
    const std::vector<float> want = RunMla(w, c, hs, MlaForm::kAbsorbed, sizes, best, {type});
    const std::vector<float> got =
        RunMla(w, c, hs, MlaForm::kAbsorbedSplit, sizes, best, {type, true});
    for (size_t i = 0; i < want.size(); ++i) {
      ASSERT_NEAR(got[i], want[i], 1e-5 * (1 + std::fabs(want[i])))
          << (type == KvCacheType::kF16 ? "f16" : "f32") << " token " << i / D;
    }
  }
}
// Two sequences in one call, their blocks interleaved (A even, B odd), both split: each gets
// its own attention (against Naive), as a server's decode step of two conversations does.
TEST(MlaTest, TwoSequencesSplitInOneCall) {
  const std::vector<int64_t> sizes = {37, 1, 3};
  const Weights w = MakeWeights(10, 42);
  const ModelConfig c = Config(10, true);
  const std::vector<float> ha = Inputs(sizes);
  const std::vector<float> hb(ha.rbegin(), ha.rend());  // another conversation
  const int64_t n = static_cast<int64_t>(ha.size()) / D;
  MlaRig rig(w, c, 2 * RoundUp(n, MlaRig::kBlock), cpu::BestTier(cpu::DetectCpuFeatures()),
             KvCacheType::kF32);
  std::vector<int32_t> ba, bb;
  for (int32_t b = 0; b < rig.kv.n_blocks() / 2; ++b) ba.push_back(2 * b), bb.push_back(2 * b + 1);
  std::vector<float> oa(ha.size(), NAN), ob(hb.size(), NAN);
  int64_t pos = 0;
  for (int64_t t : sizes) {
    std::vector<float> in(ha.begin() + pos * D, ha.begin() + (pos + t) * D);
    in.insert(in.end(), hb.begin() + pos * D, hb.begin() + (pos + t) * D);
    std::vector<float> out(in.size(), NAN);
    const SeqRows seqs[2] = {{ba, 0, t, pos}, {bb, t, t, pos}};
    rig.ctx.seqs = seqs;
    MlaAttention(rig.ctx, 0, in.data(), 2 * t, out.data(), MlaForm::kAbsorbedSplit);
    std::copy(out.begin(), out.begin() + t * D, oa.begin() + pos * D);
    std::copy(out.begin() + t * D, out.end(), ob.begin() + pos * D);
    pos += t;
  }
  for (const auto& [got, hs] : {std::pair{&oa, &ha}, std::pair{&ob, &hb}}) {
    const std::vector<double> ref = Naive(w, c, *hs, n);
    for (int64_t i = 0; i < n * D; ++i) {
      ASSERT_NEAR((*got)[i], ref[i], 2e-4 * (1 + std::fabs(ref[i])))
          << (got == &oa ? "A" : "B") << " token " << i / D;
    }
  }
}

// Split only for batches of <= 16 tokens past 512 KB of cache rows per layer (DeepSeek's 576
// floats per position: from 228 positions), in chunks of 128-512 positions giving each thread
// >= 2 tasks.
TEST(MlaTest, SplitChunkFollowsTheCacheSize) {
  ModelConfig c;
  c.n_head = 16;
  c.kv_lora_rank = 512;
  c.qk_rope = 64;
  EXPECT_EQ(MlaSplitChunk(c, 2, 1, 227, MlaForm::kAuto), 0);
  EXPECT_EQ(MlaSplitChunk(c, 2, 1, 228, MlaForm::kAuto), 128);
  EXPECT_EQ(MlaSplitChunk(c, 2, 1, 2048, MlaForm::kAuto), 512);
  EXPECT_EQ(MlaSplitChunk(c, 2, 17, 2048, MlaForm::kAuto), 0);
  EXPECT_EQ(MlaSplitChunk(c, 2, 1, 2048, MlaForm::kAbsorbed), 0);
  EXPECT_EQ(MlaSplitChunk(c, 16, 1, 2048, MlaForm::kAuto), 128);
  EXPECT_EQ(MlaSplitChunk(c, 2, 1, 40, MlaForm::kAbsorbedSplit), 16);
  c.n_head = 128;  // DeepSeek-V3: 4 head groups of 32
  EXPECT_EQ(MlaSplitChunk(c, 32, 1, 2048, MlaForm::kAuto), 128);
  EXPECT_EQ(MlaSplitChunk(c, 32, 1, 16384, MlaForm::kAuto), 512);
}
TEST(MlaTest, SplitLayoutWithoutQLora) { CheckMla(0, true); }
TEST(MlaTest, LegacyLayoutWithoutQLora) { CheckMla(0, false); }

TEST(MlaTest, AttentionIsNotUniformHere) {
  // Guard against a vacuous test: the reference must depend on the attention scale.
  const Weights w = MakeWeights(10, 42);
  ModelConfig c = Config(10, true);
  std::vector<float> hs(5 * D);
  std::mt19937 rng(1);
  std::normal_distribution<float> n(0.0f, 1.0f);
  for (float& x : hs) x = n(rng);
  const std::vector<double> a = Naive(w, c, hs, 5);
  c.kq_scale *= 1.5f;
  const std::vector<double> b = Naive(w, c, hs, 5);
  double diff = 0, norm = 0;
  for (size_t i = 4 * D; i < a.size(); ++i) diff += std::fabs(a[i] - b[i]), norm += std::fabs(a[i]);
  EXPECT_GT(diff / norm, 0.05);
}

// The hybrid pass's derivation of the split tensors from the legacy kv_b (mla_split.h) gives
// exactly the split maps these tests pair with it (F32: a rearrangement, bit-exact).
TEST(MlaTest, DerivedSplitTensorsAreTheSplitLayoutsMaps) {
  const Weights w = MakeWeights(10, 5);
  const LayerWeights legacy = Layer(w, Config(10, false));
  MlaSplit split(legacy.attn_kv_b, {.n_head = H, .kv_lora = L, .qk_nope = NOPE, .v_head = V});
  ASSERT_TRUE(split.Derive().ok());
  const TensorView k = split.k_b(), v = split.v_b();
  ASSERT_EQ(k.type, GgmlType::kF32);
  ASSERT_EQ(k.nbytes, w.k_b.size() * 4);
  ASSERT_EQ(v.nbytes, w.v_b.size() * 4);
  EXPECT_EQ(std::memcmp(k.data, w.k_b.data(), k.nbytes), 0);
  EXPECT_EQ(std::memcmp(v.data, w.v_b.data(), v.nbytes), 0);
}

}  // namespace
}  // namespace moesplit::engine
