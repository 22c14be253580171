// `moesplit eval`: runs the CPU engine over a list of token ids and writes the logits, for
// checking the forward pass against a reference (llama.cpp's logits) and for quick timings.
//   moesplit eval -m MODEL.gguf --tokens 0,79,113 [--logits-out L.f32] [--decode] [-t N]
//                 [--ctx-size C] [--kv-type f32|f16]
// --decode evaluates one token per call through the KV cache (else the tokens are one batch).
// The logits file is float32 [n_tokens x n_vocab] row-major, no header.
#pragma once

#include <cstdint>
#include <functional>
#include <iostream>
#include <ostream>
#include <string>
#include <vector>

#include "core/base/status.h"

namespace CLI {
class App;  // <CLI/CLI.hpp> only where flags are registered: it costs ~6 s per file
}  // namespace CLI

namespace moesplit::app {

struct EvalArgs {
  std::string model;            // -m
  std::string tokens;           // --tokens "1,2,3"
  std::string logits_out;       // --logits-out FILE.f32 ("" = do not write)
  bool decode = false;          // --decode: one token at a time
  int threads = 0;              // -t; 0 = all hardware threads
  int64_t ctx_size = 0;         // --ctx-size; 0 = max(4096, n_tokens)
  std::string kv_type = "f32";  // --kv-type f32 | f16 (CPU pass; the hybrid cache is f16)
  std::string device = "auto";  // --device cpu | cuda | auto
};

// "1, 2,3" -> {1, 2, 3}; InvalidArgument naming the bad item.
StatusOr<std::vector<int32_t>> ParseTokenList(const std::string& text);

// Runs the evaluation, writes the logits file and prints a summary to `out`.
Status RunEval(const EvalArgs& args, std::ostream& out = std::cout);

void RegisterEval(CLI::App& app, std::function<int()>* action);

}  // namespace moesplit::app
