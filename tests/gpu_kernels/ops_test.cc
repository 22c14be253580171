// gpu::RmsNorm / SwiGlu / Add / Softmax / Rope against cpu_kernels/ops on a device, and
// gpu::WeightedSum against a double reference, with the bounds gpu_kernels/ops.h states. Outputs
// are NaN-poisoned (Fill(0xFF)) where they are not in place. The bad-shape tests fail before any
// CUDA call and run without a GPU.
#include "cpu_kernels/ops/ops.h"

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "gpu_kernels/device_buffer.h"
#include "gpu_kernels/ops.h"
#include "tests/gpu_kernels/gpu_test_util.h"

namespace moesplit::gpu {
namespace {

using testing::Download;
using testing::Poisoned;
using testing::RandomUniform;
using testing::UlpDistance;
using testing::Upload;

void ExpectUlps(const std::vector<float>& got, const std::vector<float>& want, int64_t max_ulp) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    ASSERT_LE(UlpDistance(got[i], want[i]), max_ulp)
        << "at " << i << ": gpu " << got[i] << " cpu " << want[i];
  }
}

// ---------------------------------------------------------------------------------------------

TEST(GpuOps, RmsNormMatchesCpu) {
  MOESPLIT_SKIP_WITHOUT_GPU();
  for (int64_t rows : {int64_t{1}, int64_t{5}}) {
    for (int64_t n : {int64_t{1}, int64_t{33}, int64_t{1000}, int64_t{7168}}) {
      const std::vector<float> x = RandomUniform(rows * n, -3.0f, 3.0f, static_cast<uint32_t>(n));
      const std::vector<float> w = RandomUniform(n, 0.5f, 1.5f, 2);
      DeviceBuffer dx = Upload(x), dw = Upload(w);
      for (bool with_w : {true, false}) {
        std::vector<float> ref(rows * n);
        for (int64_t r = 0; r < rows; ++r) {
          ops::RmsNorm(&x[r * n], with_w ? w.data() : nullptr, n, 1e-6f, &ref[r * n]);
        }
        DeviceBuffer dy = Poisoned<float>(rows * n);
        ASSERT_TRUE(RmsNorm(dx.as<float>(), with_w ? dw.as<float>() : nullptr, rows, n, 1e-6f,
                            dy.as<float>(), nullptr)
                        .ok());
        SCOPED_TRACE(::testing::Message() << "rows " << rows << " n " << n << " w " << with_w);
        ExpectUlps(Download<float>(dy, rows * n), ref, 4);
      }
    }
  }
}

// MLA's latent rows [L + R]: the first L normalised in place, the last R untouched.
TEST(GpuOps, RmsNormStridedInPlace) {
  MOESPLIT_SKIP_WITHOUT_GPU();
  const int64_t rows = 3, L = 512, W = 576;
  std::vector<float> x = RandomUniform(rows * W, -2.0f, 2.0f, 5);
  const std::vector<float> w = RandomUniform(L, 0.5f, 1.5f, 6);
  DeviceBuffer dx = Upload(x), dw = Upload(w);
  ASSERT_TRUE(
      RmsNormStrided(dx.as<float>(), W, dw.as<float>(), rows, L, 1e-6f, dx.as<float>(), W, nullptr)
          .ok());
  std::vector<float> ref = x;
  for (int64_t r = 0; r < rows; ++r) ops::RmsNorm(&ref[r * W], w.data(), L, 1e-6f, &ref[r * W]);
  ExpectUlps(Download<float>(dx, rows * W), ref, 4);  // the tail R values compare bit-exact
}

TEST(GpuOps, SwiGluMatchesCpu) {
  MOESPLIT_SKIP_WITHOUT_GPU();
  for (auto [rows, n] : {std::pair<int64_t, int64_t>{1, 1001}, {3, 37}, {2, 2048}}) {
    std::vector<float> gate = RandomUniform(rows * n, -20.0f, 20.0f, 7);
    const std::vector<float> up = RandomUniform(rows * n, -2.0f, 2.0f, 8);
    DeviceBuffer dg = Upload(gate), du = Upload(up);
    ASSERT_TRUE(SwiGlu(dg.as<float>(), du.as<float>(), rows, n, nullptr).ok());
    ops::SwiGluInPlace(gate.data(), up.data(), rows * n);
    ExpectUlps(Download<float>(dg, rows * n), gate, 8);
  }
}

