// GPU MLA attention (gpu_kernels/mla_attention.h) against a double-precision CPU reference of
// forward_mla.cc's absorbed attention core: per token t (position pos0 + t) and head h,
//   s_p = scale (q[t,h] . row_p) over the 576 values (latent 512 + rope 64), p <= pos0 + t,
//   out[t,h] = sum_p softmax(s)_p row_p[0:512].
// Kernel tests skip without a GPU; the argument checks (made before any CUDA call) and the check
// of the per-dtype bounds run everywhere.
#include "gpu_kernels/mla_attention.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "core/base/float16.h"
#include "gpu_kernels/device_buffer.h"
#include "gpu_kernels/mla_hd.h"
#include "tests/gpu_kernels/gpu_test_util.h"

namespace moesplit::gpu {
namespace {

constexpr int64_t kRow = kMlaRowDim;     // 576
constexpr int64_t kLat = kMlaLatentDim;  // 512
// DeepSeek-V3's kq_scale: YaRN mscale (1 + 0.1 ln 40)^2 / sqrt(qk_nope 128 + qk_rope 64).
const float kScale = 1.3689f * 1.3689f / std::sqrt(192.0f);

// Kernel vs the reference over the same (rounded) cache values: only f32 arithmetic differs.
// Scores are 576-term f32 dots (error ~ sqrt(576) 2^-24 |q||c| scale, ~1e-6 here), the output
// sums up to 4097 terms with |c| <= 1 (worst case (2 n) 2^-24 = 4.9e-4 at n = 4097, typically
// sqrt(n) 2^-24 ~ 4e-6): 2e-4 leaves a wide margin and still catches any indexing error (~0.1).
constexpr double kKernelTol = 2e-4;
// Reference with the f32 values before rounding into the cache vs with the rounded ones: the
// values move by <= u |c| (u = 2^-11 f16, 2^-8 bf16); the output by ~u directly plus ~u through
// the scores (scale sqrt(576 / 9) u ~ 1.1 u score shift, times |c - out| ~ 1): bound 4 u.
constexpr double kF16Tol = 4.0 / 2048.0 + kKernelTol;
constexpr double kBf16Tol = 4.0 / 256.0 + kKernelTol;

uint16_t Encode(float x, LatentCacheType t) {
  return t == LatentCacheType::kF16 ? Fp32ToFp16(x) : Fp32ToBf16(x);
}
float Decode(uint16_t b, LatentCacheType t) {
  return t == LatentCacheType::kF16 ? Fp16ToFp32(b) : Bf16ToFp32(b);
}

std::vector<float> Uniform(size_t n, float lo, float hi, std::mt19937* rng) {
  std::uniform_real_distribution<float> u(lo, hi);
  std::vector<float> v(n);
  for (float& x : v) x = u(*rng);
  return v;
}

// q [n_tok x n_head x 576], cache [>= pos0 + n_tok rows x 576] -> out [n_tok x n_head x 512].
std::vector<double> Reference(const std::vector<float>& q, const std::vector<float>& cache,
                              int64_t n_tok, int64_t n_head, int64_t pos0, float scale) {
  std::vector<double> out(static_cast<size_t>(n_tok * n_head * kLat), 0.0);
  std::vector<double> s;
  for (int64_t t = 0; t < n_tok; ++t) {
    const int64_t n_valid = pos0 + t + 1;
    s.assign(static_cast<size_t>(n_valid), 0.0);
    for (int64_t h = 0; h < n_head; ++h) {
      const float* qh = q.data() + (t * n_head + h) * kRow;
      for (int64_t p = 0; p < n_valid; ++p) {
        double dot = 0.0;
        for (int64_t k = 0; k < kRow; ++k) dot += static_cast<double>(qh[k]) * cache[p * kRow + k];
        s[p] = static_cast<double>(scale) * dot;
      }
      const double m = *std::max_element(s.begin(), s.end());
      double l = 0.0;
      double* o = out.data() + (t * n_head + h) * kLat;
      for (int64_t p = 0; p < n_valid; ++p) {
        const double w = std::exp(s[p] - m);
        l += w;
        for (int64_t d = 0; d < kLat; ++d) o[d] += w * cache[p * kRow + d];
      }
      for (int64_t d = 0; d < kLat; ++d) o[d] /= l;
    }
  }
  return out;
}

// Random q in [-q_amp, q_amp] and cache rows in [-1, 1]; the cache's rows past pos0 + n_tok (no
// token may read them) hold NaN. The f32 values, their rounding, and the 16-bit codes.
struct Inputs {
  std::vector<float> q, cache_f32, cache_rounded;
  std::vector<uint16_t> cache_bits;
};
Inputs MakeInputs(const MlaAttentionParams& p, float q_amp, uint32_t seed) {
  std::mt19937 rng(seed);
  Inputs in;
  in.q = Uniform(static_cast<size_t>(p.n_tok * p.n_head * kRow), -q_amp, q_amp, &rng);
  in.cache_f32 = Uniform(static_cast<size_t>(p.n_kv * kRow), -1.0f, 1.0f, &rng);
  for (size_t i = static_cast<size_t>((p.pos0 + p.n_tok) * kRow); i < in.cache_f32.size(); ++i) {
    in.cache_f32[i] = NAN;
  }
  for (float x : in.cache_f32) {
    in.cache_bits.push_back(Encode(x, p.cache_type));
    in.cache_rounded.push_back(Decode(in.cache_bits.back(), p.cache_type));
  }
  return in;
}

// Runs MlaAttention with out and workspace poisoned (0xFF: NaN) and returns out.
std::vector<float> RunGpu(const MlaAttentionParams& p, const Inputs& in) {
  auto q = DeviceBuffer::Alloc(in.q.size() * sizeof(float));
  auto cache = DeviceBuffer::Alloc(in.cache_bits.size() * sizeof(uint16_t));
  const size_t out_n = static_cast<size_t>(p.n_tok * p.n_head * kLat);
  auto out = DeviceBuffer::Alloc(out_n * sizeof(float));
  auto ws_bytes = MlaAttentionWorkspaceBytes(p);
  EXPECT_TRUE(ws_bytes.ok()) << ws_bytes.status().ToString();
  auto ws = DeviceBuffer::Alloc(ws_bytes.ok() ? *ws_bytes : 0);
  EXPECT_TRUE(q.ok() && cache.ok() && out.ok() && ws.ok());
  if (!q.ok() || !cache.ok() || !out.ok() || !ws.ok() || !ws_bytes.ok()) return {};
  EXPECT_TRUE(q->CopyFromHost(in.q.data(), q->size()).ok());
  EXPECT_TRUE(cache->CopyFromHost(in.cache_bits.data(), cache->size()).ok());
  EXPECT_TRUE(out->Fill(0xFF).ok());
  EXPECT_TRUE(ws->Fill(0xFF).ok());
  const Status st = MlaAttention(p, q->as<float>(), cache->data(), out->as<float>(), ws->data(),
                                 ws->size(), nullptr);
  EXPECT_TRUE(st.ok()) << st.ToString();
  EXPECT_TRUE(Synchronize(nullptr).ok());
  std::vector<float> host(out_n);
  EXPECT_TRUE(out->CopyToHost(host.data(), out_n * sizeof(float)).ok());
  return host;
}

void ExpectNear(const std::vector<float>& got, const std::vector<double>& want, double tol,
                const MlaAttentionParams& p) {
  ASSERT_EQ(got.size(), want.size());
  double worst = 0.0;
  for (size_t i = 0; i < got.size(); ++i) {
    ASSERT_TRUE(std::isfinite(got[i])) << "out[" << i << "] = " << got[i] << " (not written?)";
    worst = std::max(worst, std::fabs(got[i] - want[i]));
    ASSERT_NEAR(got[i], want[i], tol) << "token " << i / (p.n_head * kLat) << " head "
                                      << (i / kLat) % p.n_head << " value " << i % kLat;
  }
  std::printf("n_tok %lld n_head %lld n_kv %lld pos0 %lld: max |err| %.3g (bound %.3g)\n",
              static_cast<long long>(p.n_tok), static_cast<long long>(p.n_head),
              static_cast<long long>(p.n_kv), static_cast<long long>(p.pos0), worst, tol);
}

void CheckCase(const MlaAttentionParams& p, float q_amp, uint32_t seed) {
  SCOPED_TRACE(::testing::Message() << (p.cache_type == LatentCacheType::kF16 ? "F16" : "BF16")
                                  << " n_split asked " << p.n_split);
  const Inputs in = MakeInputs(p, q_amp, seed);
  const std::vector<float> got = RunGpu(p, in);
  ExpectNear(got, Reference(in.q, in.cache_rounded, p.n_tok, p.n_head, p.pos0, p.scale), kKernelTol,
             p);
}

MlaAttentionParams Params(int64_t n_tok, int64_t n_head, int64_t n_kv, int64_t pos0,
                          LatentCacheType type, int64_t n_split = 0) {
  MlaAttentionParams p;
  p.n_tok = n_tok;
  p.n_head = n_head;
  p.n_kv = n_kv;
  p.pos0 = pos0;
  p.scale = kScale;
  p.cache_type = type;
  p.n_split = n_split;
  return p;
}

constexpr LatentCacheType kTypes[] = {LatentCacheType::kF16, LatentCacheType::kBF16};

// One token at the last position of n_kv = 1, 7 (one split) and 4097 (flash-decoding splits,
// 17 for 16 heads) positions, 16 (V2-Lite) and 128 (V3) heads.
TEST(GpuMlaAttention, DecodeMatchesReference) {
  MOESPLIT_SKIP_WITHOUT_GPU();
  for (LatentCacheType type : kTypes) {
    for (int64_t n_head : {16, 128}) {
      for (int64_t n_kv : {1, 7, 4097}) CheckCase(Params(1, n_head, n_kv, n_kv - 1, type), 1.0f, 1);
    }
  }
}

// Sharper softmax (q in [-4, 4]: scores spread ~+-15) and a head count that leaves a part-filled
// head group (20 = 16 + 4).
TEST(GpuMlaAttention, DecodeSharpScoresAndPartialHeadGroup) {
  MOESPLIT_SKIP_WITHOUT_GPU();
  for (LatentCacheType type : kTypes) {
    CheckCase(Params(1, 20, 1000, 999, type), 4.0f, 2);
    CheckCase(Params(1, 128, 4097, 4096, type), 4.0f, 3);
  }
}

// A prefill batch of 33 tokens at positions 5 .. 37: each attends to positions <= its own. The
// cache has 3 more rows (NaN) that no token may read.
TEST(GpuMlaAttention, PrefillIsCausal) {
  MOESPLIT_SKIP_WITHOUT_GPU();
  for (LatentCacheType type : kTypes) {
    for (int64_t n_head : {16, 128}) CheckCase(Params(33, n_head, 41, 5, type), 1.0f, 4);
  }
}

// Splits asked for in a prefill: 33 tokens at position 5 with 4 splits asked -> chunk 32, 2
// splits, and tokens 0 .. 26 (<= 32 positions) leave their second split empty (-inf partial in
// a NaN-poisoned workspace); and 40 tokens at position 600 with 5 splits, 20 heads.
TEST(GpuMlaAttention, PrefillWithSplitsAndEmptyPartials) {
  MOESPLIT_SKIP_WITHOUT_GPU();
  for (LatentCacheType type : kTypes) {
    CheckCase(Params(33, 16, 38, 5, type, 4), 1.0f, 5);
    CheckCase(Params(40, 20, 640, 600, type, 5), 2.0f, 6);
  }
}

// AppendLatent rounds like core/base/float16.h (finite values) and writes only its rows.
TEST(GpuMlaAttention, AppendLatentRoundsLikeHost) {
  MOESPLIT_SKIP_WITHOUT_GPU();
  constexpr int64_t kCtx = 10, kP0 = 3, kN = 4;
  std::mt19937 rng(8);
  std::vector<float> rows = Uniform(static_cast<size_t>(kN * kRow), -70000.0f, 70000.0f, &rng);
  for (size_t i = 0; i < rows.size(); i += 7) rows[i] *= 1e-9f;  // f16 subnormals and zeros
  auto src = DeviceBuffer::Alloc(rows.size() * sizeof(float));
  auto cache = DeviceBuffer::Alloc(static_cast<size_t>(kCtx * kRow) * sizeof(uint16_t));
  ASSERT_TRUE(src.ok() && cache.ok());
  ASSERT_TRUE(src->CopyFromHost(rows.data(), src->size()).ok());
  for (LatentCacheType type : kTypes) {
    ASSERT_TRUE(cache->Fill(0xFF).ok());
    ASSERT_TRUE(AppendLatent(src->as<float>(), kN, kP0, cache->data(), type, kCtx, nullptr).ok());
    ASSERT_TRUE(Synchronize(nullptr).ok());
    std::vector<uint16_t> bits(static_cast<size_t>(kCtx * kRow));
    ASSERT_TRUE(cache->CopyToHost(bits.data(), cache->size()).ok());
    for (int64_t i = 0; i < kCtx * kRow; ++i) {
      const int64_t pos = i / kRow;
      const uint16_t want = pos >= kP0 && pos < kP0 + kN
                                ? Encode(rows[static_cast<size_t>(i - kP0 * kRow)], type)
                                : uint16_t{0xFFFF};
      ASSERT_EQ(bits[i], want) << "position " << pos << " value " << i % kRow;
    }
  }
}

// The whole path: f32 rows appended to the cache in two calls, then decode at the last of 300
// positions and a prefill of 9 tokens at 291, against the reference over the f32 values: the
// bounds per cache dtype (kF16Tol, kBf16Tol).
TEST(GpuMlaAttention, AppendThenAttendMatchesF32Reference) {
  MOESPLIT_SKIP_WITHOUT_GPU();
  constexpr int64_t kCtx = 300;
  for (LatentCacheType type : kTypes) {
    for (const auto& [n_tok, pos0] : {std::pair<int64_t, int64_t>{1, 299}, {9, 291}}) {
      MlaAttentionParams p = Params(n_tok, 16, kCtx, pos0, type);
      const Inputs in = MakeInputs(p, 1.0f, 9);
      auto src = DeviceBuffer::Alloc(in.cache_f32.size() * sizeof(float));
      auto cache = DeviceBuffer::Alloc(in.cache_bits.size() * sizeof(uint16_t));
      auto q = DeviceBuffer::Alloc(in.q.size() * sizeof(float));
      auto out = DeviceBuffer::Alloc(static_cast<size_t>(n_tok * 16 * kLat) * sizeof(float));
      auto ws = DeviceBuffer::Alloc(*MlaAttentionWorkspaceBytes(p));
      ASSERT_TRUE(src.ok() && cache.ok() && q.ok() && out.ok() && ws.ok());
      ASSERT_TRUE(src->CopyFromHost(in.cache_f32.data(), src->size()).ok());
      ASSERT_TRUE(q->CopyFromHost(in.q.data(), q->size()).ok());
      ASSERT_TRUE(out->Fill(0xFF).ok());
      const float* rows = src->as<float>();
      ASSERT_TRUE(AppendLatent(rows, 100, 0, cache->data(), type, kCtx, nullptr).ok());
      ASSERT_TRUE(
          AppendLatent(rows + 100 * kRow, kCtx - 100, 100, cache->data(), type, kCtx, nullptr)
              .ok());
      ASSERT_TRUE(MlaAttention(p, q->as<float>(), cache->data(), out->as<float>(), ws->data(),
                               ws->size(), nullptr)
                      .ok());
      ASSERT_TRUE(Synchronize(nullptr).ok());
      std::vector<float> got(static_cast<size_t>(n_tok * 16 * kLat));
      ASSERT_TRUE(out->CopyToHost(got.data(), got.size() * sizeof(float)).ok());
      ExpectNear(got, Reference(in.q, in.cache_f32, n_tok, 16, pos0, kScale),
                 type == LatentCacheType::kF16 ? kF16Tol : kBf16Tol, p);
    }
  }
}

// The per-dtype bounds above, checked on the host: the reference over rounded values vs over the
// f32 values, for the shapes the GPU tests use (runs without a GPU).
TEST(GpuMlaAttentionHost, DtypeBoundsHoldForTheReference) {
  for (LatentCacheType type : kTypes) {
    for (const auto& [n_tok, pos0, q_amp] :
         {std::tuple<int64_t, int64_t, float>{1, 299, 1.0f}, {9, 291, 1.0f}, {1, 999, 4.0f}}) {
      const MlaAttentionParams p = Params(n_tok, 16, pos0 + n_tok, pos0, type);
      const Inputs in = MakeInputs(p, q_amp, 10);
      const std::vector<double> a = Reference(in.q, in.cache_f32, n_tok, 16, pos0, kScale);
      const std::vector<double> b = Reference(in.q, in.cache_rounded, n_tok, 16, pos0, kScale);
      double worst = 0.0;
      for (size_t i = 0; i < a.size(); ++i) worst = std::max(worst, std::fabs(a[i] - b[i]));
      const double tol = type == LatentCacheType::kF16 ? kF16Tol : kBf16Tol;
      EXPECT_LE(worst + kKernelTol, tol) << "pos0 " << pos0 << " q_amp " << q_amp;
      std::printf("%s rounding effect %.3g (bound %.3g)\n",
                  type == LatentCacheType::kF16 ? "F16" : "BF16", worst, tol);
    }
  }
}

// Argument checks happen before any CUDA call, so these run without a GPU. The pointers are
// host addresses that the calls never dereference (they fail first).
alignas(16) float g_fake[64];
TEST(GpuMlaAttentionHost, BadArgumentsAreErrors) {
  float* fake = g_fake;
  float* f = g_fake;
  const MlaAttentionParams ok = Params(1, 16, 8, 7, LatentCacheType::kF16);
  auto expect = [&](const MlaAttentionParams& p, StatusCode code, const char* needle,
                    const float* q = g_fake, float* out = g_fake, void* ws = nullptr,
                    size_t ws_bytes = 0) {
    const Status s = MlaAttention(p, q, fake, out, ws, ws_bytes, nullptr);
    EXPECT_EQ(s.code(), code) << s.ToString();
    EXPECT_NE(s.message().find(needle), std::string::npos) << s.ToString();
  };
  MlaAttentionParams p = ok;
  p.n_tok = 0;
  expect(p, StatusCode::kInvalidArgument, "n_tok 0");
  p = ok;
  p.n_head = 0;
  expect(p, StatusCode::kInvalidArgument, "n_head 0");
  p = ok;
  p.pos0 = 8;
  expect(p, StatusCode::kOutOfRange, "pos0 8 + n_tok 1 exceeds the cache's n_kv 8");
  p = ok;
  p.pos0 = -1;
  expect(p, StatusCode::kInvalidArgument, "pos0 -1");
  p = ok;
  p.scale = NAN;
  expect(p, StatusCode::kInvalidArgument, "scale");
  p = ok;
  p.n_split = 65;
  expect(p, StatusCode::kInvalidArgument, "n_split 65");
  p = ok;
  p.cache_type = static_cast<LatentCacheType>(7);
  expect(p, StatusCode::kInvalidArgument, "cache type 7");
  expect(ok, StatusCode::kInvalidArgument, "null pointer", nullptr);
  expect(ok, StatusCode::kInvalidArgument, "16-byte aligned", f + 1);
  // A split plan needs a workspace: 1 token at 4096 with 16 heads plans 17 splits.
  p = Params(1, 16, 4097, 4096, LatentCacheType::kBF16);
  auto need = MlaAttentionWorkspaceBytes(p);
  ASSERT_TRUE(need.ok());
  EXPECT_EQ(*need, size_t{17} * 16 * (512 + 2) * sizeof(float));
  expect(p, StatusCode::kInvalidArgument, "workspace", fake, fake, fake, *need - 4);
  EXPECT_EQ(*MlaAttentionWorkspaceBytes(Params(1, 16, 7, 6, LatentCacheType::kF16)), size_t{0});
  EXPECT_FALSE(MlaAttentionWorkspaceBytes(Params(2, 16, 7, 6, LatentCacheType::kF16)).ok());
  EXPECT_EQ(
      MlaAttentionDecode(fake, 16, fake, LatentCacheType::kF16, 0, 1.0f, f, nullptr, 0, nullptr)
          .code(),
      StatusCode::kOutOfRange);

  const Status s1 = AppendLatent(fake, 4, 7, fake, LatentCacheType::kF16, 10, nullptr);
  EXPECT_EQ(s1.code(), StatusCode::kOutOfRange) << s1.ToString();
  EXPECT_NE(s1.message().find("positions 7 .. 10 outside the cache's 10 rows"), std::string::npos)
      << s1.ToString();
  EXPECT_EQ(AppendLatent(fake, 0, 0, fake, LatentCacheType::kF16, 10, nullptr).code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(AppendLatent(fake, 1, -1, fake, LatentCacheType::kBF16, 10, nullptr).code(),
            StatusCode::kOutOfRange);
  EXPECT_EQ(AppendLatent(nullptr, 1, 0, fake, LatentCacheType::kBF16, 10, nullptr).code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(AppendLatent(fake, 1, 0, fake, static_cast<LatentCacheType>(3), 10, nullptr).code(),
            StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace moesplit::gpu
