#include "core/serving/scheduler.h"

#include <algorithm>
#include <cmath>

#include "core/engine/kv_cache.h"
#include "core/serving/stop_strings.h"

namespace moesplit::serving {

namespace {
using Clock = std::chrono::steady_clock;
double MsBetween(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double, std::milli>(b - a).count();
}
}  // namespace

const char* FinishReasonName(FinishReason r) {
  switch (r) {
    case FinishReason::kStop: return "stop";
    case FinishReason::kLength: return "length";
    case FinishReason::kCancelled: return "cancelled";
    case FinishReason::kError: return "error";
    case FinishReason::kNone: break;
  }
  return "none";
}

// ---- RequestState -----------------------------------------------------------------------------

bool RequestState::Next(std::vector<Event>* out, std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(mu_);
  if (events_.empty() && !done_) {
    cv_.wait_for(lock, timeout, [&] { return !events_.empty() || done_; });
  }
  while (!events_.empty()) {
    out->push_back(std::move(events_.front()));
    events_.pop_front();
  }
  return done_;
}

FinishReason RequestState::finish_reason() const {
  std::lock_guard<std::mutex> lock(mu_);
  return reason_;
}

void RequestState::Push(Event e) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    events_.push_back(std::move(e));
  }
  cv_.notify_all();
}

void RequestState::Finish(FinishReason r, Status error) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    reason_ = r;
    error_ = std::move(error);
    done_ = true;
  }
  cv_.notify_all();
}

// ---- the sequences ------------------------------------------------------------------------------

struct Scheduler::Seq {
  Seq(const tokenizer::Tokenizer& tok, GenParams p, sampling::Sampler s)
      : params(std::move(p)), sampler(std::move(s)), detok(tok, false), stops(params.stop) {}
  std::shared_ptr<RequestState> st;
  GenParams params;
  sampling::Sampler sampler;
  tokenizer::StreamingDetokenizer detok;
  StopStrings stops;
  std::vector<int32_t> tokens;  // [n_prompt + n_generated] the prompt, then generated tokens
  int64_t n_prompt = 0;
  int64_t n_generated = 0;
  int64_t n_past = 0;           // tokens whose KV is in the cache (< tokens.size() while running)
  std::vector<int32_t> blocks;  // [ceil(n_past / B) ..] block table
  bool admitted_once = false;
  bool finished = false;
  bool cut = false;             // part of its prompt went in a chunk (it is a long prompt)
  int64_t admit_order = 0;      // higher: admitted later (preempted first)
  Clock::time_point t_submit, t_admit, t_first;
};

Scheduler::Scheduler(engine::Engine* engine, const tokenizer::Tokenizer* tok,
                     SchedulerOptions options)
    : engine_(engine),
      tok_(tok),
      opt_(options),
      ctx_(engine->ctx_size()),
      n_vocab_(engine->model().config().n_vocab),
      blocks_(static_cast<int32_t>(engine->kv_blocks()), engine->kv_block_size()),
      cost_(options.itl_factor) {
  opt_.max_running = std::max(opt_.max_running, 1);
  opt_.batch_tokens = std::max<int64_t>(opt_.batch_tokens, 1);
  stats_.kv_block_size = blocks_.block_size();
  stats_.kv_blocks_total = blocks_.n_blocks();
  stats_.kv_blocks_free = blocks_.n_blocks();
  thread_ = std::thread([this] { Loop(); });
}

Scheduler::~Scheduler() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
  for (auto& s : running_) s->st->Finish(FinishReason::kCancelled, Status::Ok());
  for (auto& s : waiting_) s->st->Finish(FinishReason::kCancelled, Status::Ok());
}

StatusOr<std::shared_ptr<RequestState>> Scheduler::Submit(std::vector<int32_t> prompt,
                                                          GenParams params) {
  if (prompt.empty()) return InvalidArgumentError("the prompt is empty");
  for (int32_t id : prompt) {
    if (id < 0 || id >= n_vocab_) {
      return InvalidArgumentError("token id ", id, " is outside the vocabulary [0, ", n_vocab_,
                                  ")");
    }
  }
  if (static_cast<int64_t>(prompt.size()) >= ctx_) {
    return InvalidArgumentError("the prompt has ", prompt.size(), " tokens and the context holds ",
                                ctx_, " (the server's -c): nothing would be left to generate; "
                                "shorten the prompt or restart the server with a larger -c");
  }
  MOESPLIT_ASSIGN_OR_RETURN(sampling::Sampler sampler, sampling::Sampler::Create(params.sampling));
  auto seq = std::make_unique<Seq>(*tok_, std::move(params), std::move(sampler));
  seq->st = std::make_shared<RequestState>();
  seq->n_prompt = static_cast<int64_t>(prompt.size());
  seq->tokens = std::move(prompt);
  seq->t_submit = Clock::now();
  std::shared_ptr<RequestState> st = seq->st;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (shutting_down_) return ResourceExhaustedError("the server is shutting down");
    if (static_cast<int>(waiting_.size()) >= opt_.max_queue) {
      return ResourceExhaustedError("the server is busy: ", stats_.running,
                                    " requests running and ", waiting_.size(),
                                    " queued (--max-queue ", opt_.max_queue, "); retry later");
    }
    st->id_ = next_id_++;
    waiting_.push_back(std::move(seq));
    stats_.requests_total += 1;
    stats_.queued = static_cast<int>(waiting_.size());
  }
  cv_.notify_all();
  return st;
}

