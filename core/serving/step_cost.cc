#include "core/serving/step_cost.h"

#include <algorithm>

namespace moesplit::serving {

void StepCostModel::Learn(int64_t n_decode, int64_t n_prompt, double ms) {
  // EMA weight 0.2: a new cost shows within ~5 steps (about a second of decode steps), and one
  // odd step moves the estimate by a fifth of its error.
  constexpr double kAlpha = 0.2;
  if (n_decode == 0) {
    debt_ms_ = 0;  // no stream waited on this step
  } else if (decode_step_ms_ > 0 && itl_factor_ > 0) {
    const double bound = itl_factor_ * decode_step_ms_;
    debt_ms_ = std::max(debt_ms_ + ms - bound, -bound);
  }
  if (n_prompt == 0 && n_decode > 0) {
    decode_step_ms_ = decode_step_ms_ <= 0 ? ms : (1 - kAlpha) * decode_step_ms_ + kAlpha * ms;
  } else if (n_prompt > 0 && n_decode > 0 && decode_step_ms_ > 0) {
    const double b = std::max(ms - decode_step_ms_, 0.0) / static_cast<double>(n_prompt);
    prompt_token_ms_ = prompt_token_ms_ <= 0 ? b : (1 - kAlpha) * prompt_token_ms_ + kAlpha * b;
  } else if (n_prompt > 0 && n_decode == 0 && prompt_token_ms_ <= 0) {
    prompt_token_ms_ = ms / static_cast<double>(n_prompt);  // a first guess (an upper bound)
  }
}

int64_t StepCostModel::PromptBudget(int64_t batch_tokens) const {
  if (itl_factor_ > 0 && debt_ms_ > 0) return 0;
  return Budget(decode_step_ms_, prompt_token_ms_, itl_factor_, batch_tokens);
}

int64_t StepCostModel::Budget(double decode_step_ms, double prompt_token_ms, double itl_factor,
                              int64_t batch_tokens) {
  if (itl_factor <= 0) return batch_tokens;
  // Not measured yet: the smallest chunk, so that the first guess cannot cost the streams much.
  if (decode_step_ms <= 0 || prompt_token_ms <= 0) return std::min<int64_t>(8, batch_tokens);
  // t(d) + n b = 2 f t(d)  =>  n = (2 f - 1) t(d) / b.
  const double n = (2 * itl_factor - 1.0) * decode_step_ms / prompt_token_ms;
  return std::clamp<int64_t>(static_cast<int64_t>(std::min(n, 1e9)),
                             std::min<int64_t>(8, batch_tokens), batch_tokens);
}

}  // namespace moesplit::serving
