// CudaBackend (core/engine/cuda_backend.h). Without a device only Create's refusal runs (it must
// be a clean Status, also with no driver at all); everything else skips there. On a GPU every op
// runs through the backend against a small CPU reference (bounds as in tests/gpu_kernels: the
// kernels' own tests justify them), with outputs poisoned NaN so that a float not written shows,
// plus the lane ordering (HostCall between copies, fork / join), the routed experts in device
// memory (ExpertMatMul, WeightedSum) and the blocking-sync device flag.
#include "core/engine/cuda_backend.h"

#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "core/base/float16.h"
#include "cpu_kernels/ops/ops.h"
#include "gpu_kernels/device_info.h"
#include "moe/routing.h"
#include "tests/gpu_kernels/gpu_test_util.h"
#include "tests/gpu_kernels/quant_test_util.h"

namespace moesplit::engine {
namespace {

using gpu::testing::UlpDistance;

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

TEST(CudaBackendCreate, FailsCleanlyWithoutADeviceOrWithABadIndex) {
  auto devices = gpu::ListDevices();
  if (!devices.ok() || devices->empty()) {
    // This machine: no device (or no driver). A Status saying so, no abort.
    auto b = CudaBackend::Create(0);
    ASSERT_FALSE(b.ok());
    EXPECT_EQ(b.status().code(), StatusCode::kFailedPrecondition) << b.status().ToString();
    EXPECT_NE(b.status().message().find("no CUDA device visible"), std::string::npos)
        << b.status().ToString();
    return;
  }
  const int n = static_cast<int>(devices->size());
  for (int bad : {n, -1}) {
    auto b = CudaBackend::Create(bad);
    ASSERT_FALSE(b.ok());
    EXPECT_EQ(b.status().code(), StatusCode::kInvalidArgument) << b.status().ToString();
    EXPECT_NE(b.status().message().find("CUDA device " + std::to_string(bad)), std::string::npos)
        << b.status().ToString();
  }
}

bool IsPoison(float f) {
  uint32_t u = 0;
  std::memcpy(&u, &f, 4);
  return u == 0x7fc00000u;  // std::numeric_limits<float>::quiet_NaN()'s bits
}

std::vector<float> Uniform(size_t n, float lo, float hi, uint32_t seed) {
  return gpu::testing::RandomUniform(n, lo, hi, seed);
}

class CudaBackendTest : public ::testing::Test {
 public:
  void SetUp() override {
    MOESPLIT_SKIP_WITHOUT_GPU();
    auto b = CudaBackend::Create(0);
    ASSERT_TRUE(b.ok()) << b.status().ToString();
    gpu_ = std::move(*b);
  }

  // A device copy of v (nullptr and a failure when it cannot be made).
  template <typename T>
  T* Dev(const std::vector<T>& v) {
    auto p = gpu_->AllocDevice(v.size() * sizeof(T), "test input");
    EXPECT_TRUE(p.ok()) << p.status().ToString();
    if (!p.ok()) return nullptr;
    EXPECT_TRUE(gpu_->Upload(*p, v.data(), v.size() * sizeof(T)).ok());
    return static_cast<T*>(*p);
  }
  float* Poisoned(size_t n) { return Dev(std::vector<float>(n, kNaN)); }

  // n Ts of device memory, read on `lane` after everything queued so far.
  template <typename T>
  std::vector<T> Fetch(const T* dev, size_t n, Lane lane = Lane::kMain) {
    std::vector<T> v(n);
    auto h = gpu_->AllocHost(n * sizeof(T), "test readback");
    EXPECT_TRUE(h.ok()) << h.status().ToString();
    if (!h.ok()) return v;
    EXPECT_TRUE(gpu_->CopyToHost(lane, *h, dev, n * sizeof(T)).ok());
    const Status s = gpu_->Synchronize();
    EXPECT_TRUE(s.ok()) << s.ToString();
    std::memcpy(v.data(), *h, n * sizeof(T));
    return v;
  }

  // The matrix bytes at 6 bytes into a device allocation (GGUF rows need no alignment).
  // `parts` matrices stacked in m (heads, experts): DevMatrix::rows is one part's rows, as
  // HeadMatMul and ExpertMatMul take it (dense_backend.h). The first run of these tests, on the
  // emulated device, found them passing the whole tensor's rows: out-of-bounds writes.
  DevMatrix DevWeights(const gpu::testing::Matrix& m, int64_t parts = 1) {
    std::vector<uint8_t> bytes(m.bytes.size() + 16, 0xA5);
    std::memcpy(bytes.data() + 6, m.bytes.data(), m.bytes.size());
    const uint8_t* base = Dev(bytes);
    return DevMatrix{m.type, base == nullptr ? nullptr : base + 6, m.rows / parts, m.cols};
  }