TEST(GpuOps, AddBitExact) {
  MOESPLIT_SKIP_WITHOUT_GPU();
  const int64_t rows = 3, n = 333;
  const std::vector<float> x = RandomUniform(rows * n, -1.0f, 1.0f, 9);
  std::vector<float> y = RandomUniform(rows * n, -1.0f, 1.0f, 10);
  DeviceBuffer dx = Upload(x), dy = Upload(y);
  ASSERT_TRUE(Add(dx.as<float>(), dy.as<float>(), rows, n, nullptr).ok());
  for (size_t i = 0; i < y.size(); ++i) y[i] += x[i];
  ExpectUlps(Download<float>(dy, rows * n), y, 0);
}

TEST(GpuOps, SoftmaxMatchesCpu) {
  MOESPLIT_SKIP_WITHOUT_GPU();
  for (int64_t rows : {int64_t{1}, int64_t{4}}) {
    for (int64_t n : {int64_t{1}, int64_t{5}, int64_t{256}, int64_t{1000}}) {
      std::vector<float> x = RandomUniform(rows * n, -10.0f, 10.0f, static_cast<uint32_t>(n + 11));
      if (n > 3) x[2] = -INFINITY;  // a masked entry: 0
      DeviceBuffer dx = Upload(x);
      ASSERT_TRUE(Softmax(dx.as<float>(), rows, n, nullptr).ok());
      for (int64_t r = 0; r < rows; ++r) ops::Softmax(&x[r * n], n);
      SCOPED_TRACE(::testing::Message() << "rows " << rows << " n " << n);
      ExpectUlps(Download<float>(dx, rows * n), x, 8);
    }
  }
}

// DeepSeek-V3 YaRN (forward_mla's layout: q_pe is the last 64 of each 192-wide head) and a plain
// NEOX rope; positions 0, 1, 4095, 100000.
void CheckRope(const ops::RopeParams& p, int64_t n_head, int64_t head_dim, int64_t offset) {
  const std::vector<int32_t> pos = {0, 1, 4095, 100000};
  const int64_t n_tok = static_cast<int64_t>(pos.size());
  const std::vector<float> x = RandomUniform(n_tok * n_head * head_dim, -1.0f, 1.0f, 12);
  DeviceBuffer dx = Upload(x), dpos = Upload(pos);
  ASSERT_TRUE(
      Rope(p, dpos.as<int32_t>(), n_tok, n_head, head_dim, dx.as<float>() + offset, nullptr).ok());
  const std::vector<float> got = Download<float>(dx, x.size());
  std::vector<float> ref = x, cs(p.n_dims);
  for (int64_t t = 0; t < n_tok; ++t) {
    ops::RopeCosSin(p, pos[t], cs.data());
    for (int64_t h = 0; h < n_head; ++h) {
      ops::RopeApply(p, cs.data(), &ref[(t * n_head + h) * head_dim + offset]);
    }
  }
  for (size_t i = 0; i < x.size(); ++i) {
    // |x| <= 1, mscale <= 1: the pair bound 1e-6 (|x_a| + |x_b|) is at most 2e-6.
    ASSERT_NEAR(got[i], ref[i], 2e-6) << "at " << i;
    const int64_t d = static_cast<int64_t>(i) % head_dim;
    if (d < offset || d >= offset + p.n_dims) {
      ASSERT_EQ(got[i], x[i]) << "untouched dim " << i;
    }
  }
}

ops::RopeParams DeepseekV3Rope() {
  ops::RopeParams p;
  p.n_dims = 64;
  p.freq_base = 10000.0f;
  p.freq_scale = 1.0f / 40.0f;
  p.ext_factor = 1.0f;
  p.attn_factor = 1.0f / (1.0f + 0.1f * std::log(40.0f));
  p.beta_fast = 32.0f;
  p.beta_slow = 1.0f;
  p.n_ctx_orig = 4096;
  return p;
}

TEST(GpuOps, RopeDeepseekV3Yarn) {
  MOESPLIT_SKIP_WITHOUT_GPU();
  CheckRope(DeepseekV3Rope(), 16, 192, 128);  // q heads: [nope 128 | rope 64]
  CheckRope(DeepseekV3Rope(), 1, 576, 512);   // latent rows: [kv 512 | k_pe 64]
}

