// cpu_kernels/qmatmul at every ISA tier the machine has, for every weight type the kernel table
// may hold (and Q8_K, without a kernel, which takes the reference fallback): products against a
// float64 reference built from the dequantized weights and the activations as the kernel sees
// them (quantized then dequantized), odd row counts, n_tok 1 / 3 / 17, padded strides, outputs
// poisoned with NaN before every run.
#include "cpu_kernels/qmatmul/qmatmul.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "cpu_kernels/cpu_features.h"
#include "cpu_kernels/quant/quant.h"
#include "numa/thread_pool.h"
#include "tests/isa_tiers.h"

namespace moesplit::qmatmul {
namespace {

using cpu::IsaTier;
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

bool TierAvailable(IsaTier tier) {
  return static_cast<int>(tier) <= static_cast<int>(cpu::BestTier(cpu::DetectCpuFeatures()));
}

std::vector<float> Random(int64_t n, uint32_t seed, float scale) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0.0f, scale);
  std::vector<float> v(static_cast<size_t>(n));
  for (float& x : v) x = d(rng);
  return v;
}

int64_t ColsFor(GgmlType t) {
  const int64_t block = GetTypeTraits(t).block_size;
  return block == 256 ? 768 : block == 32 ? 352 : 200;  // 3, 11 blocks; 200 floats
}

// A [rows x cols] weight matrix of type t and its dequantized values (row strides are fixed by
// WeightMatrix; the tests pad the activation and output strides instead).
struct Matrix {
  std::vector<uint8_t> bytes;  // [rows x RowBytes] (+ 64 slack)
  std::vector<float> deq;      // [rows x cols] dequantized
  WeightMatrix w;
};

Matrix MakeMatrix(GgmlType t, int64_t rows, int64_t cols, uint32_t seed) {
  Matrix m;
  const int64_t rb = RowBytes(t, cols);
  m.bytes.resize(static_cast<size_t>(rb * rows + 64));
  m.deq.resize(static_cast<size_t>(rows * cols));
  const std::vector<float> f = Random(rows * cols, seed, 0.05f);
  for (int64_t r = 0; r < rows; ++r) {
    quant::QuantizeRow(t, &f[r * cols], m.bytes.data() + r * rb, cols);
    quant::DequantizeRow(t, m.bytes.data() + r * rb, &m.deq[r * cols], cols);
  }
  m.w = {t, m.bytes.data(), cols, rows, rb};
  return m;
}

// The activations as the kernel sees them: quantized to act then dequantized (f32: as is).
std::vector<float> AsSeen(GgmlType act, const float* x, int64_t ldx, int64_t n_tok, int64_t cols) {
  std::vector<float> out(static_cast<size_t>(n_tok * cols));
  std::vector<uint8_t> q(static_cast<size_t>(RowBytes(act, cols) + 64));
  for (int64_t t = 0; t < n_tok; ++t) {
    if (act == GgmlType::kF32) {
      std::copy(x + t * ldx, x + t * ldx + cols, out.begin() + t * cols);
      continue;
    }
    quant::QuantizeRow(act, x + t * ldx, q.data(), cols);
    quant::DequantizeRow(act, q.data(), &out[t * cols], cols);
  }
  return out;
}

// Checks y[t*ldy + r] against the float64 product for r in [r0, r1) and that every other entry
// of the [n_tok x ldy] buffer is still NaN.
void Check(const Matrix& m, const std::vector<float>& a, int64_t n_tok, const std::vector<float>& y,
           int64_t ldy, int64_t r0, int64_t r1, const std::string& what) {
  const int64_t cols = m.w.cols;
  for (int64_t t = 0; t < n_tok; ++t) {
    for (int64_t r = 0; r < ldy; ++r) {
      const float got = y[t * ldy + r];
      if (r < r0 || r >= r1) {
        ASSERT_TRUE(std::isnan(got)) << what << ": wrote outside rows, t " << t << " r " << r;
        continue;
      }
      double exact = 0, norm = 0;
      for (int64_t k = 0; k < cols; ++k) {
        const double p = double(m.deq[r * cols + k]) * a[t * cols + k];
        exact += p, norm += std::fabs(p);
      }
      ASSERT_NEAR(got, exact, 1e-5 * norm + 1e-30) << what << " t " << t << " r " << r;
    }
  }
}

