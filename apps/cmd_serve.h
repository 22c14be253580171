// `moesplit serve -m FILE`: the OpenAI-compatible HTTP server (apps/server/) over one Engine and
// the continuous-batching scheduler (core/serving/scheduler.h).
#pragma once

#include <atomic>
#include <functional>
#include <ostream>
#include <string>

#include "apps/cpu_placement.h"
#include "apps/server/http_server.h"
#include "core/base/status.h"
#include "core/model/model_config.h"

namespace CLI {
class App;  // <CLI/CLI.hpp> only where flags are registered: it costs ~6 s per file
}  // namespace CLI

namespace moesplit::app {

struct ServeArgs {
  std::string model;          // -m
  std::string alias;          // --alias: the model id in /v1/models (default: file name)
  std::string chat_template;  // --chat-template NAME
  std::string reasoning_format = "deepseek";  // --reasoning-format deepseek|none
  std::string reasoning = "auto";             // --reasoning on|off|auto (TemplateKwargsFromFlags)
  std::string chat_template_kwargs;           // --chat-template-kwargs JSON: request defaults
  std::string api_key_file;                   // --api-key-file
  int n_parallel = 4;                         // -np
  int64_t ctx_size = 8192;                    // -c: KV positions shared by every sequence
  int64_t batch_tokens = 512;                 // --batch-tokens (-b)
  int max_queue = 64;                         // --max-queue
  double itl_factor = 2.0;            // --itl-factor (serving::SchedulerOptions::itl_factor)
  int64_t whole_prompt_tokens = 256;  // --whole-prompt (SchedulerOptions::whole_prompt_tokens)
  int threads = 0;                    // -t
  server::ServerOptions http;
  PlacementFlags placement;
};

// Loads the model and serves until *stop becomes true (SIGINT / SIGTERM in the command; tests
// set it). `on_listening` (may be empty) gets the bound port once the socket listens (before the
// model is loaded: /health answers 503 meanwhile).
Status RunServe(const ServeArgs& args, std::ostream& err, const std::atomic<bool>* stop,
                const std::function<void(int port)>& on_listening = {});

// The chat template serve uses for a file without tokenizer.chat_template (said aloud at start;
// --chat-template overrides): Kimi-K2 by its pre-tokenizer (a DeepSeek-V3 architecture with its
// own template), else the architecture's usual one, else chatml as llama-server takes.
const char* FallbackChatTemplate(ModelArch arch, const std::string& pre_tokenizer);

void RegisterServe(CLI::App& app, std::function<int()>* action);

}  // namespace moesplit::app
