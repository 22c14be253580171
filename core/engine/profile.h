// Where an Eval's time goes: wall time and bytes read per step of the forward pass, summed over
// the Eval calls a Session makes while a Profile is attached (Session::set_profile; `moesplit
// bench --verbose` prints it). The answer to "why does my box decode at this speed": a decode
// step is DRAM-bound where a phase's bytes / time is near the read bandwidth, and compute- or
// sync-bound where it is not.
//
// Cost: two steady_clock reads per phase (~25 ns each through the vDSO); a DeepSeek-V2-Lite
// decode step has ~7 phases x 27 layers = ~190 of them, ~10 us on a ~40 ms token (< 0.03%).
#pragma once

#include <array>
#include <chrono>
#include <cstdint>

namespace moesplit::engine {

// Nanoseconds of steady_clock since t0.
inline uint64_t NsSince(std::chrono::steady_clock::time_point t0) {
  return static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - t0)
          .count());
}

enum class Phase : uint8_t {
  kEmbed,     // token_embd rows
  kAttnProj,  // q / q_a (+ norm) / q_b / kv_a (MLA), q / k / v (GQA)
  kAttnCore,  // kv norm, RoPE, cache writes, scores, softmax, latent / value products
  kAttnOut,   // attn_output
  kNorm,      // residual adds and the RMS norms between blocks
  kRouter,    // ffn_gate_inp logits and the top-k
  kExperts,   // routed + shared experts (the fused MoE path)
  kDenseFfn,  // dense FFN layers
  kOutput,    // output_norm and the lm_head
  // The hybrid pass (hybrid_forward.h) times the CPU's share and the rest of each Eval:
  kCpuExperts,  // routed experts on the CPU pools, inside the device's host calls
  kDevice,      // device work and transfers not hidden behind the CPU experts
};
inline constexpr int kNumPhases = 11;

// "attention projections", ... (the rows of bench --verbose).
const char* PhaseName(Phase phase);

struct PhaseTotals {
  uint64_t ns = 0;     // wall time spent in the phase
  uint64_t bytes = 0;  // bytes it read: weights (each matrix once per Eval) and the KV cache
  int64_t calls = 0;   // times the phase ran
};

struct Profile {
  std::array<PhaseTotals, kNumPhases> phases{};  // indexed by Phase
  uint64_t eval_ns = 0;  // wall time of the Eval calls: the phases plus what lies between them
  int64_t tokens = 0;    // tokens evaluated
  int64_t evals = 0;     // Eval calls

  PhaseTotals& operator[](Phase p) { return phases[static_cast<size_t>(p)]; }
  const PhaseTotals& operator[](Phase p) const { return phases[static_cast<size_t>(p)]; }
  uint64_t phase_ns() const;  // sum over the phases
  uint64_t bytes() const;     // sum over the phases
  void Reset() { *this = Profile(); }
};

// Adds its own lifetime (and `bytes`) to profile's `phase`; a null profile makes it a no-op
// (no clock read), so the forward pass is instrumented unconditionally.
class PhaseTimer {
 public:
  PhaseTimer(Profile* profile, Phase phase, uint64_t bytes = 0)
      : profile_(profile), phase_(phase), bytes_(bytes) {
    if (profile_ != nullptr) t0_ = std::chrono::steady_clock::now();
  }
  ~PhaseTimer() {
    if (profile_ == nullptr) return;
    PhaseTotals& t = (*profile_)[phase_];
    t.ns += NsSince(t0_);
    t.bytes += bytes_;
    ++t.calls;
  }
  PhaseTimer(const PhaseTimer&) = delete;
  PhaseTimer& operator=(const PhaseTimer&) = delete;

 private:
  Profile* profile_;
  Phase phase_;
  uint64_t bytes_;
  std::chrono::steady_clock::time_point t0_;
};

}  // namespace moesplit::engine