using Param = std::tuple<IsaTier, GgmlType>;
class QMatMulTest : public ::testing::TestWithParam<Param> {
 protected:
  void SetUp() override {
    if (!TierAvailable(std::get<0>(GetParam()))) GTEST_SKIP() << "tier not on this CPU";
  }
  const gemv::GemvKernels& K() const { return gemv::KernelsFor(std::get<0>(GetParam())); }
  GgmlType Type() const { return std::get<1>(GetParam()); }
};

TEST_P(QMatMulTest, MatMulRowsMatchesFloat64) {
  const int64_t rows = 37, cols = ColsFor(Type()), ldx = cols + 5, ldy = rows + 3;
  const Matrix m = MakeMatrix(Type(), rows, cols, 11);
  const GgmlType act = ActTypeFor(K(), Type());
  EXPECT_EQ(IsFallback(K(), Type()), K().For(Type()) == nullptr);
  for (int64_t n_tok : {1, 3, 17}) {
    const std::vector<float> x = Random(n_tok * ldx, 5 + n_tok, 1.0f);
    const std::vector<float> a = AsSeen(act, x.data(), ldx, n_tok, cols);
    QuantizedRows q;
    Quantize(K(), act, x.data(), ldx, n_tok, cols, &q);
    std::vector<float> y(static_cast<size_t>(n_tok * ldy), kNaN);
    MatMulRows(K(), m.w, q, y.data(), ldy, 0, rows);
    Check(m, a, n_tok, y, ldy, 0, rows, "full n_tok " + std::to_string(n_tok));
    std::fill(y.begin(), y.end(), kNaN);
    MatMulRows(K(), m.w, q, y.data(), ldy, 5, 29);  // a sub-range
    Check(m, a, n_tok, y, ldy, 5, 29, "range n_tok " + std::to_string(n_tok));
  }
}

TEST_P(QMatMulTest, ParallelMatMulAndManyMatchFloat64) {
  const int64_t cols = ColsFor(Type()), ldx = cols + 3;
  const Matrix m1 = MakeMatrix(Type(), 301, cols, 21), m2 = MakeMatrix(Type(), 45, cols, 22);
  const GgmlType act = ActTypeFor(K(), Type());
  for (int threads : {1, 3}) {
    numa::ThreadPool pool(threads);
    // 150 tokens: the AMX tier's F16 / BF16 products are cut by tokens (>= 2 x 64 of them).
    for (int64_t n_tok : {1, 3, 17, 90, 150}) {
      const std::string what = std::to_string(threads) + " threads, n_tok " + std::to_string(n_tok);
      const std::vector<float> x = Random(n_tok * ldx, 7 + n_tok, 1.0f);
      const std::vector<float> a = AsSeen(act, x.data(), ldx, n_tok, cols);
      QuantizedRows q;
      std::vector<float> y1(static_cast<size_t>(n_tok * 302), kNaN);  // ldy 302
      MatMul(pool, K(), m1.w, x.data(), ldx, n_tok, y1.data(), 302, &q);
      Check(m1, a, n_tok, y1, 302, 0, 301, "MatMul " + what);
      std::fill(y1.begin(), y1.end(), kNaN);
      std::vector<float> y2(static_cast<size_t>(n_tok * 45), kNaN);
      const Product p[2] = {{m1.w, y1.data(), 302}, {m2.w, y2.data(), 45}};
      MatMulMany(pool, K(), p, q);  // reuses the rows quantized by MatMul
      Check(m1, a, n_tok, y1, 302, 0, 301, "MatMulMany[0] " + what);
      Check(m2, a, n_tok, y2, 45, 0, 45, "MatMulMany[1] " + what);
    }
  }
}

