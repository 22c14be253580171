// Not built by CMake: a one-off comparison of the lattice quantizers with ggml's, whose figures
// tests/cpu_kernels/quant_iq_test.cc quotes. Build from the repository root after building
// moesplit_cpu_kernels in build/cpu:
//   g++ -O1 -std=c++20 -I. -I/work/peers/llama.cpp/ggml/include \
//     tests/cpu_kernels/ggml_compare/iq_quant_vs_ggml.cc \
//     build/cpu/cpu_kernels/libmoesplit_cpu_kernels.a build/cpu/core/libmoesplit_base.a \
//     -L/work/peers/llama.cpp/build/bin -lggml-base -lggml -o /tmp/cmp
//   LD_LIBRARY_PATH=/work/peers/llama.cpp/build/bin /tmp/cmp
#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <vector>

#include "cpu_kernels/quant/quant.h"
#include "ggml.h"
static std::vector<float> Gauss(int64_t n, float sigma, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, sigma);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}
int main() {
  struct C {
    ggml_type g;
    moesplit::GgmlType m;
    const char* name;
    bool imat;
  } cs[] = {{GGML_TYPE_IQ2_XXS, moesplit::GgmlType::kIQ2_XXS, "iq2_xxs", true},
            {GGML_TYPE_IQ1_S, moesplit::GgmlType::kIQ1_S, "iq1_s", true},
            {GGML_TYPE_IQ1_M, moesplit::GgmlType::kIQ1_M, "iq1_m", true},
            {GGML_TYPE_IQ2_XS, moesplit::GgmlType::kIQ2_XS, "iq2_xs", true},
            {GGML_TYPE_IQ2_S, moesplit::GgmlType::kIQ2_S, "iq2_s", true},
            {GGML_TYPE_IQ3_XXS, moesplit::GgmlType::kIQ3_XXS, "iq3_xxs", true},
            {GGML_TYPE_IQ3_S, moesplit::GgmlType::kIQ3_S, "iq3_s", true}};
  const int64_t rows = 16, cols = 4096;
  for (uint32_t seed : {1u, 2u})
    for (float sigma : {1.0f, 0.02f}) {
      std::vector<float> in = Gauss(rows * cols, sigma, seed);
      std::vector<float> flat(cols, 1.0f);
      for (auto& c : cs) {
        ggml_quantize_init(c.g);
        size_t rb = ggml_row_size(c.g, cols);
        std::vector<uint8_t> a(rb * rows), b(rb * rows);
        ggml_quantize_chunk(c.g, in.data(), a.data(), 0, rows, cols,
                            c.imat ? flat.data() : nullptr);
        for (int r = 0; r < rows; ++r)
          moesplit::quant::QuantizeRow(c.m, in.data() + r * cols, b.data() + r * rb, cols);
        std::vector<float> d(rows * cols);
        for (int r = 0; r < rows; ++r)
          moesplit::quant::DequantizeRow(c.m, a.data() + r * rb, d.data() + r * cols, cols);
        double num = 0, den = 0;
        for (size_t i = 0; i < in.size(); ++i) {
          double e = (double)in[i] - d[i];
          num += e * e;
          den += (double)in[i] * in[i];
        }
        size_t diff = 0;
        for (size_t i = 0; i < a.size(); ++i) diff += a[i] != b[i];
        printf("seed %u sigma %g %s: ggml rel_rmse %.6f, bytes differing %zu of %zu\n", seed, sigma,
               c.name, std::sqrt(num / den), diff, a.size());
      }
    }
}
