// Shared by `run` and `chat`: the sampling flags (llama.cpp's names and defaults) and a loop that
// generates tokens from a Session, streaming complete UTF-8 text to a callback.
#pragma once

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

namespace CLI {
class App;  // <CLI/CLI.hpp> only where flags are registered: it costs ~6 s per file
}  // namespace CLI

namespace moesplit::app {

// --temp --top-k --top-p --min-p --repeat-penalty --repeat-last-n --frequency-penalty
// --presence-penalty --seed, writing into *config (which must outlive parsing).
void AddSamplingFlags(CLI::App* cmd, sampling::SamplerConfig* config);

struct GenerationStats {
  int64_t prompt_tokens = 0;        // prompt tokens evaluated (fewer when stopped in the prompt)
  int64_t generated_tokens = 0;
  double prefill_seconds = 0;       // evaluating the prompt (in chunks of prompt_chunk)
  double decode_seconds = 0;        // sampling + evaluating each generated token
  bool stopped_by_eog = false;      // the model ended its turn (EOS/EOT/...)
  bool stopped_by_user = false;     // *stop became true
  bool stopped_in_prompt = false;   // ... before the whole prompt was evaluated: nothing generated
  bool stopped_by_context = false;  // the KV cache is full
  std::vector<int32_t> tokens;      // the generated ids (EOG token not included)
};

struct GenerationRequest {
  std::span<const int32_t> prompt;                  // appended at session.position()
  int64_t max_tokens = -1;                          // -1: until EOG or the context is full
  // Polled before each prompt chunk and each token (Ctrl-C). A prompt is one forward pass
  // per chunk, so a stop request ends even a long prompt within one chunk's time.
  const std::atomic<bool>* stop = nullptr;
  // Prompt tokens per forward pass (llama.cpp's -ub default). Larger chunks read the expert
  // weights fewer times; smaller ones answer Ctrl-C sooner.
  int64_t prompt_chunk = 512;
  std::function<void(const std::string&)> on_text;  // complete UTF-8 pieces as they arrive
  // After each prompt chunk: (tokens evaluated, prompt tokens).
  std::function<void(int64_t done, int64_t total)> on_prompt_progress;
};

// Evaluates the prompt chunk by chunk, then samples and evaluates up to max_tokens tokens.
// Errors (nothing evaluated): an empty prompt, or one that does not fit the context (the
// engine's OutOfRange). Running out of context while generating just stops the generation
// (stopped_by_context). A stop in the prompt leaves session.position() after the chunks
// evaluated (stats.prompt_tokens of them): the caller's record of the cache must follow it.
StatusOr<GenerationStats> Generate(engine::Session& session, const tokenizer::Tokenizer& tok,
                                   sampling::Sampler& sampler, const GenerationRequest& request);

// "prompt eval: 16 tokens in 0.12 s (133.3 t/s) | generation: 64 tokens in 1.00 s (64.0 t/s)"
std::string FormatGenerationStats(const GenerationStats& s);

}  // namespace moesplit::app