void Scheduler::Shutdown() {
  std::lock_guard<std::mutex> lock(mu_);
  shutting_down_ = true;
  for (auto& s : waiting_) s->st->Cancel();
  cancel_all_ = true;
  cv_.notify_all();
}

SchedulerStats Scheduler::Stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stats_;
}

// ---- admission and blocks -----------------------------------------------------------------------

bool Scheduler::StartSeq(Seq& s) {
  const int64_t B = blocks_.block_size();
  const int64_t n = static_cast<int64_t>(s.tokens.size());
  s.blocks = blocks_.Match(s.tokens, n / B);
  s.n_past = static_cast<int64_t>(s.blocks.size()) * B;
  if (s.n_past == n) {
    // Every token is cached, but the last one must be evaluated again for its logits: it is
    // written into a private copy of the last block (copy-on-write).
    const int32_t copy = blocks_.Allocate();
    if (copy < 0) {
      blocks_.Release(s.blocks);
      s.blocks.clear();
      s.n_past = 0;
      return false;
    }
    // If the device could not copy it (the next step reports the fault), the last block's
    // tokens are evaluated again into the fresh block instead.
    const bool copied = engine_->CopyKvBlock(s.blocks.back(), copy).ok();
    blocks_.Release({&s.blocks.back(), 1});
    s.blocks.back() = copy;
    s.n_past = copied ? n - 1 : n - B;
  }
  if (!s.admitted_once) {
    s.admitted_once = true;
    s.t_admit = Clock::now();
    Usage& u = s.st->usage_;
    u.cached_tokens = s.n_past;
    u.queued_ms = MsBetween(s.t_submit, s.t_admit);
    std::lock_guard<std::mutex> lock(mu_);
    stats_.cached_tokens_total += s.n_past;
    if (s.n_past > 0) stats_.prefix_hits += 1;
  }
  return true;
}

void Scheduler::Admit() {
  while (static_cast<int>(running_.size()) < opt_.max_running) {
    std::unique_ptr<Seq> s;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (waiting_.empty()) return;
      s = std::move(waiting_.front());
      waiting_.pop_front();
    }
    if (s->st->cancelled()) {
      FinishSeq(*s, FinishReason::kCancelled);
      continue;
    }
    if (!StartSeq(*s)) {  // no block for it now: it waits at the head
      std::lock_guard<std::mutex> lock(mu_);
      waiting_.push_front(std::move(s));
      return;
    }
    s->admit_order = ++admit_counter_;
    running_.push_back(std::move(s));
  }
}

void Scheduler::Preempt(size_t index) {
  std::unique_ptr<Seq> s = std::move(running_[index]);
  running_.erase(running_.begin() + static_cast<std::ptrdiff_t>(index));
  blocks_.Insert({s->tokens.data(), static_cast<size_t>(s->n_past)}, s->blocks);
  blocks_.Release(s->blocks);
  s->blocks.clear();
  s->n_past = 0;
  std::lock_guard<std::mutex> lock(mu_);
  stats_.preemptions += 1;
  waiting_.push_front(std::move(s));
}

bool Scheduler::EnsureBlocks(Seq& s, int64_t n) {
  const int64_t B = blocks_.block_size();
  while (static_cast<int64_t>(s.blocks.size()) * B < n) {
    const int32_t b = blocks_.Allocate();
    if (b < 0) return false;
    s.blocks.push_back(b);
  }
  return true;
}

// ---- steps --------------------------------------------------------------------------------------

