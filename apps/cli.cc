#include "apps/cli.h"

#include <CLI/CLI.hpp>
#include <algorithm>
#include <utility>

#include "apps/cmd_bench.h"
#include "apps/cmd_chat.h"
#include "apps/cmd_eval.h"
#include "apps/cmd_inspect.h"
#include "apps/cmd_make_model.h"
#include "apps/cmd_perplexity.h"
#include "apps/cmd_plan.h"
#include "apps/cmd_run.h"
#include "apps/cmd_serve.h"
#include "apps/cmd_tokenize.h"
#include "apps/cmd_topo.h"
#include "apps/cmd_version.h"

namespace moesplit::app {

void RegisterCommands(CLI::App& app, std::function<int()>* action) {
  app.name("moesplit");
  app.description(
      "moesplit: run, chat with, serve (OpenAI-compatible HTTP) and benchmark "
      "DeepSeek-V3/R1-class mixture-of-experts GGUF models on one server: routed experts on "
      "NUMA-pinned CPU pools, everything else on one CUDA GPU (--device) or the CPU; plan the "
      "placement and predict tokens/s for any machine");
  app.require_subcommand(1);
  app.set_version_flag("--version", [] { return VersionString(); });
  RegisterBench(app, action);
  RegisterChat(app, action);
  RegisterEval(app, action);
  RegisterInspect(app, action);
  RegisterMakeModel(app, action);
  RegisterPerplexity(app, action);
  RegisterPlan(app, action);
  RegisterRun(app, action);
  RegisterServe(app, action);
  RegisterTokenize(app, action);
  RegisterTopo(app, action);
  RegisterVersion(app, action);
}

namespace {

bool IsCommand(const CLI::App& app, const std::string& name) {
  try {
    app.get_subcommand(name);
    return true;
  } catch (const CLI::OptionNotFound&) {
    return false;
  }
}

}  // namespace

int RunCommandLine(std::vector<std::string> args, std::ostream& out, std::ostream& err) {
  CLI::App app;
  std::function<int()> action;
  RegisterCommands(app, &action);
  if (args.empty()) {
    out << app.help();
    return 0;
  }
  // CLI11 reports a mistyped command (or an unknown option before the command) as "A subcommand
  // is required": name the word and list the commands instead.
  const std::string& first = args[0];
  if (first != "-h" && first != "--help" && first != "--version" && !IsCommand(app, first)) {
    err << "moesplit: unknown " << (first.rfind('-', 0) == 0 ? "option" : "command") << " '"
        << first << "'\n\n"
        << app.help();
    return static_cast<int>(CLI::ExitCodes::ExtrasError);
  }
  // llama.cpp's multi-letter single-dash flags (llama-bench -pg, llama-cli -sys, -ngl, -ot) mean
  // their double-dash forms: CLI11 takes one letter after a single dash.
  for (std::string& a : args) {
    if (a == "-pg") a = "--pg";
    if (a == "-sys") a = "--system";
    if (a == "-ngl") a = "--n-gpu-layers";
    if (a == "-ot") a = "--override-tensor";
    if (a == "-np") a = "--parallel";
  }
  std::reverse(args.begin(), args.end());  // CLI11 takes the arguments in reverse order
  try {
    app.parse(args);
  } catch (const CLI::ParseError& e) {
    return app.exit(e, out, err);
  }
  return action ? action() : 0;
}

}  // namespace moesplit::app
