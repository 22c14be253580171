// Shared helpers of the quantized-kernel GPU tests (qgemv, dequant, gemm): random GGUF weight
// matrices made by cpu_kernels' QuantizeRow, their reference values (DequantizeRow), and device
// uploads at an offset that is deliberately not 16-byte aligned.
#pragma once

#include <gtest/gtest.h>

#include <cctype>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "core/base/dtype.h"
#include "cpu_kernels/quant/quant.h"
#include "gpu_kernels/device_buffer.h"
#include "tests/gpu_kernels/gpu_test_util.h"

namespace moesplit::gpu::testing {

inline constexpr GgmlType kGpuQuantTypes[] = {
    GgmlType::kQ4_0,   GgmlType::kQ5_0,    GgmlType::kQ4_1,   GgmlType::kQ5_1,    GgmlType::kQ8_0,
    GgmlType::kIQ4_NL, GgmlType::kMXFP4,   GgmlType::kQ2_K,   GgmlType::kQ3_K,    GgmlType::kQ4_K,
    GgmlType::kQ5_K,   GgmlType::kQ6_K,    GgmlType::kIQ4_XS, GgmlType::kIQ2_XXS, GgmlType::kIQ2_XS,
    GgmlType::kIQ2_S,  GgmlType::kIQ3_XXS, GgmlType::kIQ3_S,  GgmlType::kIQ1_S,   GgmlType::kIQ1_M,
    GgmlType::kF32,    GgmlType::kF16,     GgmlType::kBF16};

// gtest parameter names: "Q4_K", "F16", ...
inline std::string TypeTestName(const ::testing::TestParamInfo<GgmlType>& info) {
  std::string s = TypeName(info.param);
  for (char& c : s) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return s;
}

// Weights start this many bytes into their device buffer: 2-byte aligned (as GGUF blocks may
// be) but not 16-byte aligned, so the kernels' unaligned paths run.
inline constexpr size_t kWeightOffset = 6;

struct Matrix {
  GgmlType type;
  int64_t rows = 0;
  int64_t cols = 0;
  int64_t row_bytes = 0;
  std::vector<uint8_t> bytes;  // rows * row_bytes
  std::vector<float> values;   // rows * cols, DequantizeRow of `bytes`
};

// Random weights (normal, a few 20x outliers, one all-zero row when rows > 2) quantized row by
// row.
inline Matrix RandomMatrix(GgmlType type, int64_t rows, int64_t cols, uint32_t seed) {
  Matrix m{type, rows, cols, RowBytes(type, cols), {}, {}};
  m.bytes.resize(rows * m.row_bytes);
  m.values.resize(rows * cols);
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 0.05f);
  std::vector<float> src(cols);
  std::vector<uint32_t> row((m.row_bytes + 3) / 4);  // 4-byte aligned for (De)QuantizeRow
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < cols; ++c) {
      src[c] = (rows > 2 && r == 1) ? 0.0f : normal(rng) * ((c % 53 == 7) ? 20.0f : 1.0f);
    }
    quant::QuantizeRow(type, src.data(), row.data(), cols);
    std::memcpy(m.bytes.data() + r * m.row_bytes, row.data(), m.row_bytes);
    quant::DequantizeRow(type, row.data(), m.values.data() + r * cols, cols);
  }
  return m;
}

inline std::vector<float> RandomActivations(int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> x(n);
  for (float& v : x) v = normal(rng);
  return x;
}

// Device copy of the matrix bytes at kWeightOffset; the weights are at Weights(buf).
inline DeviceBuffer UploadWeights(const Matrix& m) {
  std::vector<uint8_t> host(kWeightOffset + m.bytes.size() + 16, 0xA5);
  std::memcpy(host.data() + kWeightOffset, m.bytes.data(), m.bytes.size());
  auto buf = DeviceBuffer::Alloc(host.size());
  EXPECT_TRUE(buf.ok()) << buf.status().ToString();
  if (!buf.ok()) return DeviceBuffer();
  EXPECT_TRUE(buf->CopyFromHost(host.data(), host.size()).ok());
  return std::move(*buf);
}
inline const void* Weights(const DeviceBuffer& buf) {
  return static_cast<const uint8_t*>(buf.data()) + kWeightOffset;
}

// Reference y[t][r] = sum_c W[r][c] x[t][c] in double, and sum_c |W[r][c] x[t][c]| for the
// error bound, both n_tok x rows.
struct RefProduct {
  std::vector<double> y;
  std::vector<double> abs_sum;
};
inline RefProduct Reference(const Matrix& m, const std::vector<float>& x, int64_t n_tok) {
  RefProduct ref{std::vector<double>(n_tok * m.rows), std::vector<double>(n_tok * m.rows)};
  for (int64_t t = 0; t < n_tok; ++t) {
    for (int64_t r = 0; r < m.rows; ++r) {
      double s = 0.0, a = 0.0;
      for (int64_t c = 0; c < m.cols; ++c) {
        const double p = static_cast<double>(m.values[r * m.cols + c]) * x[t * m.cols + c];
        s += p;
        a += p < 0 ? -p : p;
      }
      ref.y[t * m.rows + r] = s;
      ref.abs_sum[t * m.rows + r] = a;
    }
  }
  return ref;
}

// Every y is finite (no poison left) and within rel * sum |w * x| of the reference.
inline void ExpectClose(const RefProduct& ref, const std::vector<float>& y, int64_t rows,
                        double rel, const std::string& what) {
  ASSERT_EQ(y.size(), ref.y.size());
  int bad = 0;
  for (size_t i = 0; i < y.size() && bad < 5; ++i) {
    const double err = static_cast<double>(y[i]) - ref.y[i];
    if (!(std::abs(err) <= rel * ref.abs_sum[i])) {  // also catches NaN
      ++bad;
      ADD_FAILURE() << what << ": token " << i / rows << " row " << i % rows << " got " << y[i]
                    << " want " << ref.y[i] << " (bound " << rel * ref.abs_sum[i] << ")";
    }
  }
}

}  // namespace moesplit::gpu::testing