void Scheduler::RunStep() {
  // Plan: every decoding sequence's token, then prompt chunks (oldest first) up to the budget.
  // A sequence that finds no block preempts the most recently admitted unplanned sequence.
  std::sort(running_.begin(), running_.end(),
            [](const auto& a, const auto& b) { return a->admit_order < b->admit_order; });
  struct Planned {
    Seq* s;
    int64_t n;
  };
  std::vector<Planned> plan;
  int64_t budget = opt_.batch_tokens, planned_tokens = 0;
  for (int pass = 0; pass < 2; ++pass) {  // 0: decode tokens, 1: prompt chunks
    // Beside decode tokens: a chunk bounded by the latency budget, and none at all while the
    // streams are owed time (StepCostModel: earlier prompt steps took longer than the bound).
    if (pass == 1 && !plan.empty()) budget = std::min(budget, cost_.PromptBudget(budget));
    for (size_t i = 0; i < running_.size(); ++i) {
      Seq& s = *running_[i];
      const int64_t pending = static_cast<int64_t>(s.tokens.size()) - s.n_past;
      if ((pass == 0) != (pending == 1) || s.finished) continue;
      // A short prompt runs whole when the step has room for it (whole_prompt_tokens).
      const bool whole = pass == 1 && budget > 0 && !s.cut &&
                         pending <= opt_.whole_prompt_tokens &&
                         planned_tokens + pending <= opt_.batch_tokens;
      const int64_t n = pass == 0 ? 1 : whole ? pending : std::min(pending, budget);
      if (n <= 0) continue;
      bool ok = EnsureBlocks(s, s.n_past + n);
      while (!ok) {
        // Victim: the newest sequence not planned yet, other than s.
        size_t victim = running_.size();
        for (size_t j = running_.size(); j-- > 0;) {
          Seq* v = running_[j].get();
          const bool planned = std::any_of(plan.begin(), plan.end(),
                                           [&](const Planned& p) { return p.s == v; });
          if (v != &s && !planned && !v->finished) {
            victim = j;
            break;
          }
        }
        if (victim == running_.size()) break;
        if (victim < i) --i;  // an older sequence left unplanned (prefilling, or over budget)
        Preempt(victim);
        ok = EnsureBlocks(s, s.n_past + n);
      }
      if (!ok) {
        if (plan.empty()) FinishSeq(s, FinishReason::kLength);  // alone and the pool is full
        continue;
      }
      plan.push_back({&s, n});
      if (pass == 1 && n < pending) s.cut = true;
      budget -= n;
      planned_tokens += n;
    }
  }
  if (plan.empty()) return;
  std::vector<engine::StepSeq> step;
  int64_t n_decode = 0, n_prompt = 0;
  for (const Planned& p : plan) {
    const bool last = p.s->n_past + p.n == static_cast<int64_t>(p.s->tokens.size());
    step.push_back({{p.s->tokens.data() + p.s->n_past, static_cast<size_t>(p.n)},
                    p.s->blocks,
                    p.s->n_past,
                    last ? 1 : 0});
    (p.s->n_past < p.s->n_prompt ? n_prompt : n_decode) += p.n;
  }
  logits_.clear();
  const Clock::time_point t0 = Clock::now();
  const Status status = engine_->Step(step, &logits_);
  const double seconds = MsBetween(t0, Clock::now()) / 1000.0;
  cost_.Learn(n_decode, n_prompt, seconds * 1000.0);
  {
    // Counted before the step's tokens are pushed: a client that reads the stats after its
    // tokens (or its answer) sees this step in them.
    std::lock_guard<std::mutex> lock(mu_);
    stats_.steps += 1;
    stats_.prompt_steps += n_prompt > 0 ? 1 : 0;
    const double total = static_cast<double>(n_decode + n_prompt);
    stats_.prompt_tokens_total += n_prompt;
    stats_.prompt_seconds += seconds * static_cast<double>(n_prompt) / total;
    stats_.generate_seconds += seconds * static_cast<double>(n_decode) / total;
  }
  size_t row = 0;
  for (const Planned& p : plan) {
    if (!status.ok()) {
      FinishSeq(*p.s, FinishReason::kError, status);
      continue;
    }
    p.s->n_past += p.n;
    if (p.s->n_past == static_cast<int64_t>(p.s->tokens.size())) {
      Consume(*p.s, logits_.data() + row * static_cast<size_t>(n_vocab_));
      ++row;
    }
  }
}

void Scheduler::Emit(Seq& s, const std::string& text, int32_t id, const float* logits) {
  Event e;
  e.text = text;
  if (id >= 0) e.tokens.push_back(id);
  if (id >= 0 && s.params.top_logprobs >= 0 && logits != nullptr) {
    // log softmax of the model's logits (before penalties and sampling filters).
    const float mx = *std::max_element(logits, logits + n_vocab_);
    double sum = 0;
    for (int64_t i = 0; i < n_vocab_; ++i) sum += std::exp(static_cast<double>(logits[i] - mx));
    const float lse = mx + static_cast<float>(std::log(sum));
    e.chosen.push_back({id, logits[id] - lse});
    const int64_t k = std::min<int64_t>(s.params.top_logprobs, n_vocab_);
    std::vector<int32_t> ids(static_cast<size_t>(n_vocab_));
    for (int64_t i = 0; i < n_vocab_; ++i) ids[static_cast<size_t>(i)] = static_cast<int32_t>(i);
    std::partial_sort(ids.begin(), ids.begin() + k, ids.end(),
                      [&](int32_t a, int32_t b) { return logits[a] > logits[b]; });
    std::vector<TokenLogprob> top;
    for (int64_t i = 0; i < k; ++i) top.push_back({ids[i], logits[ids[i]] - lse});
    e.top.push_back(std::move(top));
  }
  if (!e.text.empty() || !e.tokens.empty()) s.st->Push(std::move(e));
}

