#include "apps/cmd_run.h"

#include <CLI/CLI.hpp>
#include <chrono>
#include <fstream>
#include <iostream>
#include <memory>
#include <sstream>

#include "apps/cpu_tier.h"
#include "apps/generation.h"
#include "apps/model_summary.h"
#include "apps/text_file.h"
#include "core/engine/engine.h"
#include "core/tokenizer/tokenizer.h"

namespace moesplit::app {
namespace {

StatusOr<std::string> PromptText(const RunArgs& args) {
  if (!args.prompt.empty() && !args.prompt_file.empty()) {
    return InvalidArgumentError("give the prompt with -p or -f, not both");
  }
  if (args.prompt_file.empty()) return args.prompt;
  return ReadTextFile(args.prompt_file, "prompt file");
}

}  // namespace

Status RunRun(const RunArgs& args, std::ostream& out, std::ostream& err) {
  MOESPLIT_RETURN_IF_ERROR(sampling::ValidateSamplerConfig(args.sampling));
  if (args.n_predict < -1) return InvalidArgumentError("-n must be >= -1, got ", args.n_predict);
  MOESPLIT_ASSIGN_OR_RETURN(std::string prompt, PromptText(args));
  MOESPLIT_ASSIGN_OR_RETURN(cpu::IsaTier tier, KernelTierFromEnv());

  const auto t0 = std::chrono::steady_clock::now();
  MOESPLIT_ASSIGN_OR_RETURN(std::unique_ptr<engine::Model> model, engine::Model::Load(args.model));
  MOESPLIT_ASSIGN_OR_RETURN(tokenizer::Tokenizer tok,
                            tokenizer::Tokenizer::FromGguf(model->file()));
  MOESPLIT_ASSIGN_OR_RETURN(sampling::Sampler sampler, sampling::Sampler::Create(args.sampling));
  MOESPLIT_ASSIGN_OR_RETURN(std::vector<int32_t> tokens,
                            tok.Encode(prompt, /*add_special=*/!args.no_bos && tok.add_bos(),
                                       /*parse_special=*/true));
  if (tokens.empty()) return InvalidArgumentError("the prompt is empty (give one with -p or -f)");
  if (static_cast<int64_t>(tokens.size()) >= args.ctx_size) {
    return InvalidArgumentError("the prompt has ", tokens.size(), " tokens; --ctx-size ",
                                args.ctx_size, " leaves no room to generate (raise --ctx-size)");
  }
  MOESPLIT_ASSIGN_OR_RETURN(
      OpenedSession opened,
      OpenSession(*model, args.model, args.placement, args.threads, args.ctx_size, tier, err));
  engine::Session& session = *opened.session;
  const double load_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  err << "model: " << args.model << " (" << ModelArchName(model->config().arch) << ", "
      << HumanBytes(model->file().total_file_bytes()) << "), KV cache " << session.ctx_size()
      << " positions (" << HumanBytes(session.kv_cache_bytes()) << "), " << session.n_threads()
      << " threads\n";
  LogKernels(err, session);

  if (args.show_prompt) out << prompt << std::flush;
  GenerationRequest req;
  req.prompt = tokens;
  req.max_tokens = args.n_predict;
  req.on_text = [&out](const std::string& text) { out << text << std::flush; };
  MOESPLIT_ASSIGN_OR_RETURN(GenerationStats st, Generate(session, tok, sampler, req));
  out << "\n";
  char load[64];
  std::snprintf(load, sizeof(load), "load: %.2f s", load_s);
  err << load << " | " << FormatGenerationStats(st) << " | seed " << sampler.seed()
      << (st.stopped_by_eog ? " | stopped: end of generation" : "")
      << (st.stopped_by_context ? " | stopped: context full (raise --ctx-size)" : "") << "\n";
  return Status::Ok();
}

void RegisterRun(CLI::App& app, std::function<int()>* action) {
  auto args = std::make_shared<RunArgs>();
  CLI::App* cmd = app.add_subcommand("run", "Generate a completion of a prompt (streams text)");
  cmd->add_option("-m,--model", args->model, "GGUF model file")->required();
  cmd->add_option("-p,--prompt", args->prompt, "prompt text (special tokens are parsed)");
  cmd->add_option("-f,--file", args->prompt_file, "read the prompt from a file");
  cmd->add_option("-n,--n-predict", args->n_predict, "tokens to generate (-1 = until the end)")
      ->capture_default_str();
  cmd->add_option("-t,--threads", args->threads, "threads (0 = all hardware threads)");
  cmd->add_option("-c,--ctx-size", args->ctx_size, "context size (KV cache positions)")
      ->capture_default_str();
  cmd->add_flag("--no-bos", args->no_bos, "do not add the BOS token");
  cmd->add_flag("!--no-display-prompt", args->show_prompt, "do not echo the prompt");
  AddSamplingFlags(cmd, &args->sampling);
  AddPlacementFlags(cmd, &args->placement);
  cmd->callback([args, action] {
    *action = [args] {
      Status s = RunRun(*args, std::cout, std::cerr);
      if (!s.ok()) std::cerr << "moesplit run: " << s.ToString() << "\n";
      return s.ok() ? 0 : 1;
    };
  });
}

}  // namespace moesplit::app
