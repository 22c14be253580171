// `moesplit perplexity -m FILE -f TEXT [-c 512] [-t N] [--chunks N] [-b N]`: perplexity as
// llama-perplexity computes it, so the two can be compared number for number:
//   tokens = tokenize(text, add BOS if the vocabulary asks, specials not parsed);
//   chunk i = tokens[i*c, (i+1)*c) with its first token replaced by BOS (if add_bos), evaluated
//   from an empty context; the negative log-likelihood of every token in the second half of the
//   chunk (positions c/2+1 .. c-1, predicted from c/2 .. c-2) is accumulated;
//   PPL = exp(mean NLL), printed after each chunk as [i]PPL and as "Final estimate: PPL = X +/- E"
//   where E = PPL * stddev(NLL) / sqrt(count - 1).
#pragma once

#include <functional>
#include <ostream>
#include <string>

#include "core/base/status.h"

namespace CLI {
class App;  // <CLI/CLI.hpp> only where flags are registered: it costs ~6 s per file
}  // namespace CLI

namespace moesplit::app {

struct PerplexityArgs {
  std::string model;      // -m
  std::string text_file;  // -f
  int64_t n_ctx = 512;    // -c: tokens per chunk
  int n_batch = 2048;     // -b: tokens per Eval call (a chunk may need several)
  int64_t chunks = -1;    // --chunks: at most this many chunks (-1 = all)
  int threads = 0;        // -t: 0 = all hardware threads
};

struct PerplexityResult {
  double ppl = 0;
  double ppl_error = 0;  // +/- as llama-perplexity prints it
  int64_t chunks = 0;
  int64_t scored_tokens = 0;
};

// Prints the running [i]PPL values and the final estimate to `out`, progress to `err`.
StatusOr<PerplexityResult> RunPerplexity(const PerplexityArgs& args, std::ostream& out,
                                         std::ostream& err);

void RegisterPerplexity(CLI::App& app, std::function<int()>* action);

}  // namespace moesplit::app
