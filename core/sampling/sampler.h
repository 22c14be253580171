// Next-token sampling: repetition penalties, top-k, top-p, min-p, temperature, then a draw.
//
// The stages and their order are llama.cpp's default chain (common/common.h, samplers list):
//   penalties -> top-k -> top-p -> min-p -> temperature -> draw
// with the same definitions (src/llama-sampler.cpp):
//   - repetition penalty over the last `repeat_last_n` history tokens, each distinct token once:
//       logit > 0 ? logit / penalty : logit * penalty
//     then logit -= count * frequency_penalty + presence_penalty (count = occurrences in the
//     window);
//   - top-k keeps the k largest logits;
//   - top-p takes the softmax (at temperature 1) of the survivors and keeps the smallest
//     prefix, in descending order, whose cumulative probability is >= p;
//   - min-p keeps tokens with p_i >= min_p * p_max, i.e. logit_i >= logit_max + log(min_p);
//   - temperature divides the logits; temperature 0 means greedy (argmax after penalties).
// The draw is the inverse CDF of softmax(logit / T) at a uniform number from our own
// std::mt19937 (seeded explicitly; no global state), so a seed reproduces a run.
#pragma once

#include <cstdint>
#include <random>
#include <span>
#include <vector>

#include "core/base/status.h"

namespace moesplit::sampling {

// Seed value meaning "draw one from std::random_device" (llama.cpp's LLAMA_DEFAULT_SEED).
inline constexpr uint32_t kRandomSeed = 0xFFFFFFFFu;

// Defaults are llama.cpp's (common_params_sampling). The flag names in validation errors are
// the command-line flags of `moesplit run` / `chat` (llama.cpp's spelling).
struct SamplerConfig {
  float temperature = 0.8f;        // --temp: >= 0; 0 = greedy
  int32_t top_k = 40;              // --top-k: >= 0; 0 = off (all tokens)
  float top_p = 0.95f;             // --top-p: in (0, 1]; 1 = off
  float min_p = 0.05f;             // --min-p: in [0, 1]; 0 = off
  float repeat_penalty = 1.0f;     // --repeat-penalty: > 0; 1 = off
  int32_t repeat_last_n = 64;      // --repeat-last-n: >= -1; 0 = off, -1 = whole history
  float frequency_penalty = 0.0f;  // --frequency-penalty: subtracted count times; 0 = off
  float presence_penalty = 0.0f;   // --presence-penalty: subtracted once if present; 0 = off
  uint32_t seed = kRandomSeed;     // --seed: kRandomSeed = pick one (Sampler::seed() tells which)
};

// InvalidArgument naming the flag and the value, e.g. "--top-p must be in (0, 1], got 1.5".
Status ValidateSamplerConfig(const SamplerConfig& config);

// One candidate token. `p` is filled by Softmax (and by the stages that need it).
struct Candidate {
  int32_t id;   // token id
  float logit;  // current (penalized / scaled) logit
  float p;      // probability among the current candidates, 0 until computed
};

// The candidate set the stages shrink. Invariants: if `sorted`, items are in descending logit
// order; if `id_ordered`, items[i].id == i for all i (the untouched full vocabulary).
struct Candidates {
  std::vector<Candidate> items;  // [n] with n <= n_vocab
  bool sorted = false;
  bool id_ordered = false;
};

// items = {(i, logits[i], 0)} for i in [0, n_vocab); id_ordered.
void InitCandidates(std::span<const float> logits, Candidates* c);

// The stages, usable one by one (tests) or through Sampler. Each keeps at least one token.
// History tokens outside the vocabulary are ignored.
void ApplyPenalties(std::span<const int32_t> history, int32_t last_n, float repeat_penalty,
                    float frequency_penalty, float presence_penalty, Candidates* c);
// The same penalties applied in place to a full logits[n_vocab] row (what Sampler uses).
void PenalizeLogits(std::span<const int32_t> history, int32_t last_n, float repeat_penalty,
                    float frequency_penalty, float presence_penalty, std::span<float> logits);
void ApplyTopK(int32_t k, Candidates* c);       // k <= 0 or k >= n: no-op (but k >= n sorts)
void ApplyTopP(float p, Candidates* c);         // p >= 1: no-op; leaves items sorted
void ApplyMinP(float min_p, Candidates* c);     // min_p <= 0: no-op; keeps order
void ApplyTemperature(float t, Candidates* c);  // t > 0: logit /= t (t <= 0 is the caller's greedy)
// InitCandidates + ApplyTopK in one pass over logits[n_vocab] with a k-sized heap: the top-k
// survivors, sorted (what Sampler uses; O(n_vocab) compares instead of an n-sized copy + select).
void TopKFromLogits(std::span<const float> logits, int32_t k, Candidates* c);
// p_i = exp(logit_i - max) / sum_j exp(logit_j - max) over the current items.
void Softmax(Candidates* c);

// Index into c.items chosen by inverse CDF at u in [0, 1) (needs Softmax first).
size_t DrawIndex(const Candidates& c, double u);

class Sampler {
 public:
  // Validates the config; a kRandomSeed seed is replaced by one from std::random_device.
  static StatusOr<Sampler> Create(const SamplerConfig& config);

  // Chooses the next token from logits[n_vocab] given the tokens so far (prompt + generated,
  // oldest first; only the last repeat_last_n matter). n_vocab must be > 0.
  int32_t Sample(std::span<const float> logits, std::span<const int32_t> history);

  // The candidates Sample would draw from, with their final probabilities (after temperature),
  // sorted by descending probability (a full sort of the vocabulary if top-k and top-p are
  // both off; Sample does not sort). For greedy (temperature 0): the arg-max with p = 1.
  const Candidates& Filter(std::span<const float> logits, std::span<const int32_t> history);

  const SamplerConfig& config() const { return config_; }
  uint32_t seed() const { return seed_; }  // the seed actually used (never kRandomSeed)
  void Reseed(uint32_t seed);

 private:
  Sampler(const SamplerConfig& config, uint32_t seed);
  void FilterImpl(std::span<const float> logits, std::span<const int32_t> history);  // -> cand_
  double NextUniform();  // in [0, 1), 53 random bits from two 32-bit outputs

  SamplerConfig config_;
  uint32_t seed_;
  std::mt19937 rng_;
  std::vector<float> scratch_;  // [n_vocab] penalized logits
  Candidates cand_;             // scratch, [n_vocab] capacity reused between calls
};

}  // namespace moesplit::sampling
