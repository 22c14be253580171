// Helpers shared by the engine tests that compare logits with llama.cpp's.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "tests/testdata.h"

namespace moesplit::testing {

// A headerless float32 little-endian file (llama.cpp-made logits [n_tokens x n_vocab]).
inline std::vector<float> ReadF32(const std::string& path) {
  const std::vector<uint8_t> bytes = ReadFileBytes(path);
  std::vector<float> v(bytes.size() / 4);
  std::memcpy(v.data(), bytes.data(), v.size() * 4);
  return v;
}

// Pearson correlation of a[0..n) and b[0..n), two-pass in double.
inline double Pearson(const float* a, const float* b, int64_t n) {
  double ma = 0, mb = 0;
  for (int64_t i = 0; i < n; ++i) ma += a[i], mb += b[i];
  ma /= n, mb /= n;
  double sab = 0, saa = 0, sbb = 0;
  for (int64_t i = 0; i < n; ++i) {
    sab += (a[i] - ma) * (b[i] - mb), saa += (a[i] - ma) * (a[i] - ma);
    sbb += (b[i] - mb) * (b[i] - mb);
  }
  return sab / std::sqrt(saa * sbb);
}

// The token sequences of shared/testdata's ds-tiny reference logits (its README).
inline std::vector<int32_t> TinySeqA() {
  return {0, 79, 113, 71, 277, 432, 118, 60, 34, 54, 52, 262, 923, 431, 822, 35};
}
inline std::vector<int32_t> TinySeqB() {
  std::vector<int32_t> t;
  for (int k = 0; k < 64; ++k) t.push_back((613 * k + 101) % 1022 + 2);
  return t;
}

// shared/testdata's acceptance rule for one row of n logits against llama.cpp's: Pearson >=
// 0.999, and the same argmax where the reference's top-1 leads its top-2 by > 1% of the row's
// range.
inline bool RowAgrees(const float* ours, const float* ref, int64_t n) {
  if (Pearson(ours, ref, n) < 0.999) return false;
  std::vector<float> sorted(ref, ref + n);
  std::sort(sorted.begin(), sorted.end());
  const float gap = sorted[n - 1] - sorted[n - 2];
  const float range = sorted[n - 1] - sorted[0];
  if (gap <= 0.01f * range) return true;  // argmax not decisive in the reference
  return std::max_element(ours, ours + n) - ours == std::max_element(ref, ref + n) - ref;
}

}  // namespace moesplit::testing