std::string ParamName(const ::testing::TestParamInfo<Param>& info) {
  return std::string(cpu::IsaTierName(std::get<0>(info.param))) + "_" +
         TypeName(std::get<1>(info.param));
}

// Every type the kernel families fill (F32/F16/BF16, Q8_0/Q4_0/Q5_0/Q4_1/Q5_1,
// Q2_K/Q3_K/Q4_K/Q5_K/Q6_K); Q8_K (a GGUF may store it; ggml computes with it only as activations)
// has no weight kernel: the reference fallback.
INSTANTIATE_TEST_SUITE_P(
    AllTiers, QMatMulTest,
    ::testing::Combine(testing::AllIsaTiers(),
                       ::testing::Values(GgmlType::kF32, GgmlType::kF16, GgmlType::kBF16,
                                         GgmlType::kQ8_0, GgmlType::kQ4_0, GgmlType::kQ5_0,
                                         GgmlType::kQ4_K, GgmlType::kQ5_K, GgmlType::kQ6_K,
                                         GgmlType::kQ2_K, GgmlType::kQ3_K, GgmlType::kQ4_1,
                                         GgmlType::kQ5_1, GgmlType::kQ8_K)),
    ParamName);

TEST(QMatMulQuantizeTest, ParallelQuantizationEqualsSerial) {
  const gemv::GemvKernels& k = gemv::KernelsFor(cpu::BestTier(cpu::DetectCpuFeatures()));
  numa::ThreadPool pool(3);
  const int64_t n_tok = 100, cols = 768, ldx = 800;
  const std::vector<float> x = Random(n_tok * ldx, 3, 2.0f);
  for (GgmlType act : {GgmlType::kQ8_K, GgmlType::kQ8_0}) {
    QuantizedRows a, b;
    Quantize(k, act, x.data(), ldx, n_tok, cols, &a);
    Quantize(pool, k, act, x.data(), ldx, n_tok, cols, &b);
    ASSERT_EQ(a.stride, b.stride);
    ASSERT_EQ(a.stride % 64, 0u);
    for (int64_t t = 0; t < n_tok; ++t) {
      ASSERT_EQ(0, std::memcmp(a.Row(t), b.Row(t), RowBytes(act, cols))) << "row " << t;
    }
  }
  QuantizedRows f;
  Quantize(pool, k, GgmlType::kF32, x.data(), ldx, n_tok, cols, &f);
  EXPECT_EQ(f.data, x.data());  // f32 rows alias the input
  EXPECT_EQ(f.stride, static_cast<size_t>(ldx) * 4);
}

TEST(QMatMulQuantizeTest, MissingKernelTypesAreListedOnce) {
  const gemv::GemvKernels& k = gemv::KernelsFor(IsaTier::kScalar);
  const GgmlType types[] = {GgmlType::kQ4_K,  GgmlType::kTQ2_0, GgmlType::kQ8_0,
                            GgmlType::kTQ2_0, GgmlType::kQ8_K,  GgmlType::kQ2_K};
  const std::vector<GgmlType> missing = MissingKernelTypes(k, types);
  ASSERT_EQ(missing.size(), 2u);
  EXPECT_EQ(missing[0], GgmlType::kTQ2_0);
  EXPECT_EQ(missing[1], GgmlType::kQ8_K);
  EXPECT_EQ(ActTypeFor(k, GgmlType::kQ4_K), GgmlType::kQ8_K);
  EXPECT_EQ(ActTypeFor(k, GgmlType::kQ2_K), GgmlType::kQ8_K);
  EXPECT_EQ(ActTypeFor(k, GgmlType::kQ8_K), GgmlType::kF32);
  EXPECT_EQ(ActTypeFor(k, GgmlType::kQ4_1), GgmlType::kQ8_0);
  EXPECT_EQ(ActTypeFor(k, GgmlType::kQ5_1), GgmlType::kQ8_0);
}

}  // namespace
}  // namespace moesplit::qmatmul
