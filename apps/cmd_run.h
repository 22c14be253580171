// `moesplit run -m FILE -p PROMPT [-n N] [-t THREADS] [--ctx-size C] [sampling flags]`:
// generates a completion of the prompt, streaming the text to stdout; at the end prints load
// time, prefill and decode tokens/s to stderr.
#pragma once

#include <functional>
#include <ostream>
#include <string>

#include "apps/cpu_placement.h"
#include "core/base/status.h"
#include "core/sampling/sampler.h"

namespace CLI {
class App;  // <CLI/CLI.hpp> only where flags are registered: it costs ~6 s per file
}  // namespace CLI

namespace moesplit::app {

struct RunArgs {
  std::string model;        // -m
  std::string prompt;       // -p
  std::string prompt_file;  // -f (instead of -p)
  int64_t n_predict = 128;  // -n: tokens to generate; -1 = until EOG / context full
  int threads = 0;          // -t: 0 = all hardware threads
  int64_t ctx_size = 4096;  // --ctx-size
  bool no_bos = false;      // --no-bos: do not add BOS even if the vocabulary asks for it
  bool show_prompt = true;  // echo the prompt before the completion (--no-display-prompt)
  sampling::SamplerConfig sampling;
  PlacementFlags placement;  // --numa, --nodes, --plan, --no-pin
};

// Streams the completion to `out`, diagnostics and timings to `err`.
Status RunRun(const RunArgs& args, std::ostream& out, std::ostream& err);

void RegisterRun(CLI::App& app, std::function<int()>* action);

}  // namespace moesplit::app
