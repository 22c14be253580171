#include "core/sampling/sampler.h"

#include <algorithm>
#include <cmath>
#include <utility>

namespace moesplit::sampling {
namespace {

// Descending logit, ties by ascending id: a strict total order, so every partial sort below
// is deterministic (the same survivors in the same order on every platform).
bool Before(const Candidate& a, const Candidate& b) {
  if (a.logit != b.logit) return a.logit > b.logit;
  return a.id < b.id;
}

// Sorts the first m items (the m best in descending order); the rest stay in unspecified order.
// nth_element + sort of the prefix: O(n + m log m) instead of a full O(n log n) sort.
void SortPrefix(size_t m, Candidates* c) {
  auto& v = c->items;
  m = std::min(m, v.size());
  if (m == 0 || c->sorted) return;
  if (m < v.size()) std::nth_element(v.begin(), v.begin() + (m - 1), v.end(), Before);
  std::sort(v.begin(), v.begin() + m, Before);
  c->id_ordered = false;
  if (m == v.size()) c->sorted = true;
}

}  // namespace

Status ValidateSamplerConfig(const SamplerConfig& c) {
  if (!std::isfinite(c.temperature) || c.temperature < 0.0f) {
    return InvalidArgumentError("--temp must be >= 0 (0 = greedy), got ", c.temperature);
  }
  if (c.top_k < 0) {
    return InvalidArgumentError("--top-k must be >= 0 (0 = off), got ", c.top_k);
  }
  if (!(c.top_p > 0.0f && c.top_p <= 1.0f)) {
    return InvalidArgumentError("--top-p must be in (0, 1] (1 = off), got ", c.top_p);
  }
  if (!(c.min_p >= 0.0f && c.min_p <= 1.0f)) {
    return InvalidArgumentError("--min-p must be in [0, 1] (0 = off), got ", c.min_p);
  }
  if (!std::isfinite(c.repeat_penalty) || c.repeat_penalty <= 0.0f) {
    return InvalidArgumentError("--repeat-penalty must be > 0 (1 = off), got ", c.repeat_penalty);
  }
  if (c.repeat_last_n < -1) {
    return InvalidArgumentError("--repeat-last-n must be >= -1 (0 = off, -1 = whole history), got ",
                                c.repeat_last_n);
  }
  if (!std::isfinite(c.frequency_penalty)) {
    return InvalidArgumentError("--frequency-penalty must be finite, got ", c.frequency_penalty);
  }
  if (!std::isfinite(c.presence_penalty)) {
    return InvalidArgumentError("--presence-penalty must be finite, got ", c.presence_penalty);
  }
  return Status::Ok();
}

void InitCandidates(std::span<const float> logits, Candidates* c) {
  c->items.resize(logits.size());
  for (size_t i = 0; i < logits.size(); ++i) {
    c->items[i] = Candidate{static_cast<int32_t>(i), logits[i], 0.0f};
  }
  c->sorted = false;
  c->id_ordered = true;
}

namespace {

// Calls fn(id, count) once per distinct token among the last `last_n` of history (-1 = all).
template <typename Fn>
void ForEachRecentToken(std::span<const int32_t> history, int32_t last_n, Fn fn) {
  const size_t n =
      last_n < 0 ? history.size() : std::min(history.size(), static_cast<size_t>(last_n));
  // window[n]: the last n tokens, sorted so that equal ids form runs (count = run length).
  std::vector<int32_t> window(history.end() - n, history.end());
  std::sort(window.begin(), window.end());
  for (size_t i = 0; i < window.size();) {
    size_t j = i;
    while (j < window.size() && window[j] == window[i]) ++j;
    fn(window[i], static_cast<int>(j - i));
    i = j;
  }
}

bool PenaltiesOff(const std::span<const int32_t> history, int32_t last_n, float repeat,
                  float frequency, float presence) {
  return last_n == 0 || history.empty() ||
         (repeat == 1.0f && frequency == 0.0f && presence == 0.0f);
}

float Penalize(float logit, int count, float repeat, float frequency, float presence) {
  logit = logit <= 0.0f ? logit * repeat : logit / repeat;
  return logit - (static_cast<float>(count) * frequency + presence);
}

}  // namespace

void ApplyPenalties(std::span<const int32_t> history, int32_t last_n, float repeat_penalty,
                    float frequency_penalty, float presence_penalty, Candidates* c) {
  if (PenaltiesOff(history, last_n, repeat_penalty, frequency_penalty, presence_penalty)) return;
  std::vector<std::pair<int32_t, int>> recent;  // (id, count), ascending id
  ForEachRecentToken(history, last_n,
                     [&](int32_t id, int count) { recent.emplace_back(id, count); });
  for (Candidate& cand : c->items) {
    auto it = std::lower_bound(recent.begin(), recent.end(), std::make_pair(cand.id, 0));
    if (it == recent.end() || it->first != cand.id) continue;
    cand.logit =
        Penalize(cand.logit, it->second, repeat_penalty, frequency_penalty, presence_penalty);
  }
  c->sorted = false;
}

void PenalizeLogits(std::span<const int32_t> history, int32_t last_n, float repeat_penalty,
                    float frequency_penalty, float presence_penalty, std::span<float> logits) {
  if (PenaltiesOff(history, last_n, repeat_penalty, frequency_penalty, presence_penalty)) return;
  ForEachRecentToken(history, last_n, [&](int32_t id, int count) {
    if (id < 0 || static_cast<size_t>(id) >= logits.size()) return;
    logits[id] = Penalize(logits[id], count, repeat_penalty, frequency_penalty, presence_penalty);
  });
}

void TopKFromLogits(std::span<const float> logits, int32_t k, Candidates* c) {
  if (k <= 0 || static_cast<size_t>(k) >= logits.size()) {
    InitCandidates(logits, c);
    ApplyTopK(k, c);
    return;
  }
  // Min-heap (by Before) of the best k seen so far: one compare with the heap's worst per
  // token, so ~n_vocab compares plus O(k log k) for the few that enter. No n-sized copy.
  auto& heap = c->items;
  heap.clear();
  for (size_t i = 0; i < logits.size(); ++i) {
    const Candidate cand{static_cast<int32_t>(i), logits[i], 0.0f};
    if (heap.size() < static_cast<size_t>(k)) {
      heap.push_back(cand);
      std::push_heap(heap.begin(), heap.end(), Before);
    } else if (Before(cand, heap.front())) {
      std::pop_heap(heap.begin(), heap.end(), Before);
      heap.back() = cand;
      std::push_heap(heap.begin(), heap.end(), Before);
    }
  }
  std::sort_heap(heap.begin(), heap.end(), Before);  // ascending by Before = best first
  c->sorted = true;
  c->id_ordered = false;
}

void ApplyTopK(int32_t k, Candidates* c) {
  if (k <= 0 || c->items.empty()) return;
  const size_t keep = std::min(static_cast<size_t>(k), c->items.size());
  SortPrefix(keep, c);
  c->items.resize(keep);
  c->sorted = true;
}

void ApplyTopP(float p, Candidates* c) {
  if (p >= 1.0f || c->items.size() <= 1) return;
  Softmax(c);  // at temperature 1, over all current candidates
  auto& v = c->items;
  // Adaptive: the tokens that reach p are usually few, so sort only the best 256 first and
  // sort everything only if their mass falls short of p.
  size_t sorted_upto = c->sorted ? v.size() : std::min<size_t>(256, v.size());
  SortPrefix(sorted_upto, c);
  float cum = 0.0f;
  size_t keep = v.size();
  for (size_t i = 0; i < v.size(); ++i) {
    if (i == sorted_upto) {  // ran out of sorted tokens before reaching p: sort 4x more
      const size_t m = std::min(v.size(), 4 * sorted_upto);
      if (m < v.size()) std::nth_element(v.begin() + i, v.begin() + (m - 1), v.end(), Before);
      std::sort(v.begin() + i, v.begin() + m, Before);
      sorted_upto = m;
    }
    cum += v[i].p;
    if (cum >= p) {
      keep = i + 1;
      break;
    }
  }
  v.resize(keep);
  c->sorted = true;
  c->id_ordered = false;
}

void ApplyMinP(float min_p, Candidates* c) {
  if (min_p <= 0.0f || c->items.empty()) return;
  float max_logit = c->items[0].logit;
  if (!c->sorted) {
    for (const Candidate& cand : c->items) max_logit = std::max(max_logit, cand.logit);
  }
  // p_i >= min_p * p_max  <=>  exp(l_i - l_max) >= min_p  <=>  l_i >= l_max + log(min_p).
  const float min_logit = max_logit + std::log(min_p);
  auto& v = c->items;
  const size_t before = v.size();
  v.erase(std::remove_if(v.begin(), v.end(),
                         [&](const Candidate& cand) { return cand.logit < min_logit; }),
          v.end());
  if (v.size() != before) c->id_ordered = false;
}

void ApplyTemperature(float t, Candidates* c) {
  if (t <= 0.0f) return;
  for (Candidate& cand : c->items) cand.logit /= t;
}

void Softmax(Candidates* c) {
  if (c->items.empty()) return;
  float max_logit = c->items[0].logit;
  if (!c->sorted) {
    for (const Candidate& cand : c->items) max_logit = std::max(max_logit, cand.logit);
  }
  double sum = 0.0;
  for (Candidate& cand : c->items) {
    cand.p = std::exp(cand.logit - max_logit);
    sum += cand.p;
  }
  const float inv = static_cast<float>(1.0 / sum);
  for (Candidate& cand : c->items) cand.p *= inv;
}

size_t DrawIndex(const Candidates& c, double u) {
  MOESPLIT_CHECK(!c.items.empty(), "DrawIndex on an empty candidate set");
  double total = 0.0;
  for (const Candidate& cand : c.items) total += cand.p;
  const double target = u * total;
  double run = 0.0;
  for (size_t i = 0; i < c.items.size(); ++i) {
    run += c.items[i].p;
    if (target < run) return i;
  }
  return c.items.size() - 1;  // u * total rounded up to the full sum
}

StatusOr<Sampler> Sampler::Create(const SamplerConfig& config) {
  MOESPLIT_RETURN_IF_ERROR(ValidateSamplerConfig(config));
  uint32_t seed = config.seed;
  if (seed == kRandomSeed) {
    std::random_device rd;
    seed = rd();
    if (seed == kRandomSeed) seed = 0;
  }
  return Sampler(config, seed);
}

Sampler::Sampler(const SamplerConfig& config, uint32_t seed)
    : config_(config), seed_(seed), rng_(seed) {}

void Sampler::Reseed(uint32_t seed) {
  seed_ = seed;
  rng_.seed(seed);
}

double Sampler::NextUniform() {
  // (27 bits << 26 | 26 bits) / 2^53: the same on every platform, unlike
  // std::uniform_real_distribution whose use of the engine is implementation-defined.
  const uint64_t a = rng_() >> 5;
  const uint64_t b = rng_() >> 6;
  return static_cast<double>((a << 26) | b) * (1.0 / 9007199254740992.0);
}

const Candidates& Sampler::Filter(std::span<const float> logits, std::span<const int32_t> history) {
  FilterImpl(logits, history);
  if (!cand_.sorted) {  // only when both top-k and top-p are off
    std::sort(cand_.items.begin(), cand_.items.end(), Before);
    cand_.sorted = true;
    cand_.id_ordered = false;
  }
  return cand_;
}

void Sampler::FilterImpl(std::span<const float> logits, std::span<const int32_t> history) {
  MOESPLIT_CHECK(!logits.empty(), "Sampler: empty logits");
  scratch_.assign(logits.begin(), logits.end());
  PenalizeLogits(history, config_.repeat_last_n, config_.repeat_penalty, config_.frequency_penalty,
                 config_.presence_penalty, scratch_);
  if (config_.temperature <= 0.0f) {
    // Greedy: every filter keeps the arg-max, so skip them. O(n_vocab); ties -> lowest id.
    const size_t best = std::max_element(scratch_.begin(), scratch_.end()) - scratch_.begin();
    cand_.items.assign(1, Candidate{static_cast<int32_t>(best), scratch_[best], 1.0f});
    cand_.sorted = true;
    cand_.id_ordered = false;
    return;
  }
  TopKFromLogits(scratch_, config_.top_k, &cand_);
  ApplyTopP(config_.top_p, &cand_);
  ApplyMinP(config_.min_p, &cand_);
  ApplyTemperature(config_.temperature, &cand_);
  Softmax(&cand_);
}

int32_t Sampler::Sample(std::span<const float> logits, std::span<const int32_t> history) {
  FilterImpl(logits, history);
  const Candidates& c = cand_;
  if (c.items.size() == 1) return c.items[0].id;
  return c.items[DrawIndex(c, NextUniform())].id;
}

}  // namespace moesplit::sampling
