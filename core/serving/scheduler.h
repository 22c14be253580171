// Continuous batching over one Engine: the server's request threads Submit() requests; one
// scheduler thread runs steps. Each step carries every running sequence's next token (decode)
// plus prompt chunks up to `batch_tokens` in all, so a long prompt is prefilled a chunk at a
// time between decode steps instead of stalling the other streams (llama-server evaluates a
// whole prompt batch of one slot before anyone else's next token). While others decode, the
// chunks are sized from measured step costs so that a step stays within `itl_factor` x a
// decode step.
//
//   request thread:  Submit(req) -> RequestHandle ... Wait()/Next() for events ... Cancel()
//   scheduler:       admit (prefix match in KvBlocks) -> step (Engine::Step) -> sample per
//                    sequence -> detokenize -> stop strings -> events -> finish (blocks released,
//                    the prefix stays cached)
//
// Memory: the KV pool is one pool of blocks for all sequences (no per-slot split). When a step
// needs a block and none is free or evictable, the most recently admitted other sequence is
// preempted: its full blocks go to the prefix index, its blocks are released, and it waits at
// the head of the queue to be re-admitted (its cached prefix makes that cheap unless evicted).
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "core/base/status.h"
#include "core/engine/engine.h"
#include "core/engine/kv_blocks.h"
#include "core/sampling/sampler.h"
#include "core/serving/step_cost.h"
#include "core/tokenizer/tokenizer.h"

namespace moesplit::serving {

struct GenParams {
  sampling::SamplerConfig sampling;
  int64_t max_tokens = -1;         // -1: until EOG or the context is full
  std::vector<std::string> stop;   // stop strings (not included in the output)
  int top_logprobs = -1;           // -1: no logprobs; 0..20: the chosen token's and the top n
  bool ignore_eos = false;         // generate through end-of-generation tokens (benchmarks)
};

struct TokenLogprob {
  int32_t id;
  float logprob;
};

// What the scheduler hands a request thread: text that became final (stop strings resolved,
// complete UTF-8 where the tokens allow), with the tokens that made it.
struct Event {
  std::string text;
  std::vector<int32_t> tokens;
  // Per token when logprobs were asked for: the chosen token and the top ones.
  std::vector<TokenLogprob> chosen;
  std::vector<std::vector<TokenLogprob>> top;
};

struct Usage {
  int64_t prompt_tokens = 0;
  int64_t completion_tokens = 0;
  int64_t cached_tokens = 0;  // prompt tokens whose KV came from the prefix cache
  double prompt_ms = 0;       // admission to the first token's logits
  double predicted_ms = 0;    // first generated token to the end
  double queued_ms = 0;       // waiting for a slot
};

enum class FinishReason { kNone, kStop, kLength, kCancelled, kError };
const char* FinishReasonName(FinishReason r);  // "stop", "length", "cancelled", "error"

// Shared between the scheduler (producer) and a request thread (consumer).
class RequestState {
 public:
  // Moves the events produced so far into *out; waits up to `timeout` when there are none and
  // the request has not finished. True once finished and drained.
  bool Next(std::vector<Event>* out, std::chrono::milliseconds timeout);
  // Stops the sequence at the next step (client gone, stream aborted).
  void Cancel() { cancelled_.store(true); }
  bool cancelled() const { return cancelled_.load(); }
  // Valid once Next returned true.
  FinishReason finish_reason() const;
  const Usage& usage() const { return usage_; }
  const Status& error() const { return error_; }
  int64_t id() const { return id_; }