void Scheduler::Consume(Seq& s, const float* logits) {
  const Clock::time_point now = Clock::now();
  if (s.n_generated == 0) {
    s.t_first = now;
    s.st->usage_.prompt_ms = MsBetween(s.t_admit, now);
  }
  const int32_t id = s.sampler.Sample({logits, static_cast<size_t>(n_vocab_)}, s.tokens);
  if (tok_->IsEog(id) && !s.params.ignore_eos) {
    FinishSeq(s, FinishReason::kStop);
    return;
  }
  s.tokens.push_back(id);
  s.n_generated += 1;
  const std::string text = s.stops.Push(s.detok.Push(id));
  Emit(s, text, id, logits);
  if (s.stops.stopped()) {
    FinishSeq(s, FinishReason::kStop);
  } else if (s.params.max_tokens >= 0 && s.n_generated >= s.params.max_tokens) {
    FinishSeq(s, FinishReason::kLength);
  } else if (static_cast<int64_t>(s.tokens.size()) >= ctx_) {
    FinishSeq(s, FinishReason::kLength);  // the next token's KV would not fit the context
  }
}

void Scheduler::FinishSeq(Seq& s, FinishReason r, Status error) {
  if (s.finished) return;
  s.finished = true;
  if (r != FinishReason::kCancelled && r != FinishReason::kError) {
    std::string rest = s.stops.Push(s.detok.Flush());
    rest += s.stops.Flush();
    if (!rest.empty()) Emit(s, rest, -1, nullptr);
  }
  if (!s.blocks.empty()) {
    // The prefix stays cached for later requests (a cancelled one's too).
    blocks_.Insert({s.tokens.data(), static_cast<size_t>(s.n_past)}, s.blocks);
    blocks_.Release(s.blocks);
    s.blocks.clear();
  }
  Usage& u = s.st->usage_;
  u.prompt_tokens = s.n_prompt;
  u.completion_tokens = s.n_generated;
  if (s.n_generated > 0) u.predicted_ms = MsBetween(s.t_first, Clock::now());
  {
    std::lock_guard<std::mutex> lock(mu_);
    stats_.generated_tokens_total += s.n_generated;
    if (r == FinishReason::kCancelled) stats_.requests_cancelled += 1;
  }
  PublishStats();  // a client that reads /metrics after its answer sees it finished
  s.st->Finish(r, std::move(error));
}

void Scheduler::PublishStats() {
  std::lock_guard<std::mutex> lock(mu_);
  stats_.running = 0;
  stats_.queued = static_cast<int>(waiting_.size());
  stats_.kv_blocks_used = blocks_.used();
  stats_.kv_blocks_cached = blocks_.cached();
  stats_.kv_blocks_free = blocks_.free();
  stats_.kv_evictions = blocks_.evictions();
  stats_.decode_step_ms = cost_.decode_step_ms();
  stats_.prompt_token_ms = cost_.prompt_token_ms();
  stats_.latency_debt_ms = cost_.debt_ms();
  stats_.slots.clear();
  for (const auto& s : running_) {
    if (s->finished) continue;
    stats_.running += 1;
    stats_.slots.push_back(
        {s->st->id(), s->n_prompt, s->n_past, s->n_generated, s->n_past < s->n_prompt});
  }
}

void Scheduler::Loop() {
  while (true) {
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [&] { return stop_ || !waiting_.empty() || !running_.empty(); });
      if (stop_) return;
    }
    bool cancel_all = false;
    {
      std::lock_guard<std::mutex> lock(mu_);
      cancel_all = cancel_all_;
    }
    for (auto& s : running_) {
      if (cancel_all) s->st->Cancel();
      if (s->st->cancelled()) FinishSeq(*s, FinishReason::kCancelled);
    }
    std::erase_if(running_, [](const auto& s) { return s->finished; });
    Admit();
    if (!running_.empty()) RunStep();
    std::erase_if(running_, [](const auto& s) { return s->finished; });
    PublishStats();
    std::unique_lock<std::mutex> lock(mu_);
    if (running_.empty() && !waiting_.empty()) {
      cv_.wait_for(lock, std::chrono::milliseconds(5));  // nothing admitted: no busy loop
    }
  }
}

}  // namespace moesplit::serving
