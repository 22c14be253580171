// Helpers shared by the quant tests: NaN poisoning, error metrics, typed file loading.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "core/base/dtype.h"
#include "cpu_kernels/quant/quant.h"

namespace moesplit::quant::testing {

// Output buffers are filled with NaN (floats) or 0xFF bytes before every kernel run, so a value
// the kernel forgot to write can never pass as correct.
inline std::vector<float> NanFloats(size_t n) {
  return std::vector<float>(n, std::numeric_limits<float>::quiet_NaN());
}
inline std::vector<uint8_t> PoisonBytes(size_t n) { return std::vector<uint8_t>(n, 0xFF); }

inline std::vector<float> BytesToFloats(const std::vector<uint8_t>& b) {
  std::vector<float> f(b.size() / 4);
  std::memcpy(f.data(), b.data(), f.size() * 4);
  return f;
}

// ||a - b|| / ||a|| in double.
inline double RelRmse(const std::vector<float>& a, const std::vector<float>& b) {
  double num = 0.0, den = 0.0;
  for (size_t i = 0; i < a.size(); ++i) {
    const double d = static_cast<double>(a[i]) - static_cast<double>(b[i]);
    num += d * d;
    den += static_cast<double>(a[i]) * a[i];
  }
  return den > 0.0 ? std::sqrt(num / den) : std::sqrt(num);
}

inline bool AllFinite(const std::vector<float>& v) {
  for (float x : v) {
    if (!std::isfinite(x)) return false;
  }
  return true;
}

// Quantizes `rows` rows of `n` values then dequantizes them, both into poisoned buffers.
struct RoundTrip {
  std::vector<uint8_t> bytes;
  std::vector<float> deq;
};
inline RoundTrip QuantizeDequantize(GgmlType t, const std::vector<float>& in, int64_t n) {
  const int64_t rows = static_cast<int64_t>(in.size()) / n;
  const int64_t row_bytes = RowBytes(t, n);
  RoundTrip r{PoisonBytes(row_bytes * rows), NanFloats(in.size())};
  for (int64_t i = 0; i < rows; ++i) {
    QuantizeRow(t, in.data() + i * n, r.bytes.data() + i * row_bytes, n);
  }
  for (int64_t i = 0; i < rows; ++i) {
    DequantizeRow(t, r.bytes.data() + i * row_bytes, r.deq.data() + i * n, n);
  }
  return r;
}

}  // namespace moesplit::quant::testing