 private:
  friend class Scheduler;
  void Push(Event e);
  void Finish(FinishReason r, Status error);
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Event> events_;
  bool done_ = false;
  FinishReason reason_ = FinishReason::kNone;
  Status error_;
  Usage usage_;  // written by the scheduler before Finish
  std::atomic<bool> cancelled_{false};
  int64_t id_ = 0;
};

struct SchedulerOptions {
  int max_running = 4;        // -np: sequences evaluated together
  int max_queue = 64;         // requests waiting beyond -np; more: Submit says Unavailable
  int64_t batch_tokens = 512; // tokens per step (decode tokens + prompt chunks)
  // While sequences decode, prompt chunks are sized so that the streams' mean inter-token
  // latency stays within this many times a decode-only step, and no chunk step takes more than
  // twice that (StepCostModel; Sarathi-Serve's stall-free batching, with MoE's saturating expert
  // reads). <= 0: chunks of batch_tokens whatever the latency.
  double itl_factor = 2.0;
  // A prompt with at most this many tokens left runs whole in one step even while others decode
  // (within batch_tokens): each chunk of a prompt reads the experts its tokens route to again,
  // so cutting a short prompt costs the other streams more time in all (V2-Lite, 2 threads: a
  // 128-token prompt in one 0.9 s step, or in 16 steps of 8 tokens at 0.3 s each), and delays
  // its own first token most. Longer prompts are cut to itl_factor. 0: every prompt is cut.
  int64_t whole_prompt_tokens = 256;
};

// Counters for /metrics and /slots (a snapshot).
struct SchedulerStats {
  int running = 0;
  int queued = 0;
  int64_t requests_total = 0;
  int64_t requests_cancelled = 0;
  int64_t prompt_tokens_total = 0;     // evaluated (cache hits excluded)
  int64_t generated_tokens_total = 0;
  int64_t cached_tokens_total = 0;     // prompt tokens reused from the prefix cache
  int64_t prefix_hits = 0;             // requests that reused >= 1 block
  int64_t steps = 0;
  int64_t prompt_steps = 0;            // steps that carried prompt tokens
  // The step costs the prompt-chunk budget is computed from (StepCostModel): a decode-only
  // step, what one prompt token adds, and the streams' latency debt (ms; > 0: decode-only steps
  // come next).
  double decode_step_ms = 0, prompt_token_ms = 0, latency_debt_ms = 0;
  int64_t preemptions = 0;
  double prompt_seconds = 0;           // step time spent on prompt rows (pro rata)
  double generate_seconds = 0;         // step time spent on decode rows (pro rata)
  int32_t kv_blocks_total = 0, kv_blocks_used = 0, kv_blocks_cached = 0, kv_blocks_free = 0;
  int64_t kv_block_size = 0;
  int64_t kv_evictions = 0;
  struct Slot {
    int64_t id;
    int64_t n_prompt, n_past, n_generated;
    bool prefilling;
  };
  std::vector<Slot> slots;
};

class Scheduler {
 public:
  // engine: a CPU engine (its KvCache is the pool); tok: the model's tokenizer. Both outlive it.
  Scheduler(engine::Engine* engine, const tokenizer::Tokenizer* tok, SchedulerOptions options);
  ~Scheduler();  // stops the thread; unfinished requests end as cancelled
  Scheduler(const Scheduler&) = delete;
  Scheduler& operator=(const Scheduler&) = delete;

  // Queues a request. Errors: InvalidArgument (empty prompt, a prompt that leaves no room in the
  // context, bad sampling parameters), Unavailable (the queue is full: retry later).
  StatusOr<std::shared_ptr<RequestState>> Submit(std::vector<int32_t> prompt, GenParams params);
  SchedulerStats Stats() const;
  // Cancels every request and refuses new ones (the server is stopping): streams end at once.
  void Shutdown();
  int64_t ctx_size() const { return ctx_; }  // the most positions one sequence may hold

 private:
  struct Seq;
  void Loop();
  void Admit();                          // waiting -> running while slots and blocks allow
  bool StartSeq(Seq& s);                 // prefix match, first blocks; false: no room now
  bool EnsureBlocks(Seq& s, int64_t n);  // blocks for positions < n; may preempt others
  void Preempt(size_t index);            // running_[index] -> head of waiting_
  void RunStep();
  void Consume(Seq& s, const float* logits);  // sample, emit, maybe finish
  void FinishSeq(Seq& s, FinishReason r, Status error = Status::Ok());
  void Emit(Seq& s, const std::string& text, int32_t id, const float* logits);
  void PublishStats();  // the snapshot Stats() returns (running, queue, blocks, slots)

  engine::Engine* engine_;
  const tokenizer::Tokenizer* tok_;
  SchedulerOptions opt_;
  int64_t ctx_;
  int64_t n_vocab_;
  engine::KvBlocks blocks_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::unique_ptr<Seq>> waiting_;  // guarded by mu_
  std::vector<std::unique_ptr<Seq>> running_;  // scheduler thread only (stats under mu_)
  SchedulerStats stats_;                       // guarded by mu_
  int64_t next_id_ = 1;
  int64_t admit_counter_ = 0;  // scheduler thread only
  bool stop_ = false;
  bool shutting_down_ = false;  // guarded by mu_
  bool cancel_all_ = false;     // guarded by mu_
  std::vector<float> logits_;  // [rows x V] of a step
  StepCostModel cost_;  // learned step costs and the streams' latency debt (scheduler thread)
  std::thread thread_;
};

}  // namespace moesplit::serving
