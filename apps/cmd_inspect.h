// `moesplit inspect FILE.gguf`: what is in a model file and what it will cost to run — the
// numbers a user needs to decide what fits in VRAM and RAM.
#pragma once

#include <cstdint>
#include <functional>
#include <ostream>
#include <string>

namespace CLI {
class App;  // <CLI/CLI.hpp> only where flags are registered: it costs ~6 s per file
}  // namespace CLI

namespace moesplit::app {

struct InspectArgs {
  std::string path;
  bool tensors = false;         // list every tensor
  bool metadata = false;        // list every metadata key (text format; json always has them)
  std::string tensor;           // with values > 0: print values of this tensor
  int64_t values = 0;           // number of leading dequantized values to print
  std::string format = "text";  // text | json
};

// Returns the process exit code: 0 on success, 1 on any error (printed to `err`).
int RunInspect(const InspectArgs& args, std::ostream& out, std::ostream& err);

// Adds the `inspect` subcommand to `app`; when it is selected, `*action` runs it.
void RegisterInspect(CLI::App& app, std::function<int()>* action);

}  // namespace moesplit::app
