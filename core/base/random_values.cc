#include "core/base/random_values.h"

#include <random>

namespace moesplit {

std::vector<float> NormalValues(int64_t count, uint32_t seed, float scale) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, scale);
  std::vector<float> v(static_cast<size_t>(count));  // [count]
  for (float& x : v) x = dist(rng);
  return v;
}

}  // namespace moesplit
