#ifndef MOESPLIT_CORE_SERVING_STEP_COST_H_
#define MOESPLIT_CORE_SERVING_STEP_COST_H_

#include <cstdint>

namespace moesplit::serving {

// How much of a long prompt a step may carry while other sequences decode, learned from the
// steps' measured times (the scheduler thread's only; plain numbers, no clock).
//
// A step's time is about t(d) + b * p for d decode tokens and p prompt tokens: a decode step is
// mostly DRAM reads of the experts its tokens route to, and each prompt token adds compute b plus
// the experts it alone routes to. For an MoE the reads saturate: V2-Lite (64 experts, 6 per
// token) reads 1 - (58/64)^3 = 26% of its experts for 3 decode tokens, 66% with 8 prompt tokens
// beside them and ~95% with 30. So even the smallest useful chunk makes its step ~2.5x a decode
// step, and the cheapest way to prefill beside decoding streams is few, larger chunks, each
// followed by decode-only steps that give the streams their time back:
//   - a chunk step takes up to 2 x itl_factor x t(d) (the longest a stream waits for a token);
//   - the time a step takes beyond itl_factor x t(d) is a debt; while it is > 0 the next steps
//     carry no prompt tokens, each paying back itl_factor x t(d) - t(d). So the streams' mean
//     inter-token latency stays within itl_factor x t(d), and most of their gaps are plain
//     decode steps (at 2.5: a chunk at ~5 t(d), then ~2 decode steps; the default is 2.0, which
//     leaves room for the 1.4x by which a noisy VM inflates the streams' measured mean).
// t(d) is re-measured on those decode-only steps, so it follows the machine (shared VMs swing
// in memory bandwidth by 3x within seconds).
class StepCostModel {
 public:
  explicit StepCostModel(double itl_factor) : itl_factor_(itl_factor) {}

  // One step took `ms` for n_decode decode tokens and n_prompt prompt tokens.
  void Learn(int64_t n_decode, int64_t n_prompt, double ms);
  // Prompt tokens the next step may carry beside decode tokens: 0 while the streams are owed
  // time; else (2 x itl_factor - 1) x t(d) / b in [8, batch_tokens] (8 until both are measured);
  // batch_tokens when itl_factor <= 0 (no latency bound).
  int64_t PromptBudget(int64_t batch_tokens) const;
  // The same formula on given costs (tests, docs).
  static int64_t Budget(double decode_step_ms, double prompt_token_ms, double itl_factor,
                        int64_t batch_tokens);

  double decode_step_ms() const { return decode_step_ms_; }
  double prompt_token_ms() const { return prompt_token_ms_; }
  double debt_ms() const { return debt_ms_; }

 private:
  double itl_factor_;
  double decode_step_ms_ = 0;   // EMA of a decode-only step's time
  double prompt_token_ms_ = 0;  // EMA of the time one prompt token adds to a step with decodes
  // Time the decoding streams' steps ran past itl_factor x t(d) in all (ms; > 0: decode-only
  // steps come next; down to -itl_factor x t(d) of credit).
  double debt_ms_ = 0;
};

}  // namespace moesplit::serving

#endif  // MOESPLIT_CORE_SERVING_STEP_COST_H_
