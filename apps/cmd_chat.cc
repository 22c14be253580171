#include "apps/cmd_chat.h"

#include <CLI/CLI.hpp>
#include <signal.h>
#include <unistd.h>

#include <iostream>
#include <memory>
#include <vector>

#include "apps/cpu_tier.h"
#include "apps/generation.h"
#include "apps/model_summary.h"
#include "apps/server/api.h"
#include "core/chat/chat_template.h"
#include "core/engine/engine.h"
#include "core/tokenizer/tokenizer.h"

namespace moesplit::app {

StatusOr<chat::ChatTemplate> ChooseChatTemplate(const std::string& name,
                                                const engine::Model& model,
                                                const std::string& model_path,
                                                const tokenizer::Tokenizer& tok) {
  chat::ChatTemplate t;
  if (!name.empty()) {
    MOESPLIT_ASSIGN_OR_RETURN(t, chat::ChatTemplateFromName(name));
  } else {
    auto src = model.file().GetString("tokenizer.chat_template");
    if (!src.ok()) {
      std::string names;
      for (std::string_view n : chat::ChatTemplateNames())
        names += StrCat(names.empty() ? "" : ", ", n);
      return InvalidArgumentError(
          model_path, " has no tokenizer.chat_template; pass --chat-template NAME (", names, ")");
    }
    MOESPLIT_ASSIGN_OR_RETURN(t, chat::DetectChatTemplate(*src));
  }
  if (tok.special().bos != tokenizer::kNoToken) t.bos_token = tok.TokenText(tok.special().bos);
  if (tok.special().eos != tokenizer::kNoToken) t.eos_token = tok.TokenText(tok.special().eos);
  return t;
}

StatusOr<chat::TemplateKwargs> TemplateKwargsFromFlags(const std::string& reasoning,
                                                       const std::string& kwargs_json) {
  chat::TemplateKwargs kw;
  if (reasoning == "on" || reasoning == "off") {
    kw.enable_thinking = reasoning == "on";
  } else if (reasoning != "auto") {
    return InvalidArgumentError("--reasoning must be on, off or auto, got \"", reasoning, "\"");
  }
  if (kwargs_json.empty()) return kw;
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(kwargs_json);
  } catch (const nlohmann::json::exception& e) {
    return InvalidArgumentError("--chat-template-kwargs is not valid JSON: ", e.what());
  }
  if (auto e = server::ParseTemplateKwargs(j, "--chat-template-kwargs", &kw)) {
    return InvalidArgumentError(e->message);
  }
  return kw;
}

void AddTemplateKwargsFlags(CLI::App* cmd, std::string* reasoning, std::string* kwargs_json,
                            bool for_server) {
  const char* override_note =
      for_server ? ", unless a request's chat_template_kwargs says otherwise" : "";
  cmd->add_option("--reasoning", *reasoning,
                  std::string("on|off: let thinking models (DeepSeek-R1/V3.1, Qwen3) reason first "
                              "or not") +
                      override_note + "; auto: the template's default")
      ->capture_default_str();
  cmd->add_option("--chat-template-kwargs", *kwargs_json,
                  std::string("JSON object of ") + (for_server ? "default " : "") +
                      "template variables, e.g. '{\"thinking\": true}' (DeepSeek-V3.1) or "
                      "'{\"enable_thinking\": false}'");
}

namespace {

// Keeps what the session has evaluated so that each turn only evaluates the new suffix of the
// rendered conversation (when the rendering of the history is unchanged, which is the usual case).
struct Conversation {
  std::vector<chat::ChatMessage> messages;
  std::vector<int32_t> evaluated;  // tokens in the KV cache, in order

  // The part of `prompt` not yet in the cache; resets the session when the history changed.
  std::vector<int32_t> Suffix(engine::Session& s, const std::vector<int32_t>& prompt) {
    const bool is_prefix = evaluated.size() < prompt.size() &&
                           std::equal(evaluated.begin(), evaluated.end(), prompt.begin());
    if (!is_prefix) {
      s.Reset();
      evaluated.clear();
    }
    return std::vector<int32_t>(prompt.begin() + evaluated.size(), prompt.end());
  }
};

}  // namespace