TEST(GpuOps, RopePlainBothStyles) {
  MOESPLIT_SKIP_WITHOUT_GPU();
  ops::RopeParams p;
  p.n_dims = 128;
  p.freq_base = 1000000.0f;
  p.style = ops::RopeStyle::kNeox;
  CheckRope(p, 5, 128, 0);
  p.style = ops::RopeStyle::kNormal;
  p.n_dims = 6;  // fewer pairs than threads
  CheckRope(p, 3, 10, 0);
}

// out[t, i] = sum_j w[t, j] * y[t*k + j, i]: bit-identical to the same f32 fused multiply-adds in
// j order on the host (std::fma is correctly rounded on both sides), and within k * FLT_EPSILON *
// sum_j |w_j y_j| of a double reference (ops.h). y has NaN rows after the last pair (must not
// be read) and out is NaN-poisoned with one guard row after it (must not be written).
TEST(GpuOps, WeightedSumMatchesDoubleReference) {
  MOESPLIT_SKIP_WITHOUT_GPU();
  struct Case {
    int64_t n_tok, k, n;
  };
  for (const Case& c :
       {Case{1, 1, 1}, Case{1, 8, 7168}, Case{5, 6, 1000}, Case{3, 8, 33}, Case{70, 8, 64}}) {
    SCOPED_TRACE(::testing::Message() << "n_tok " << c.n_tok << " k " << c.k << " n " << c.n);
    const int64_t pairs = c.n_tok * c.k;
    std::vector<float> y = RandomUniform(pairs * c.n, -4.0f, 4.0f, static_cast<uint32_t>(c.n));
    y.resize((pairs + 2) * c.n, std::numeric_limits<float>::quiet_NaN());
    const std::vector<float> w = RandomUniform(pairs, 0.0f, 2.5f, static_cast<uint32_t>(c.k));
    DeviceBuffer dy = Upload(y), dw = Upload(w);
    DeviceBuffer dout = Poisoned<float>((c.n_tok + 1) * c.n);
    ASSERT_TRUE(
        WeightedSum(dy.as<float>(), dw.as<float>(), c.n_tok, c.k, c.n, dout.as<float>(), nullptr)
            .ok());
    const std::vector<float> got = Download<float>(dout, (c.n_tok + 1) * c.n);
    for (int64_t t = 0; t < c.n_tok; ++t) {
      for (int64_t i = 0; i < c.n; ++i) {
        float acc = 0.0f;
        double s = 0.0, a = 0.0;
        for (int64_t j = 0; j < c.k; ++j) {
          const float wj = w[t * c.k + j], yj = y[(t * c.k + j) * c.n + i];
          acc = std::fma(wj, yj, acc);
          s += static_cast<double>(wj) * yj;
          a += std::abs(static_cast<double>(wj) * yj);
        }
        const float g = got[t * c.n + i];
        ASSERT_EQ(g, acc) << "t " << t << " i " << i;
        ASSERT_LE(std::abs(g - s), c.k * static_cast<double>(FLT_EPSILON) * a)
            << "t " << t << " i " << i;
      }
    }
    for (int64_t i = 0; i < c.n; ++i) {
      uint32_t bits = 0;
      std::memcpy(&bits, &got[c.n_tok * c.n + i], 4);
      ASSERT_EQ(bits, 0xFFFFFFFFu) << "guard float " << i << " written";
    }
  }
}

// A NaN expert output (QuantGemvIds' mark for a bad expert id) shows in the token's sum, also
// with weight 0; the other token is unaffected.
TEST(GpuOps, WeightedSumPropagatesNaN) {
  MOESPLIT_SKIP_WITHOUT_GPU();
  const int64_t n_tok = 2, k = 2, n = 4;
  std::vector<float> y(n_tok * k * n, 1.0f);
  for (int64_t i = 0; i < n; ++i) y[1 * n + i] = std::numeric_limits<float>::quiet_NaN();
  DeviceBuffer dy = Upload(y), dw = Upload(std::vector<float>{0.5f, 0.0f, 0.25f, 0.75f});
  DeviceBuffer dout = Poisoned<float>(n_tok * n);
  ASSERT_TRUE(
      WeightedSum(dy.as<float>(), dw.as<float>(), n_tok, k, n, dout.as<float>(), nullptr).ok());
  const std::vector<float> got = Download<float>(dout, n_tok * n);
  for (int64_t i = 0; i < n; ++i) {
    EXPECT_TRUE(std::isnan(got[i])) << i;
    EXPECT_EQ(got[n + i], 1.0f) << i;
  }
}

