// `moesplit chat -m FILE [--chat-template NAME] [--system TEXT] [--reasoning on|off|auto]
// [--chat-template-kwargs JSON] [-n N] [-c C] [sampling flags]`:
// an interactive conversation in the model's chat template. Ctrl-C stops the answer being
// generated and returns to the prompt; Ctrl-C at the prompt, Ctrl-D or "/exit" leaves.
// "/reset" starts a new conversation.
#pragma once

#include <atomic>
#include <functional>
#include <istream>
#include <ostream>
#include <string>

#include "apps/cpu_placement.h"
#include "core/base/status.h"
#include "core/chat/chat_template.h"
#include "core/engine/engine.h"
#include "core/sampling/sampler.h"
#include "core/tokenizer/tokenizer.h"

namespace CLI {
class App;  // <CLI/CLI.hpp> only where flags are registered: it costs ~6 s per file
}  // namespace CLI

namespace moesplit::app {

struct ChatArgs {
  std::string model;          // -m
  std::string chat_template;  // --chat-template NAME (overrides tokenizer.chat_template)
  std::string system;         // --system (-sys): system message
  std::string reasoning = "auto";    // --reasoning on|off|auto (auto: the template's default)
  std::string chat_template_kwargs;  // --chat-template-kwargs JSON object ("" = none)
  int64_t n_predict = -1;     // -n: max tokens per answer (-1 = until the end of the turn)
  int64_t ctx_size = 4096;    // -c
  int threads = 0;            // -t
  bool interactive = true;    // print "> " prompts
  int64_t prompt_chunk = 512;  // prompt tokens per forward pass (GenerationRequest)
  sampling::SamplerConfig sampling;
  PlacementFlags placement;  // --numa, --nodes, --plan, --no-pin
};

// Reads user turns from `in` line by line until EOF or "/exit". `stop` (may be null) is set
// from a SIGINT handler by the command; it ends the current answer, also while its prompt is
// still being evaluated: the answer then ends with "[stopped]" (and says how much of the prompt
// was read), and the next turn re-evaluates what was not.
Status RunChat(const ChatArgs& args, std::istream& in, std::ostream& out, std::ostream& err,
               std::atomic<bool>* stop);

void RegisterChat(CLI::App& app, std::function<int()>* action);

// The chat template: `name` (--chat-template) or the one detected from the model's
// tokenizer.chat_template, with the vocabulary's BOS / EOS texts. Errors name the file or the
// template and list the known names.
StatusOr<chat::ChatTemplate> ChooseChatTemplate(const std::string& name,
                                                const engine::Model& model,
                                                const std::string& model_path,
                                                const tokenizer::Tokenizer& tok);

// The template variables of `--reasoning on|off|auto` and `--chat-template-kwargs JSON`, the
// flags llama-server has: "on" / "off" set enable_thinking, "auto" leaves the template's default;
// the JSON object's "thinking" / "enable_thinking" (booleans) then override. InvalidArgument
// naming the flag otherwise.
StatusOr<chat::TemplateKwargs> TemplateKwargsFromFlags(const std::string& reasoning,
                                                       const std::string& kwargs_json);
// Registers those two flags on `cmd` (chat and serve). `for_server`: the help says that a
// request's chat_template_kwargs override them.
void AddTemplateKwargsFlags(CLI::App* cmd, std::string* reasoning, std::string* kwargs_json,
                            bool for_server);

}  // namespace moesplit::app
