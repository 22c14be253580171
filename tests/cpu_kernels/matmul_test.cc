// The reference quantized matmul against dequantize + naive dot, for several weight types,
// token counts and thread counts; outputs are NaN-poisoned before each run so a row that is
// never written shows.
#include "cpu_kernels/matmul/matmul.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "cpu_kernels/quant/quant.h"
#include "numa/thread_pool.h"

namespace moesplit::matmul {
namespace {

struct Matrix {
  std::vector<uint8_t> raw;  // rows x RowBytes(type, cols)
  std::vector<float> deq;    // rows x cols
  WeightMatrix w;
};

Matrix MakeMatrix(GgmlType type, int64_t cols, int64_t rows, uint32_t seed) {
  Matrix m;
  std::mt19937 rng(seed);
  std::normal_distribution<float> n(0.0f, 1.0f);
  const int64_t rb = RowBytes(type, cols);
  m.raw.resize(static_cast<size_t>(rb * rows));
  m.deq.resize(static_cast<size_t>(cols * rows));
  std::vector<float> row(static_cast<size_t>(cols));
  for (int64_t r = 0; r < rows; ++r) {
    for (float& x : row) x = n(rng);
    quant::QuantizeRow(type, row.data(), m.raw.data() + r * rb, cols);
    quant::DequantizeRow(type, m.raw.data() + r * rb, &m.deq[r * cols], cols);
  }
  m.w = {type, m.raw.data(), cols, rows, rb};
  return m;
}

TEST(MatmulTest, MatchesDequantizedNaiveProduct) {
  const GgmlType types[] = {GgmlType::kF32,  GgmlType::kF16,  GgmlType::kBF16, GgmlType::kQ8_0,
                            GgmlType::kQ5_0, GgmlType::kQ4_K, GgmlType::kQ6_K, GgmlType::kQ2_K};
  const int64_t K = 512, M = 77;
  for (GgmlType type : types) {
    const Matrix m = MakeMatrix(type, K, M, 11);
    for (int64_t T : {1, 3, 8}) {
      std::mt19937 rng(5);
      std::normal_distribution<float> n(0.0f, 1.0f);
      const int64_t ldx = K + 3, ldy = M + 2;  // strides wider than the rows
      std::vector<float> x(static_cast<size_t>(T * ldx));
      for (float& v : x) v = n(rng);
      for (int threads : {1, 2, 4}) {
        numa::ThreadPool pool(threads);
        std::vector<float> y(static_cast<size_t>(T * ldy), NAN);
        MatMul(pool, m.w, x.data(), ldx, T, y.data(), ldy);
        for (int64_t t = 0; t < T; ++t) {
          for (int64_t r = 0; r < M; ++r) {
            double ref = 0;
            for (int64_t k = 0; k < K; ++k) ref += double(m.deq[r * K + k]) * x[t * ldx + k];
            ASSERT_NEAR(y[t * ldy + r], ref, 1e-4 * (1 + std::fabs(ref)))
                << TypeName(type) << " T=" << T << " threads=" << threads << " r=" << r;
          }
          for (int64_t r = M; r < ldy; ++r) EXPECT_TRUE(std::isnan(y[t * ldy + r]));  // untouched
        }
      }
    }
  }
}

TEST(MatmulTest, TransposedProductAndSlices) {
  // y = x W over rows [10, 10 + 20) of a Q8_0 matrix.
  const Matrix m = MakeMatrix(GgmlType::kQ8_0, 64, 40, 3);
  const WeightMatrix s = m.w.Rows(10, 20);
  const int64_t T = 3;
  std::vector<float> x(T * 20), y(T * 64, NAN), scratch(64);
  for (size_t i = 0; i < x.size(); ++i) x[i] = std::sin(0.37 * i);
  MatMulTransposed(s, x.data(), 20, T, y.data(), 64, scratch.data());
  for (int64_t t = 0; t < T; ++t) {
    for (int64_t k = 0; k < 64; ++k) {
      double ref = 0;
      for (int64_t r = 0; r < 20; ++r) ref += double(m.deq[(10 + r) * 64 + k]) * x[t * 20 + r];
      ASSERT_NEAR(y[t * 64 + k], ref, 1e-4 * (1 + std::fabs(ref)));
    }
  }
}

TEST(MatmulTest, FromTensorSlicesExperts) {
  const Matrix m = MakeMatrix(GgmlType::kQ4_0, 32, 12, 9);  // 3 experts x 4 rows of 32
  TensorView t;
  t.type = GgmlType::kQ4_0;
  t.n_dims = 3;
  t.ne = {32, 4, 3, 1};
  t.data = m.raw.data();
  const WeightMatrix e2 = FromTensor(t, 2);
  EXPECT_EQ(e2.rows, 4);
  EXPECT_EQ(e2.cols, 32);
  EXPECT_EQ(e2.data, m.raw.data() + 8 * RowBytes(GgmlType::kQ4_0, 32));
}

TEST(MatmulTest, Dot) {
  std::vector<float> a(37), b(37);
  double ref = 0;
  for (int i = 0; i < 37; ++i) a[i] = i * 0.5f, b[i] = 1.0f - i * 0.1f, ref += a[i] * b[i];
  EXPECT_NEAR(Dot(a.data(), b.data(), 37), ref, 1e-3);
}

}  // namespace
}  // namespace moesplit::matmul
