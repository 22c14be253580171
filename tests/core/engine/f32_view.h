// A host f32 vector as a TensorView (ggml ne order: ne[0] = values per row), for tests that
// hand small random weights to the engine's forward functions.
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include "core/model/model_weights.h"

namespace moesplit::testing {

inline TensorView F32View(const std::vector<float>& v, std::array<int64_t, 4> ne, int n_dims) {
  TensorView t;
  t.type = GgmlType::kF32;
  t.n_dims = n_dims;
  t.ne = ne;
  t.data = v.data();
  t.nbytes = v.size() * 4;
  return t;
}

}  // namespace moesplit::testing
