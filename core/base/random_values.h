// Deterministic random inputs for calibration and benchmarks (weights, activations).
#pragma once

#include <cstdint>
#include <vector>

namespace moesplit {

// [count] floats drawn from N(0, scale^2) by std::normal_distribution over mt19937(seed): the
// same values for the same arguments on every run (calibration, topo --measure, bench programs).
std::vector<float> NormalValues(int64_t count, uint32_t seed, float scale);

}  // namespace moesplit