  std::unique_ptr<CudaBackend> gpu_;  // (public: CheckMla below drives the fixture)
};

// Create sets the primary context's scheduling to blocking sync (waits sleep, see Create).
TEST_F(CudaBackendTest, CreateSelectsBlockingSync) {
  unsigned flags = 0;
  ASSERT_EQ(cudaGetDeviceFlags(&flags), cudaSuccess);
  EXPECT_EQ(flags & cudaDeviceScheduleMask, static_cast<unsigned>(cudaDeviceScheduleBlockingSync))
      << "flags 0x" << std::hex << flags;
  // A second backend on the active context is fine (the flags are set again or kept).
  auto again = CudaBackend::Create(0);
  ASSERT_TRUE(again.ok()) << again.status().ToString();
}

TEST_F(CudaBackendTest, NameAndMemory) {
  const std::string name = gpu_->Name();
  EXPECT_EQ(name.rfind("CUDA device 0: ", 0), 0u) << name;
  EXPECT_NE(name.find("(sm_"), std::string::npos) << name;
  EXPECT_NE(name.find(" MiB free)"), std::string::npos) << name;
  EXPECT_GT(gpu_->DeviceBytesFree(), 0u);
  auto d = gpu_->AllocDevice(1000, "x");
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(reinterpret_cast<uintptr_t>(*d) % 256, 0u);
  auto h = gpu_->AllocHost(1000, "y");
  ASSERT_TRUE(h.ok());
  EXPECT_EQ(reinterpret_cast<uintptr_t>(*h) % 64, 0u);
  auto huge = gpu_->AllocDevice(size_t{1} << 50, "the impossible tensor");
  ASSERT_FALSE(huge.ok());
  EXPECT_EQ(huge.status().code(), StatusCode::kResourceExhausted) << huge.status().ToString();
  EXPECT_NE(huge.status().message().find("the impossible tensor"), std::string::npos);
  EXPECT_NE(huge.status().message().find("MiB free"), std::string::npos);
}

// GEMV for 1 token (f32 products: 1e-4 * sum |w x|), cuBLAS BF16 GEMM for 17 (1e-2 * sum |w x|).
TEST_F(CudaBackendTest, MatMulGemvAndGemm) {
  for (GgmlType type : {GgmlType::kQ4_K, GgmlType::kQ8_0}) {
    for (int64_t n_tok : {int64_t{1}, int64_t{17}}) {
      const int64_t rows = 96, cols = 512;
      const gpu::testing::Matrix m = gpu::testing::RandomMatrix(type, rows, cols, 5);
      const std::vector<float> x = gpu::testing::RandomActivations(n_tok * cols, 6);
      const DevMatrix w = DevWeights(m);
      float* y = Poisoned(n_tok * rows);
      ASSERT_TRUE(gpu_->MatMul(Lane::kMain, w, Dev(x), n_tok, y).ok());
      gpu::testing::ExpectClose(gpu::testing::Reference(m, x, n_tok), Fetch(y, n_tok * rows), rows,
                                n_tok == 1 ? 1e-4 : 1e-2,
                                std::string(TypeName(type)) + " n_tok " + std::to_string(n_tok));
    }
  }
}

// MLA's W_kb shape at toy size: 4 heads of [64 x 128] Q8_0, x heads 192 apart (q_nope of a
// [nope 128 | rope 64] head), y heads 80 apart with gaps; 11 tokens = chunks of 8 + 3.
TEST_F(CudaBackendTest, HeadMatMulStrided) {
  const int64_t n_head = 4, rows = 64, cols = 128, n_tok = 11;
  const int64_t x_head = 192, x_tok = n_head * x_head, y_head = 80, y_tok = n_head * y_head + 4;
  const gpu::testing::Matrix m =
      gpu::testing::RandomMatrix(GgmlType::kQ8_0, n_head * rows, cols, 7);
  std::vector<float> x = Uniform(n_tok * x_tok, -1.0f, 1.0f, 8);
  for (int64_t t = 0; t < n_tok; ++t) {  // x's unused q_pe parts: NaN, must not be read
    for (int64_t h = 0; h < n_head; ++h) {
      std::fill_n(&x[t * x_tok + h * x_head + cols], x_head - cols, kNaN);
    }
  }
  const int64_t y_len = n_tok * y_tok;
  float* y = Poisoned(y_len);
  const DevMatrix w = DevWeights(m, n_head);
  const Status st =
      gpu_->HeadMatMul(Lane::kSide, w, n_head, Dev(x), x_tok, x_head, n_tok, y, y_tok, y_head);
  ASSERT_TRUE(st.ok()) << st.ToString();
  const std::vector<float> got = Fetch(y, y_len, Lane::kSide);
  std::vector<bool> written(y_len, false);
  for (int64_t t = 0; t < n_tok; ++t) {
    for (int64_t h = 0; h < n_head; ++h) {
      for (int64_t r = 0; r < rows; ++r) {
        double s = 0.0, a = 0.0;
        for (int64_t c = 0; c < cols; ++c) {
          const double p = static_cast<double>(m.values[(h * rows + r) * cols + c]) *
                           x[t * x_tok + h * x_head + c];
          s += p;
          a += std::abs(p);
        }
        const int64_t i = t * y_tok + h * y_head + r;
        written[i] = true;
        ASSERT_LE(std::abs(got[i] - s), 1e-4 * a) << "t " << t << " h " << h << " r " << r;
      }
    }
  }
  for (int64_t i = 0; i < y_len; ++i) {
    if (!written[i]) {
      ASSERT_TRUE(IsPoison(got[i])) << "gap " << i << " written";
    }
  }
}

TEST_F(CudaBackendTest, GetRowsBitExact) {
  const int64_t rows = 10, cols = 64;
  const gpu::testing::Matrix m = gpu::testing::RandomMatrix(GgmlType::kQ8_0, rows, cols, 9);
  const std::vector<int32_t> ids = {3, 0, 9, 3};
  float* y = Poisoned(ids.size() * cols);
  ASSERT_TRUE(gpu_->GetRows(Lane::kMain, DevWeights(m), Dev(ids), 4, y).ok());
  const std::vector<float> got = Fetch(y, ids.size() * cols);
  for (size_t i = 0; i < ids.size(); ++i) {
    for (int64_t c = 0; c < cols; ++c) {
      ASSERT_EQ(got[i * cols + c], m.values[ids[i] * cols + c]) << "row " << i << " col " << c;
    }
  }
}

// The latent rows [512 | 64]: the first 512 normalised into rows 520 apart (gaps stay NaN), then
// in place with stride 576 (the tail untouched). <= 4 ulp from ops::RmsNorm.
TEST_F(CudaBackendTest, RmsNormStrided) {
  const int64_t rows = 3, n = 512, xs = 576, ys = 520;
  const std::vector<float> x = Uniform(rows * xs, -2.0f, 2.0f, 10);
  const std::vector<float> w = Uniform(n, 0.5f, 1.5f, 11);
  float* dx = Dev(x);
  float* dw = Dev(w);
  float* dy = Poisoned(rows * ys);
  ASSERT_TRUE(gpu_->RmsNorm(Lane::kMain, dx, xs, dw, rows, n, 1e-6f, dy, ys).ok());
  ASSERT_TRUE(gpu_->RmsNorm(Lane::kMain, dx, xs, dw, rows, n, 1e-6f, dx, xs).ok());
  const std::vector<float> got_y = Fetch(dy, rows * ys);
  const std::vector<float> got_x = Fetch(dx, rows * xs);
  std::vector<float> ref(n);
  for (int64_t r = 0; r < rows; ++r) {
    ops::RmsNorm(&x[r * xs], w.data(), n, 1e-6f, ref.data());
    for (int64_t i = 0; i < n; ++i) {
      ASSERT_LE(UlpDistance(got_y[r * ys + i], ref[i]), 4) << r << " " << i;
      ASSERT_LE(UlpDistance(got_x[r * xs + i], ref[i]), 4) << r << " " << i;
    }
    for (int64_t i = n; i < ys; ++i) ASSERT_TRUE(IsPoison(got_y[r * ys + i])) << r << " " << i;
    for (int64_t i = n; i < xs; ++i) ASSERT_EQ(got_x[r * xs + i], x[r * xs + i]) << r << " " << i;
  }
  EXPECT_EQ(gpu_->RmsNorm(Lane::kMain, dx, xs, dw, rows, n, 1e-6f, dx, ys).code(),
            StatusCode::kInvalidArgument);
}

TEST_F(CudaBackendTest, SwiGluAndAdd) {
  const int64_t n = 1001;
  std::vector<float> gate = Uniform(n, -20.0f, 20.0f, 12);
  const std::vector<float> up = Uniform(n, -2.0f, 2.0f, 13);
  std::vector<float> acc = Uniform(n, -1.0f, 1.0f, 14);
  float* dg = Dev(gate);
  float* da = Dev(acc);
  ASSERT_TRUE(gpu_->SwiGlu(Lane::kSide, dg, Dev(up), n).ok());
  ASSERT_TRUE(gpu_->Add(Lane::kSide, dg, da, n).ok());  // acc += swiglu, in lane order
  const std::vector<float> got_g = Fetch(dg, n, Lane::kSide);
  const std::vector<float> got_a = Fetch(da, n, Lane::kSide);
  ops::SwiGluInPlace(gate.data(), up.data(), n);
  for (int64_t i = 0; i < n; ++i) {
    ASSERT_LE(UlpDistance(got_g[i], gate[i]), 8) << i;
    ASSERT_EQ(got_a[i], acc[i] + got_g[i]) << i;  // Add is bit-exact
  }
}

// DeepSeek-V3's YaRN rope on the q_pe parts (last 64 of 192-wide heads), positions 0, 7, 4095.
TEST_F(CudaBackendTest, RopeOnQPe) {
  ops::RopeParams p;
  p.n_dims = 64;
  p.freq_scale = 1.0f / 40.0f;
  p.ext_factor = 1.0f;
  p.attn_factor = 1.0f / (1.0f + 0.1f * std::log(40.0f));
  p.n_ctx_orig = 4096;
  const std::vector<int32_t> pos = {0, 7, 4095};
  const int64_t n_tok = 3, n_head = 4, hd = 192, off = 128;
  const std::vector<float> x = Uniform(n_tok * n_head * hd, -1.0f, 1.0f, 15);
  float* dx = Dev(x);
  ASSERT_TRUE(gpu_->Rope(Lane::kMain, p, Dev(pos), n_tok, n_head, hd, dx + off).ok());
  const std::vector<float> got = Fetch(dx, x.size());
  std::vector<float> ref = x, cs(p.n_dims);
  for (int64_t t = 0; t < n_tok; ++t) {
    ops::RopeCosSin(p, pos[t], cs.data());
    for (int64_t h = 0; h < n_head; ++h)
      ops::RopeApply(p, cs.data(), &ref[(t * n_head + h) * hd + off]);
  }
  for (size_t i = 0; i < x.size(); ++i) {
    ASSERT_NEAR(got[i], ref[i], 2e-6) << i;
    if (static_cast<int64_t>(i) % hd < off) {
      ASSERT_EQ(got[i], x[i]) << "untouched " << i;
    }
  }
}

// 5 rows of 24 floats from a [5 x 40] source at column 4 into a [5 x 32] destination at column 2.
TEST_F(CudaBackendTest, Copy2D) {
  const std::vector<float> src = Uniform(5 * 40, -1.0f, 1.0f, 16);
  float* ds = Dev(src);
  float* dd = Poisoned(5 * 32);
  ASSERT_TRUE(gpu_->Copy2D(Lane::kMain, dd + 2, 32 * 4, ds + 4, 40 * 4, 24 * 4, 5).ok());
  const std::vector<float> got = Fetch(dd, 5 * 32);
  for (int r = 0; r < 5; ++r) {
    for (int c = 0; c < 32; ++c) {
      if (c >= 2 && c < 26) {
        ASSERT_EQ(got[r * 32 + c], src[r * 40 + c + 2]) << r << " " << c;
      } else {
        ASSERT_TRUE(IsPoison(got[r * 32 + c])) << r << " " << c;
      }
    }
  }
  EXPECT_EQ(gpu_->Copy2D(Lane::kMain, dd, 16, ds, 160, 20, 1).code(), StatusCode::kInvalidArgument);
}

// Double-precision absorbed MLA over the f16-rounded cache rows: q [n_tok x H x 576] ->
// out [n_tok x H x 512]; token t sees rows 0 .. pos0 + t.
std::vector<double> MlaReference(const std::vector<float>& q, const std::vector<float>& cache,
                                 int64_t n_tok, int64_t n_head, int64_t pos0, float scale) {
  constexpr int64_t kRow = 576, kLat = 512;
  std::vector<double> out(n_tok * n_head * kLat, 0.0);
  for (int64_t t = 0; t < n_tok; ++t) {
    const int64_t n_valid = pos0 + t + 1;
    std::vector<double> s(n_valid);
    for (int64_t h = 0; h < n_head; ++h) {
      const float* qh = &q[(t * n_head + h) * kRow];
      for (int64_t p = 0; p < n_valid; ++p) {
        double dot = 0.0;
        for (int64_t k = 0; k < kRow; ++k) dot += static_cast<double>(qh[k]) * cache[p * kRow + k];
        s[p] = scale * dot;
      }
      const double mx = *std::max_element(s.begin(), s.end());
      double l = 0.0;
      double* o = &out[(t * n_head + h) * kLat];
      for (int64_t p = 0; p < n_valid; ++p) {
        const double e = std::exp(s[p] - mx);
        l += e;
        for (int64_t d = 0; d < kLat; ++d) o[d] += e * cache[p * kRow + d];
      }
      for (int64_t d = 0; d < kLat; ++d) o[d] /= l;
    }
  }
  return out;
}

// Appends rows [0, pos0) then [pos0, pos0 + n_tok) (f16, checked bit by bit, later rows left
// alone) and attends n_tok tokens at pos0 with 16 heads; 2e-4 as tests/gpu_kernels' MLA test.
void CheckMla(CudaBackendTest* f, CudaBackend* gpu, int64_t n_ctx, int64_t pos0, int64_t n_tok) {
  constexpr int64_t kRow = 576, kLat = 512, kHeads = 16;
  const float scale = 1.3689f * 1.3689f / std::sqrt(192.0f);
  const std::vector<float> rows = Uniform((pos0 + n_tok) * kRow, -1.0f, 1.0f, 17);
  const std::vector<float> q = Uniform(n_tok * kHeads * kRow, -1.0f, 1.0f, 18);
  std::vector<float> rounded(rows.size());
  for (size_t i = 0; i < rows.size(); ++i) rounded[i] = Fp16ToFp32(Fp32ToFp16(rows[i]));
  // n_ctx x 576 f16, every value 0xFFFF (an f16 NaN) until appended.
  DevLatentCache cache{f->Dev(std::vector<uint16_t>(n_ctx * kRow, 0xFFFFu)), n_ctx, kRow};
  const float* drows = f->Dev(rows);
  if (pos0 > 0) {
    ASSERT_TRUE(gpu->AppendLatent(Lane::kMain, drows, pos0, 0, cache).ok());
  }
  ASSERT_TRUE(gpu->AppendLatent(Lane::kMain, drows + pos0 * kRow, n_tok, pos0, cache).ok());
  float* out = f->Poisoned(n_tok * kHeads * kLat);
  const DevMlaParams p{n_tok, kHeads, kLat, 64, pos0, scale};
  ASSERT_TRUE(gpu->MlaAttention(Lane::kMain, p, f->Dev(q), cache, out).ok());
  const std::vector<float> got = f->Fetch(out, n_tok * kHeads * kLat);
  const std::vector<double> want = MlaReference(q, rounded, n_tok, kHeads, pos0, scale);
  for (size_t i = 0; i < got.size(); ++i) ASSERT_NEAR(got[i], want[i], 2e-4) << i;
  const std::vector<uint16_t> bits =
      f->Fetch(static_cast<const uint16_t*>(cache.data), n_ctx * kRow);
  for (int64_t i = 0; i < n_ctx * kRow; ++i) {
    const uint16_t want_bits = i < (pos0 + n_tok) * kRow ? Fp32ToFp16(rows[i]) : 0xFFFFu;
    ASSERT_EQ(bits[i], want_bits) << "cache value " << i;
  }
}

TEST_F(CudaBackendTest, AppendLatentAndMlaAttention) {
  CheckMla(this, gpu_.get(), 16, 5, 3);
  // Decode late in a long cache: the split plan needs the per-lane workspace.
  CheckMla(this, gpu_.get(), 1100, 1000, 1);
}

TEST_F(CudaBackendTest, MlaRejectsOtherShapes) {
  DevLatentCache cache{Poisoned(64 * 576 / 2), 64, 576};
  float* q = Poisoned(16 * 576);
  const DevMlaParams ok{1, 16, 512, 64, 3, 0.1f};
  DevMlaParams p = ok;
  p.latent = 256;
  EXPECT_EQ(gpu_->MlaAttention(Lane::kMain, p, q, cache, q).code(), StatusCode::kUnimplemented);
  DevLatentCache narrow = cache;
  narrow.width = 320;
  const Status s = gpu_->AppendLatent(Lane::kMain, q, 1, 0, narrow);
  EXPECT_EQ(s.code(), StatusCode::kUnimplemented);
  EXPECT_NE(s.message().find("320"), std::string::npos) << s.ToString();
  p = ok;
  p.pos0 = 64;
  EXPECT_EQ(gpu_->MlaAttention(Lane::kMain, p, q, cache, q).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(gpu_->MlaAttention(static_cast<Lane>(7), ok, q, cache, q).code(),
            StatusCode::kInvalidArgument);
  EXPECT_TRUE(gpu_->Synchronize().ok());
}

// DeepSeek-V3-style sigmoid routing with groups and bias, and plain softmax; logits on a grid
// 0.37 apart plus noise (no near-ties), so ids match moe::Route exactly.
TEST_F(CudaBackendTest, RouteMatchesMoeRoute) {
  const int E = 64, k = 6;
  const int64_t n_tok = 5;
  std::vector<float> logits(n_tok * E);
  std::mt19937 rng(19);
  std::vector<int> perm(E);
  for (int64_t t = 0; t < n_tok; ++t) {
    for (int e = 0; e < E; ++e) perm[e] = e;
    std::shuffle(perm.begin(), perm.end(), rng);
    for (int e = 0; e < E; ++e) logits[t * E + e] = 0.37f * (perm[e] - 32) * 0.25f;
  }
  const std::vector<float> bias = Uniform(E, -0.01f, 0.01f, 20);
  for (bool sigmoid : {true, false}) {
    moe::RouterConfig c;
    c.n_expert = E;
    c.n_expert_used = k;
    c.n_group = sigmoid ? 8 : 0;
    c.n_group_used = sigmoid ? 3 : 0;
    c.gating = sigmoid ? moe::Gating::kSigmoid : moe::Gating::kSoftmax;
    c.norm_weights = sigmoid;
    c.weights_scale = sigmoid ? 2.5f : 0.0f;
    std::vector<int32_t> ids_ref(n_tok * k);
    std::vector<float> w_ref(n_tok * k);
    const float* b = sigmoid ? bias.data() : nullptr;
    moe::Route(c, logits.data(), b, n_tok, ids_ref.data(), w_ref.data());
    auto* dids = reinterpret_cast<int32_t*>(Poisoned(n_tok * k));
    float* dw = Poisoned(n_tok * k);
    ASSERT_TRUE(
        gpu_->Route(Lane::kSide, c, Dev(logits), sigmoid ? Dev(bias) : nullptr, n_tok, dids, dw)
            .ok());
    const std::vector<int32_t> ids = Fetch(dids, n_tok * k, Lane::kSide);
    const std::vector<float> w = Fetch(dw, n_tok * k, Lane::kSide);
    for (int64_t i = 0; i < n_tok * k; ++i) {
      ASSERT_EQ(ids[i], ids_ref[i]) << (sigmoid ? "sigmoid " : "softmax ") << i;
      ASSERT_NEAR(w[i], w_ref[i], 1e-5 * std::abs(w_ref[i])) << i;
    }
  }
}

// Double-precision y[p][r] = sum_c W_{ids[p]}[r][c] x[(p / x_div)][c] over m (the n_expert
// matrices back to back) and sum |.| for the bound; an id outside [0, n_expert) gives NaN.
struct ExpertRef {
  std::vector<double> y, abs_sum;
};
ExpertRef ExpertReference(const gpu::testing::Matrix& m, int64_t n_expert,
                          const std::vector<int32_t>& ids, const std::vector<float>& x,
                          int64_t x_div) {
  const int64_t rows = m.rows / n_expert, cols = m.cols;
  const int64_t n_pairs = static_cast<int64_t>(ids.size());
  ExpertRef ref{std::vector<double>(n_pairs * rows), std::vector<double>(n_pairs * rows)};
  for (int64_t p = 0; p < n_pairs; ++p) {
    for (int64_t r = 0; r < rows; ++r) {
      if (ids[p] < 0 || ids[p] >= n_expert) {
        ref.y[p * rows + r] = std::numeric_limits<double>::quiet_NaN();
        continue;
      }
      double s = 0.0, a = 0.0;
      for (int64_t c = 0; c < cols; ++c) {
        const double prod = static_cast<double>(m.values[(ids[p] * rows + r) * cols + c]) *
                            x[(p / x_div) * cols + c];
        s += prod;
        a += std::abs(prod);
      }
      ref.y[p * rows + r] = s;
      ref.abs_sum[p * rows + r] = a;
    }
  }
  return ref;
}

void ExpectExpertClose(const ExpertRef& ref, const std::vector<float>& got, const char* what) {
  ASSERT_EQ(got.size(), ref.y.size());
  for (size_t i = 0; i < got.size(); ++i) {
    if (std::isnan(ref.y[i])) {
      ASSERT_TRUE(std::isnan(got[i])) << what << " " << i << ": " << got[i] << ", want NaN";
    } else {
      ASSERT_LE(std::abs(got[i] - ref.y[i]), 1e-4 * ref.abs_sum[i]) << what << " " << i;
    }
  }
}

// DeviceExperts' chain at toy size: 6 experts, T = 4 tokens, k = 3 (12 pairs, repeated ids):
// gate = Q4_K [64 x 256] per expert over h [4 x 256] with x_div = k, down = Q8_0 [256 x 64] over
// the gate output [12 x 64] with x_div = 1, then out [4 x 256] = sum_j w[t, j] down[t*k + j].
// Each stage's reference takes the previous stage's GPU output, so the bounds do not compound:
// GEMV 1e-4 * sum |w x|, WeightedSum k * FLT_EPSILON * sum |w y| (ops.h).
TEST_F(CudaBackendTest, ExpertMatMulAndWeightedSum) {
  const int64_t E = 6, T = 4, k = 3, P = T * k, D = 256, F = 64;
  const std::vector<int32_t> ids = {5, 0, 2, 2, 5, 1, 0, 3, 5, 4, 4, 0};
  const gpu::testing::Matrix gate = gpu::testing::RandomMatrix(GgmlType::kQ4_K, E * F, D, 40);
  const gpu::testing::Matrix down = gpu::testing::RandomMatrix(GgmlType::kQ8_0, E * D, F, 41);
  const std::vector<float> h = gpu::testing::RandomActivations(T * D, 42);
  const std::vector<float> w = Uniform(P, 0.0f, 1.0f, 43);
  const int32_t* dids = Dev(ids);
  float* a = Poisoned(P * F);
  float* y = Poisoned(P * D);
  float* out = Poisoned(T * D);
  ASSERT_TRUE(gpu_->ExpertMatMul(Lane::kMain, DevWeights(gate, E), E, dids, P, Dev(h), k, a).ok());
  ASSERT_TRUE(gpu_->ExpertMatMul(Lane::kMain, DevWeights(down, E), E, dids, P, a, 1, y).ok());
  ASSERT_TRUE(gpu_->WeightedSum(Lane::kMain, y, Dev(w), T, k, D, out).ok());
  const std::vector<float> got_a = Fetch(a, P * F);
  const std::vector<float> got_y = Fetch(y, P * D);
  const std::vector<float> got_out = Fetch(out, T * D);
  ExpectExpertClose(ExpertReference(gate, E, ids, h, k), got_a, "gate");
  ExpectExpertClose(ExpertReference(down, E, ids, got_a, 1), got_y, "down");
  for (int64_t t = 0; t < T; ++t) {
    for (int64_t i = 0; i < D; ++i) {
      double s = 0.0, bound = 0.0;
      for (int64_t j = 0; j < k; ++j) {
        const double prod = static_cast<double>(w[t * k + j]) * got_y[(t * k + j) * D + i];
        s += prod;
        bound += std::abs(prod);
      }
      ASSERT_LE(std::abs(got_out[t * D + i] - s), k * static_cast<double>(FLT_EPSILON) * bound)
          << "t " << t << " i " << i;
    }
  }
}

// An id outside [0, E) makes its pair's row NaN on the side lane, faults nothing, and the lane
// goes on; argument errors come back before anything is queued.
TEST_F(CudaBackendTest, ExpertMatMulBadIdsAndArguments) {
  const int64_t E = 3, rows = 8, cols = 64;
  const std::vector<int32_t> ids = {1, 3, 0, -2};
  const gpu::testing::Matrix m = gpu::testing::RandomMatrix(GgmlType::kF16, E * rows, cols, 50);
  const std::vector<float> x = gpu::testing::RandomActivations(ids.size() * cols, 51);
  const DevMatrix w = DevWeights(m, E);
  float* dx = Dev(x);
  float* y = Dev(std::vector<float>(ids.size() * rows, 0.0f));
  ASSERT_TRUE(gpu_->ExpertMatMul(Lane::kSide, w, E, Dev(ids), 4, dx, 1, y).ok());
  ExpectExpertClose(ExpertReference(m, E, ids, x, 1), Fetch(y, ids.size() * rows, Lane::kSide),
                    "bad ids");

  const int32_t* dids = Dev(ids);
  DevMatrix no_data = w;
  no_data.data = nullptr;
  EXPECT_EQ(gpu_->ExpertMatMul(Lane::kMain, no_data, E, dids, 4, dx, 1, y).code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(gpu_->ExpertMatMul(Lane::kMain, w, E, nullptr, 4, dx, 1, y).code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(gpu_->ExpertMatMul(Lane::kMain, w, E, dids, 4, dx + 1, 1, y).code(),  // misaligned
            StatusCode::kInvalidArgument);
  EXPECT_EQ(gpu_->ExpertMatMul(Lane::kMain, w, 0, dids, 4, dx, 1, y).code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(gpu_->ExpertMatMul(static_cast<Lane>(7), w, E, dids, 4, dx, 1, y).code(),
            StatusCode::kInvalidArgument);
  EXPECT_TRUE(gpu_->ExpertMatMul(Lane::kMain, w, E, dids, 0, dx, 1, y).ok());  // nothing to do
  EXPECT_EQ(gpu_->WeightedSum(Lane::kMain, y, dx, 2, 2, 8, y).code(),          // out == y
            StatusCode::kInvalidArgument);
  EXPECT_EQ(gpu_->WeightedSum(Lane::kMain, y, dx, 2, 0, 8, dx + 64).code(),
            StatusCode::kInvalidArgument);
  EXPECT_TRUE(gpu_->Synchronize().ok());
}

// main: acc += one (a kernel), copy acc -> h1; host: h2 = h1 * 2 (sees the kernel's result);
// main: copy h2 -> out (sees what the host function wrote).
TEST_F(CudaBackendTest, HostCallOrdersCopies) {
  const size_t n = 1 << 20;
  const std::vector<float> a = Uniform(n, -1.0f, 1.0f, 21);
  float* acc = Dev(a);
  float* out = Poisoned(n);
  auto h1 = gpu_->AllocHost(n * 4, "h1");
  auto h2 = gpu_->AllocHost(n * 4, "h2");
  ASSERT_TRUE(h1.ok() && h2.ok());
  float* p1 = static_cast<float*>(*h1);
  float* p2 = static_cast<float*>(*h2);
  std::fill_n(p1, n, kNaN);
  ASSERT_TRUE(gpu_->Add(Lane::kMain, Dev(std::vector<float>(n, 1.0f)), acc, n).ok());
  ASSERT_TRUE(gpu_->CopyToHost(Lane::kMain, p1, acc, n * 4).ok());
  ASSERT_TRUE(gpu_->HostCall(Lane::kMain,
                             [p1, p2, n] {
                               for (size_t i = 0; i < n; ++i) p2[i] = p1[i] * 2.0f;
                             })
                  .ok());
  ASSERT_TRUE(gpu_->CopyFromHost(Lane::kMain, out, p2, n * 4).ok());
  const std::vector<float> got = Fetch(out, n);
  for (size_t i = 0; i < n; ++i) ASSERT_EQ(got[i], (a[i] + 1.0f) * 2.0f) << i;
}

// main: y += x (large); fork; side: z += y; join; main: w += z. Without the waits the side lane
// would read y before main's Add and main would read z before side's.
TEST_F(CudaBackendTest, ForkJoin) {
  const size_t n = 1 << 22;
  const std::vector<float> x = Uniform(n, -1.0f, 1.0f, 22), y = Uniform(n, -1.0f, 1.0f, 23);
  const std::vector<float> z = Uniform(n, -1.0f, 1.0f, 24), w = Uniform(n, -1.0f, 1.0f, 25);
  float *dx = Dev(x), *dy = Dev(y), *dz = Dev(z), *dw = Dev(w);
  for (int i = 0; i < 4; ++i) ASSERT_TRUE(gpu_->Add(Lane::kMain, dx, dy, n).ok());  // y += 4x
  ASSERT_TRUE(gpu_->SideWaitsForMain().ok());
  ASSERT_TRUE(gpu_->Add(Lane::kSide, dy, dz, n).ok());
  ASSERT_TRUE(gpu_->MainWaitsForSide().ok());
  ASSERT_TRUE(gpu_->Add(Lane::kMain, dz, dw, n).ok());
  const std::vector<float> gz = Fetch(dz, n, Lane::kSide);
  const std::vector<float> gw = Fetch(dw, n);
  for (size_t i = 0; i < n; ++i) {
    float yy = y[i];
    for (int r = 0; r < 4; ++r) yy += x[i];
    const float zz = z[i] + yy;
    ASSERT_EQ(gz[i], zz) << i;
    ASSERT_EQ(gw[i], w[i] + zz) << i;
  }
}

}  // namespace
}  // namespace moesplit::engine
