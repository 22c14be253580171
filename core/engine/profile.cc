#include "core/engine/profile.h"

namespace moesplit::engine {

const char* PhaseName(Phase phase) {
  switch (phase) {
    case Phase::kEmbed:
      return "embeddings";
    case Phase::kAttnProj:
      return "attention projections";
    case Phase::kAttnCore:
      return "attention (cache, scores)";
    case Phase::kAttnOut:
      return "attention output";
    case Phase::kNorm:
      return "norms, residuals";
    case Phase::kRouter:
      return "router";
    case Phase::kExperts:
      return "experts (routed + shared)";
    case Phase::kDenseFfn:
      return "dense FFN";
    case Phase::kOutput:
      return "output head";
    case Phase::kCpuExperts:
      return "routed experts (CPU)";
    case Phase::kDevice:
      return "device (not overlapped)";
  }
  return "?";
}

uint64_t Profile::phase_ns() const {
  uint64_t s = 0;
  for (const PhaseTotals& p : phases) s += p.ns;
  return s;
}

uint64_t Profile::bytes() const {
  uint64_t s = 0;
  for (const PhaseTotals& p : phases) s += p.bytes;
  return s;
}

}  // namespace moesplit::engine