Status RunChat(const ChatArgs& args, std::istream& in, std::ostream& out, std::ostream& err,
               std::atomic<bool>* stop) {
  MOESPLIT_RETURN_IF_ERROR(sampling::ValidateSamplerConfig(args.sampling));
  MOESPLIT_ASSIGN_OR_RETURN(cpu::IsaTier tier, KernelTierFromEnv());
  MOESPLIT_ASSIGN_OR_RETURN(std::unique_ptr<engine::Model> model, engine::Model::Load(args.model));
  MOESPLIT_ASSIGN_OR_RETURN(tokenizer::Tokenizer tok,
                            tokenizer::Tokenizer::FromGguf(model->file()));
  MOESPLIT_ASSIGN_OR_RETURN(chat::ChatTemplate tmpl, ChooseChatTemplate(args.chat_template, *model, args.model, tok));
  MOESPLIT_ASSIGN_OR_RETURN(chat::TemplateKwargs kwargs,
                            TemplateKwargsFromFlags(args.reasoning, args.chat_template_kwargs));
  tmpl = chat::WithKwargs(tmpl, kwargs);
  MOESPLIT_ASSIGN_OR_RETURN(sampling::Sampler sampler, sampling::Sampler::Create(args.sampling));
  MOESPLIT_ASSIGN_OR_RETURN(
      OpenedSession opened,
      OpenSession(*model, args.model, args.placement, args.threads, args.ctx_size, tier, err));
  engine::Session& session = *opened.session;
  err << "chat: " << args.model << ", template " << chat::ChatFormatName(tmpl.format)
      << (chat::IsThinkingModel(tmpl)
              ? (tmpl.enable_thinking ? " (thinking on)" : " (thinking off)")
              : "")
      << ", " << session.ctx_size() << " positions of context, " << session.n_threads()
      << " threads\n"
      << "      Ctrl-C stops an answer; /reset starts over; /exit or Ctrl-D leaves\n";
  LogKernels(err, session);

  Conversation conv;
  if (!args.system.empty()) conv.messages.push_back({chat::Role::kSystem, args.system});
  std::string line;
  while (true) {
    if (args.interactive) out << "\n> " << std::flush;
    if (stop) stop->store(false);
    if (!std::getline(in, line) || line == "/exit") break;
    if (line.empty()) continue;
    if (line == "/reset") {
      conv = Conversation{};
      if (!args.system.empty()) conv.messages.push_back({chat::Role::kSystem, args.system});
      session.Reset();
      continue;
    }
    conv.messages.push_back({chat::Role::kUser, line});
    const std::string text = chat::Render(tmpl, conv.messages, /*add_generation_prompt=*/true);
    MOESPLIT_ASSIGN_OR_RETURN(std::vector<int32_t> prompt, tok.Encode(text, false, true));
    std::vector<int32_t> suffix = conv.Suffix(session, prompt);
    if (session.position() + static_cast<int64_t>(suffix.size()) >= session.ctx_size()) {
      err << "chat: the conversation (" << prompt.size() << " tokens) fills the context of "
          << session.ctx_size() << "; /reset or restart with a larger -c\n";
      conv.messages.pop_back();
      continue;
    }
    GenerationRequest req;
    req.prompt = suffix;
    req.max_tokens = args.n_predict;
    req.stop = stop;
    req.prompt_chunk = args.prompt_chunk;
    req.on_text = [&out](const std::string& t) { out << t << std::flush; };
    MOESPLIT_ASSIGN_OR_RETURN(GenerationStats st, Generate(session, tok, sampler, req));
    // The cache now holds the suffix and the generated tokens that were evaluated (all but a
    // last one sampled when the answer hit -n or the context end): position() says how many.
    conv.evaluated.insert(conv.evaluated.end(), suffix.begin(), suffix.end());
    conv.evaluated.insert(conv.evaluated.end(), st.tokens.begin(), st.tokens.end());
    conv.evaluated.resize(static_cast<size_t>(session.position()));
    conv.messages.push_back({chat::Role::kAssistant, tok.Decode(st.tokens)});
    if (st.stopped_in_prompt) {
      out << "[stopped] (in the prompt: " << st.prompt_tokens << " of " << suffix.size()
          << " tokens read)";
    } else if (st.stopped_by_user) {
      out << " [stopped]";
    }
    out << "\n";
    err << "(" << FormatGenerationStats(st) << ")\n";
  }
  return Status::Ok();
}

namespace {

// The one piece of process-wide state: a signal handler can only reach a static. It points at
// the running chat's stop flag while `moesplit chat` runs.
std::atomic<bool>* g_chat_stop = nullptr;

void OnSigint(int) {
  if (g_chat_stop) g_chat_stop->store(true);
}

}  // namespace

void RegisterChat(CLI::App& app, std::function<int()>* action) {
  auto a = std::make_shared<ChatArgs>();
  CLI::App* cmd = app.add_subcommand("chat", "Interactive chat in the model's template");
  cmd->add_option("-m,--model", a->model, "GGUF model file")->required();
  cmd->add_option("--chat-template", a->chat_template,
                  "template name, overriding the file's tokenizer.chat_template");
  cmd->add_option("--system", a->system, "system message (llama.cpp: -sys)");
  AddTemplateKwargsFlags(cmd, &a->reasoning, &a->chat_template_kwargs, /*for_server=*/false);
  cmd->add_option("-n,--n-predict", a->n_predict, "max tokens per answer (-1 = no limit)")
      ->capture_default_str();
  cmd->add_option("-c,--ctx-size", a->ctx_size, "context size")->capture_default_str();
  cmd->add_option("-t,--threads", a->threads, "threads (0 = all hardware threads)");
  AddSamplingFlags(cmd, &a->sampling);
  AddPlacementFlags(cmd, &a->placement);
  cmd->callback([a, action] {
    *action = [a] {
      std::atomic<bool> stop{false};
      g_chat_stop = &stop;
      struct sigaction sa {};
      sa.sa_handler = OnSigint;  // no SA_RESTART: Ctrl-C at the prompt interrupts the read
      sigemptyset(&sa.sa_mask);
      sigaction(SIGINT, &sa, nullptr);
      a->interactive = ::isatty(STDIN_FILENO);
      Status s = RunChat(*a, std::cin, std::cout, std::cerr, &stop);
      g_chat_stop = nullptr;
      if (!s.ok()) std::cerr << "moesplit chat: " << s.ToString() << "\n";
      return s.ok() ? 0 : 1;
    };
  });
}

}  // namespace moesplit::app