// ---------------------------------------------------------------------------------------------
// Bad shapes: InvalidArgument naming the value, before any CUDA call (no GPU needed).
// ---------------------------------------------------------------------------------------------

void ExpectInvalid(const Status& s, const std::string& needle) {
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.ToString();
  EXPECT_NE(s.message().find(needle), std::string::npos) << s.ToString();
}

TEST(GpuOps, BadShapesFailBeforeCuda) {
  ExpectInvalid(RmsNorm(nullptr, nullptr, -3, 8, 1e-6f, nullptr, nullptr), "-3");
  ExpectInvalid(RmsNorm(nullptr, nullptr, 2, -9, 1e-6f, nullptr, nullptr), "-9");
  ExpectInvalid(RmsNormStrided(nullptr, 4, nullptr, 2, 8, 1e-6f, nullptr, 8, nullptr), "4");
  ExpectInvalid(SwiGlu(nullptr, nullptr, -1, 4, nullptr), "-1");
  ExpectInvalid(Add(nullptr, nullptr, 2, -7, nullptr), "-7");
  ExpectInvalid(Softmax(nullptr, -2, 4, nullptr), "-2");
  ExpectInvalid(Softmax(nullptr, 2, 4, nullptr), "null");
  ops::RopeParams p;
  p.n_dims = 63;
  ExpectInvalid(Rope(p, nullptr, 1, 1, 64, nullptr, nullptr), "63");
  p.n_dims = 66;
  ExpectInvalid(Rope(p, nullptr, 1, 1, 64, nullptr, nullptr), "66");
  p.n_dims = 0;
  ExpectInvalid(Rope(p, nullptr, 1, 1, 64, nullptr, nullptr), "n_dims = 0");
  p.n_dims = 64;
  ExpectInvalid(Rope(p, nullptr, -5, 1, 64, nullptr, nullptr), "-5");
}

TEST(GpuOps, WeightedSumBadArgsFailBeforeCuda) {
  // Fake device addresses: never dereferenced, every call fails before the launch.
  auto at = [](uintptr_t a) { return reinterpret_cast<float*>(a); };
  float* y = at(0x100000);  // [n_tok*k x n] = [4*8 x 64] floats: 8 KiB
  float* w = at(0x200000);
  float* out = at(0x300000);
  ExpectInvalid(WeightedSum(y, w, -1, 8, 64, out, nullptr), "n_tok = -1");
  ExpectInvalid(WeightedSum(y, w, 4, 8, -2, out, nullptr), "n = -2");
  ExpectInvalid(WeightedSum(y, w, 4, 0, 64, out, nullptr), "k = 0");
  ExpectInvalid(WeightedSum(y, w, 4, kWeightedSumMaxK + 1, 64, out, nullptr), "k = 1025");
  ExpectInvalid(WeightedSum(y, w, (int64_t{1} << 31) - 1, 1024, int64_t{1} << 40, out, nullptr),
                "too many");
  ExpectInvalid(WeightedSum(nullptr, w, 4, 8, 64, out, nullptr), "y is null");
  ExpectInvalid(WeightedSum(y, nullptr, 4, 8, 64, out, nullptr), "w is null");
  ExpectInvalid(WeightedSum(y, w, 4, 8, 64, nullptr, nullptr), "out is null");
  ExpectInvalid(WeightedSum(y, w, 4, 8, 64, y, nullptr), "out overlaps y");
  ExpectInvalid(WeightedSum(y, w, 4, 8, 64, y + 32 * 64 - 1, nullptr), "out overlaps y");
  ExpectInvalid(WeightedSum(y, w, 4, 8, 64, w - 4 * 64 + 1, nullptr), "out overlaps w");
  // Nothing to compute: Ok with no pointers and no CUDA call.
  EXPECT_TRUE(WeightedSum(nullptr, nullptr, 0, 8, 64, nullptr, nullptr).ok());
  EXPECT_TRUE(WeightedSum(nullptr, nullptr, 4, 8, 0, nullptr, nullptr).ok());
}

}  // namespace
}  // namespace moesplit::gpu
