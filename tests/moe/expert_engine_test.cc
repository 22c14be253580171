#include "moe/expert_engine.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "cpu_kernels/quant/quant.h"

namespace moesplit::moe {
namespace {

// Stacked expert tensors in F32 or Q8_0 with their dequantized values for the naive reference.
struct Experts {
  int64_t D, F, E;
  std::vector<uint8_t> gate, up, down;      // raw bytes
  std::vector<float> gate_f, up_f, down_f;  // dequantized: [E][F][D], [E][F][D], [E][D][F]

  Experts(int64_t d, int64_t f, int64_t e, GgmlType type, uint32_t seed) : D(d), F(f), E(e) {
    std::mt19937 rng(seed);
    std::normal_distribution<float> n(0.0f, 0.5f);
    auto make = [&](int64_t cols, int64_t rows, std::vector<uint8_t>* raw,
                    std::vector<float>* deq) {
      const int64_t rb = RowBytes(type, cols);
      raw->resize(static_cast<size_t>(rb * rows * E));
      deq->resize(static_cast<size_t>(cols * rows * E));
      std::vector<float> row(static_cast<size_t>(cols));
      for (int64_t r = 0; r < rows * E; ++r) {
        for (float& x : row) x = n(rng);
        quant::QuantizeRow(type, row.data(), raw->data() + r * rb, cols);
        quant::DequantizeRow(type, raw->data() + r * rb, deq->data() + r * cols, cols);
      }
    };
    make(D, F, &gate, &gate_f);
    make(D, F, &up, &up_f);
    make(F, D, &down, &down_f);
    type_ = type;
  }
  ExpertEngine::Layer Layer() const {
    auto view = [&](const std::vector<uint8_t>& raw, int64_t cols, int64_t rows) {
      TensorView t;
      t.type = type_;
      t.n_dims = 3;
      t.ne = {cols, rows, E, 1};
      t.data = raw.data();
      t.nbytes = raw.size();
      return t;
    };
    return {view(gate, D, F), view(up, D, F), view(down, F, D)};
  }
  // Naive: one expert on one token.
  void Ffn(int64_t e, const float* x, float* y) const {
    std::vector<float> h(static_cast<size_t>(F));
    for (int64_t f = 0; f < F; ++f) {
      double g = 0, u = 0;
      for (int64_t d = 0; d < D; ++d) {
        g += gate_f[(e * F + f) * D + d] * x[d];
        u += up_f[(e * F + f) * D + d] * x[d];
      }
      h[f] = static_cast<float>(g / (1 + std::exp(-g)) * u);
    }
    for (int64_t d = 0; d < D; ++d) {
      double s = 0;
      for (int64_t f = 0; f < F; ++f) s += down_f[(e * D + d) * F + f] * h[f];
      y[d] = static_cast<float>(s);
    }
  }
  GgmlType type_;
};

TEST(ExpertEngineTest, MatchesNaiveMixture) {
  for (GgmlType type : {GgmlType::kF32, GgmlType::kQ8_0}) {
    const Experts ex(64, 32, 6, type, 7);
    const int64_t T = 5, k = 2;
    std::mt19937 rng(3);
    std::normal_distribution<float> n(0.0f, 1.0f);
    std::vector<float> hidden(T * ex.D);
    for (float& x : hidden) x = n(rng);
    // Token 0..4 -> experts; expert 5 unused, expert 1 shared by three tokens.
    const std::vector<int32_t> ids = {1, 3, 1, 0, 2, 1, 4, 3, 0, 2};
    const std::vector<float> w = {0.7f, 0.3f, 1.5f, -0.5f, 0.2f, 0.8f, 1.0f, 0.0f, 0.4f, 0.6f};
    for (int threads : {1, 3}) {
      numa::ThreadPool pool(threads);
      ExpertEngine engine(&pool, &gemv::KernelsFor(cpu::IsaTier::kScalar));
      std::vector<float> out(T * ex.D, NAN);
      engine.Forward(ex.Layer(), hidden.data(), T, ids.data(), w.data(), k, out.data());
      std::vector<float> y(ex.D);
      for (int64_t t = 0; t < T; ++t) {
        std::vector<double> ref(ex.D, 0.0);
        for (int64_t j = 0; j < k; ++j) {
          ex.Ffn(ids[t * k + j], &hidden[t * ex.D], y.data());
          for (int64_t d = 0; d < ex.D; ++d) ref[d] += w[t * k + j] * y[d];
        }
        for (int64_t d = 0; d < ex.D; ++d) {
          ASSERT_NEAR(out[t * ex.D + d], ref[d], 1e-3 * (1 + std::fabs(ref[d])))
              << TypeName(type) << " threads " << threads << " t " << t << " d " << d;
        }
      }
    }
  }
}

}  // namespace
}  // namespace moesplit::moe
