#include "apps/generation.h"

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>

namespace moesplit::app {
namespace {

double SecondsSince(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

std::string Rate(const char* what, int64_t n, double s) {
  char buf[128];
  std::snprintf(buf, sizeof(buf), "%s: %lld tokens in %.2f s (%.2f t/s)", what,
                static_cast<long long>(n), s, s > 0 ? n / s : 0.0);
  return buf;
}

bool StopRequested(const GenerationRequest& req) {
  return req.stop != nullptr && req.stop->load();
}

// The prompt in chunks of req.prompt_chunk, the stop flag read before each: *logits gets the
// last row of the last chunk. The whole prompt is checked against the context first, so that a
// prompt that cannot fit evaluates nothing (as one Eval would).
Status EvalPrompt(engine::Session& session, const GenerationRequest& req, GenerationStats* st,
                  std::vector<float>* logits) {
  const int64_t n = static_cast<int64_t>(req.prompt.size());
  if (n == 0) return InvalidArgumentError("Generate: an empty prompt");
  if (session.position() + n > session.ctx_size()) {
    return OutOfRangeError("context overflow: position ", session.position(), " + ", n,
                           " tokens > context size ", session.ctx_size(),
                           " (use a larger --ctx-size or start a new session)");
  }
  const int64_t chunk = std::max<int64_t>(1, req.prompt_chunk);
  const auto t0 = std::chrono::steady_clock::now();
  for (int64_t done = 0; done < n;) {
    if (StopRequested(req)) {
      st->stopped_by_user = st->stopped_in_prompt = true;
      break;
    }
    const int64_t len = std::min(chunk, n - done);
    MOESPLIT_ASSIGN_OR_RETURN(*logits, session.Eval(req.prompt.subspan(done, len), false));
    done += len;
    st->prompt_tokens = done;
    if (req.on_prompt_progress) req.on_prompt_progress(done, n);
  }
  st->prefill_seconds = SecondsSince(t0);
  return Status::Ok();
}

}  // namespace

void AddSamplingFlags(CLI::App* cmd, sampling::SamplerConfig* c) {
  cmd->add_option("--temp", c->temperature, "temperature (0 = greedy)")->capture_default_str();
  cmd->add_option("--top-k", c->top_k, "top-k sampling (0 = off)")->capture_default_str();
  cmd->add_option("--top-p", c->top_p, "top-p sampling (1 = off)")->capture_default_str();
  cmd->add_option("--min-p", c->min_p, "min-p sampling (0 = off)")->capture_default_str();
  cmd->add_option("--repeat-penalty", c->repeat_penalty, "repetition penalty (1 = off)")
      ->capture_default_str();
  cmd->add_option("--repeat-last-n", c->repeat_last_n,
                  "tokens the penalties look back over (0 = off, -1 = all)")
      ->capture_default_str();
  cmd->add_option("--frequency-penalty", c->frequency_penalty, "frequency penalty (0 = off)");
  cmd->add_option("--presence-penalty", c->presence_penalty, "presence penalty (0 = off)");
  cmd->add_option("-s,--seed", c->seed, "RNG seed (default: random; printed at the end)");
}

StatusOr<GenerationStats> Generate(engine::Session& session, const tokenizer::Tokenizer& tok,
                                   sampling::Sampler& sampler, const GenerationRequest& req) {
  GenerationStats st;
  std::vector<float> logits;
  MOESPLIT_RETURN_IF_ERROR(EvalPrompt(session, req, &st, &logits));
  if (st.stopped_in_prompt) return st;
  // History for the repetition penalties: the prompt, then what we generate.
  std::vector<int32_t> history(req.prompt.begin(), req.prompt.end());

  tokenizer::StreamingDetokenizer detok(tok, /*render_special=*/false);
  const auto t0 = std::chrono::steady_clock::now();
  while (req.max_tokens < 0 || st.generated_tokens < req.max_tokens) {
    if (StopRequested(req)) {
      st.stopped_by_user = true;
      break;
    }
    const int32_t id = sampler.Sample(logits, history);
    if (tok.IsEog(id)) {
      st.stopped_by_eog = true;
      break;
    }
    ++st.generated_tokens;
    st.tokens.push_back(id);
    history.push_back(id);
    if (req.on_text) {
      std::string text = detok.Push(id);
      if (!text.empty()) req.on_text(text);
    }
    if (req.max_tokens >= 0 && st.generated_tokens >= req.max_tokens) break;  // no need to eval it
    if (session.position() >= session.ctx_size()) {
      st.stopped_by_context = true;
      break;
    }
    const int32_t one[1] = {id};
    MOESPLIT_ASSIGN_OR_RETURN(logits, session.Eval(one, false));
  }
  if (req.on_text) {
    std::string rest = detok.Flush();
    if (!rest.empty()) req.on_text(rest);
  }
  st.decode_seconds = SecondsSince(t0);
  return st;
}

std::string FormatGenerationStats(const GenerationStats& s) {
  return Rate("prompt eval", s.prompt_tokens, s.prefill_seconds) + " | " +
         Rate("generation", s.generated_tokens, s.decode_seconds);
}

}  // namespace moesplit::app
