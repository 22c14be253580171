// The `moesplit` command: a thin dispatcher over the subcommands in apps/cmd_*.cc.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <functional>
#include <iostream>
#include <string>
#include <vector>

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

int main(int argc, char** argv) {
  CLI::App app{
      "moesplit: serve DeepSeek-V3/R1-class mixture-of-experts GGUF models on one server — "
      "routed experts on NUMA-pinned CPU pools, everything else on one GPU (or the CPU)"};
  app.require_subcommand(1);
  app.set_version_flag("--version", [] { return moesplit::app::VersionString(); });
  std::function<int()> action;
  moesplit::app::RegisterBench(app, &action);
  moesplit::app::RegisterChat(app, &action);
  moesplit::app::RegisterEval(app, &action);
  moesplit::app::RegisterInspect(app, &action);
  moesplit::app::RegisterMakeModel(app, &action);
  moesplit::app::RegisterPerplexity(app, &action);
  moesplit::app::RegisterPlan(app, &action);
  moesplit::app::RegisterRun(app, &action);
  moesplit::app::RegisterServe(app, &action);
  moesplit::app::RegisterTokenize(app, &action);
  moesplit::app::RegisterTopo(app, &action);
  moesplit::app::RegisterVersion(app, &action);
  // llama.cpp's multi-letter single-dash flags (llama-bench -pg, llama-cli -sys, -ngl, -ot) mean
  // their double-dash forms.
  std::vector<std::string> args(argv + 1, argv + argc);
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
    return app.exit(e);
  }
  return action ? action() : 0;
}
