// `moesplit make-model`: writes a synthetic GGUF (llama.cpp metadata and tensor layout, random
// weights, real quant types) from a preset — tiny models for tests, real widths with fewer
// layers for benchmarks. `make-model --list` prints the presets and their sizes.
#pragma once

#include <cstdint>
#include <functional>
#include <iostream>
#include <ostream>
#include <string>

#include "core/base/status.h"

namespace CLI {
class App;  // <CLI/CLI.hpp> only where flags are registered: it costs ~6 s per file
}  // namespace CLI

namespace moesplit::app {

struct MakeModelArgs {
  std::string preset;                // --preset (required unless --list)
  int64_t layers = 0;                // --layers; 0 = the preset's default
  std::string quant = "Q4_K_M";      // --quant: a synth::QuantMixFromName name
  uint64_t seed = 1234;              // --seed
  std::string mla_layout = "split";  // --mla-layout split | legacy (deepseek2 presets)
  std::string output;                // -o (required unless --list)
  bool force = false;                // --force: overwrite an existing file
  bool list = false;                 // --list: print presets and sizes, write nothing
  int threads = 0;                   // --threads; 0 = all hardware threads (at most 64)
  bool progress = true;              // progress on stderr for outputs > 256 MB
};

// Writes the model (or prints the list) and a summary to `out`; warnings and progress go to
// stderr. User errors (bad preset, bad --layers, existing or unwritable output, unsupported
// quant) come back as a Status.
Status RunMakeModel(const MakeModelArgs& args, std::ostream& out = std::cout);

// The `--list` table: one line per preset with its default layer count and the exact tensor
// bytes for each quant.
std::string PresetListText();

// Adds the `make-model` subcommand to `app`; when it is selected, `*action` runs it and
// returns the exit code (0 ok, 1 error printed to stderr).
void RegisterMakeModel(CLI::App& app, std::function<int()>* action);

}  // namespace moesplit::app
