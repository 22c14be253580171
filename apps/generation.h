// Shared by `run` and `chat`: the sampling flags (llama.cpp's names and defaults) and a loop that
// generates tokens from a Session, streaming complete UTF-8 text to a callback.
#pragma once

#include <CLI/CLI.hpp>
#include <atomic>
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "core/base/status.h"
#include "core/engine/engine.h"
#include "core/sampling/sampler.h"
#include "core/tokenizer/tokenizer.h"

namespace moesplit::app {

// --temp --top-k --top-p --min-p --repeat-penalty --repeat-last-n --frequency-penalty
// --presence-penalty --seed, writing into *config (which must outlive parsing).
void AddSamplingFlags(CLI::App* cmd, sampling::SamplerConfig* config);

struct GenerationStats {
  int64_t prompt_tokens = 0;
  int64_t generated_tokens = 0;
  double prefill_seconds = 0;       // evaluating the prompt (one batch)
  double decode_seconds = 0;        // sampling + evaluating each generated token
  bool stopped_by_eog = false;      // the model ended its turn (EOS/EOT/...)
  bool stopped_by_user = false;     // *stop became true
  bool stopped_by_context = false;  // the KV cache is full
  std::vector<int32_t> tokens;      // the generated ids (EOG token not included)
};

struct GenerationRequest {
  std::span<const int32_t> prompt;                  // appended at session.position()
  int64_t max_tokens = -1;                          // -1: until EOG or the context is full
  const std::atomic<bool>* stop = nullptr;          // polled between tokens (Ctrl-C)
  std::function<void(const std::string&)> on_text;  // complete UTF-8 pieces as they arrive
};

// Evaluates the prompt, then samples and evaluates up to max_tokens tokens. Errors from the
// engine (e.g. a prompt that does not fit the context) are returned; running out of context
// while generating just stops the generation (stopped_by_context).
StatusOr<GenerationStats> Generate(engine::Session& session, const tokenizer::Tokenizer& tok,
                                   sampling::Sampler& sampler, const GenerationRequest& request);

// "prompt eval: 16 tokens in 0.12 s (133.3 t/s) | generation: 64 tokens in 1.00 s (64.0 t/s)"
std::string FormatGenerationStats(const GenerationStats& s);

}  // namespace moesplit::app
