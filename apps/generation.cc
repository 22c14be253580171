#include "apps/generation.h"

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
  st.prompt_tokens = static_cast<int64_t>(req.prompt.size());
  // History for the repetition penalties: the prompt, then what we generate.
  std::vector<int32_t> history(req.prompt.begin(), req.prompt.end());
  auto t0 = std::chrono::steady_clock::now();
  MOESPLIT_ASSIGN_OR_RETURN(std::vector<float> logits, session.Eval(req.prompt, false));
  st.prefill_seconds = SecondsSince(t0);

  tokenizer::StreamingDetokenizer detok(tok, /*render_special=*/false);
  t0 = std::chrono::steady_clock::now();
  while (req.max_tokens < 0 || st.generated_tokens < req.max_tokens) {
    if (req.stop && req.stop->load()) {
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
