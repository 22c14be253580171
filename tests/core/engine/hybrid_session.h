// Helpers shared by the hybrid-pass tests (HostBackend: hybrid_forward_test.cc; the emulated
// CUDA device: hybrid_emu_test.cc).
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "core/engine/dense_backend.h"
#include "core/engine/engine.h"

namespace moesplit::engine {

// A hybrid session with every MoE layer's routed experts at `home` (kCpu by default: the split
// the bus carries; kAuto fills the backend's free memory); nullptr (and a test failure) when
// Session::Create refuses.
inline std::unique_ptr<Session> HybridSession(const Model& model, DenseBackend* be,
                                              int64_t ubatch = 512,
                                              ExpertHome home = ExpertHome::kCpu) {
  SessionOptions o{.ctx_size = 128, .n_threads = 2};
  o.backend = be;
  o.ubatch = ubatch;
  o.expert_homes.assign(static_cast<size_t>(model.config().n_layer), home);
  StatusOr<std::unique_ptr<Session>> s = Session::Create(model, o);
  EXPECT_TRUE(s.ok()) << s.status().ToString();
  return s.ok() ? std::move(*s) : nullptr;
}

// All logits of `tokens`, as one batch or token by token.
inline std::vector<float> RunTokens(Session& s, const std::vector<int32_t>& tokens, bool decode) {
  if (!decode) return s.Eval(tokens, true).value();
  std::vector<float> all;
  for (int32_t t : tokens) {
    std::vector<float> row = s.Eval(std::span<const int32_t>(&t, 1), false).value();
    all.insert(all.end(), row.begin(), row.end());
  }
  return all;
}

}  // namespace moesplit::engine
