// The command line as a newcomer meets it: `moesplit` alone lists the commands, and every
// subcommand's --help runs and tells the truth (no "CPU only" for --device now that the hybrid
// pass exists; every command the top-level help lists is one that runs).
#include <CLI/CLI.hpp>
#include <gtest/gtest.h>

#include <functional>
#include <sstream>
#include <string>
#include <vector>

#include "apps/cli.h"

namespace moesplit::app {
namespace {

struct Result {
  int rc = 0;
  std::string out, err;
};

Result Invoke(std::vector<std::string> args) {
  std::ostringstream out, err;
  Result r;
  r.rc = RunCommandLine(std::move(args), out, err);
  r.out = out.str();
  r.err = err.str();
  return r;
}

// The first word of each line of the "Subcommands:" block of CLI11's help.
std::vector<std::string> ListedSubcommands(const std::string& help) {
  std::vector<std::string> names;
  std::istringstream in(help);
  std::string line;
  bool in_block = false;
  while (std::getline(in, line)) {
    if (line.rfind("Subcommands:", 0) == 0 || line.rfind("SUBCOMMANDS:", 0) == 0) {
      in_block = true;
      continue;
    }
    if (!in_block) continue;
    if (line.empty() || line[0] != ' ') break;
    std::istringstream words(line);
    std::string name;
    words >> name;
    if (!name.empty()) names.push_back(name);
  }
  return names;
}

// Every registered subcommand's name, from the app main() builds.
std::vector<std::string> RegisteredSubcommands() {
  CLI::App app;
  std::function<int()> action;
  RegisterCommands(app, &action);
  std::vector<std::string> names;
  for (const CLI::App* sub : app.get_subcommands([](CLI::App*) { return true; })) {
    names.push_back(sub->get_name());
  }
  return names;
}

TEST(Cli, NoArgumentsListsTheCommands) {
  const Result r = Invoke({});
  EXPECT_EQ(r.rc, 0) << r.err;
  EXPECT_EQ(r.out.find("A subcommand is required"), std::string::npos) << r.out;
  EXPECT_EQ(r.err.find("A subcommand is required"), std::string::npos) << r.err;
  EXPECT_NE(r.out.find("Usage: moesplit"), std::string::npos) << r.out;
  // The same list as --help: each command with its one-line description.
  const Result help = Invoke({"--help"});
  EXPECT_EQ(help.rc, 0);
  EXPECT_EQ(r.out, help.out);
  const std::vector<std::string> listed = ListedSubcommands(r.out);
  EXPECT_EQ(listed, RegisteredSubcommands()) << r.out;
  EXPECT_NE(r.out.find("Generate a completion of a prompt"), std::string::npos) << r.out;
}

TEST(Cli, TopLevelHelpSaysWhatTheProgramDoes) {
  const Result r = Invoke({"--help"});
  ASSERT_EQ(r.rc, 0);
  const std::string first_line = r.out.substr(0, r.out.find('\n'));
  for (const char* verb : {"run", "chat", "serve", "benchmark", "plan"}) {
    EXPECT_NE(first_line.find(verb), std::string::npos) << verb << " in: " << first_line;
  }
  EXPECT_NE(first_line.find("GPU"), std::string::npos) << first_line;
}

TEST(Cli, EverySubcommandHelpRunsAndTellsTheTruth) {
  const Result top = Invoke({"--help"});
  ASSERT_EQ(top.rc, 0);
  const std::vector<std::string> listed = ListedSubcommands(top.out);
  ASSERT_GE(listed.size(), 10u) << top.out;  // bench chat eval inspect ... version
  const std::vector<std::string> registered = RegisteredSubcommands();
  EXPECT_EQ(listed, registered);
  int with_device = 0;
  for (const std::string& name : listed) {
    SCOPED_TRACE(name);
    const Result r = Invoke({name, "--help"});
    EXPECT_EQ(r.rc, 0) << r.err;
    EXPECT_NE(r.out.find("Usage: moesplit " + name), std::string::npos) << r.out;
    EXPECT_EQ(r.out.find("this version"), std::string::npos) << r.out;
    std::istringstream in(r.out);
    std::string line;
    while (std::getline(in, line)) {
      // The option's own line (a description may mention --device in passing).
      const size_t start = line.find_first_not_of(' ');
      if (start == std::string::npos || line.compare(start, 8, "--device") != 0) continue;
      ++with_device;
      EXPECT_EQ(line.find("CPU only"), std::string::npos) << line;
      EXPECT_NE(line.find("cuda"), std::string::npos) << line;
    }
  }
  // run, chat, bench, serve and eval take --device.
  EXPECT_GE(with_device, 5);
}

// The --numa default is the planner's fastest predicted mode (issue 29), and the help says so.
TEST(Cli, NumaHelpNamesTheDefault) {
  for (const char* name : {"plan", "run", "chat", "bench", "serve"}) {
    SCOPED_TRACE(name);
    const Result r = Invoke({name, "--help"});
    ASSERT_EQ(r.rc, 0);
    const size_t at = r.out.find("--numa");
    ASSERT_NE(at, std::string::npos) << r.out;
    const std::string line = r.out.substr(at, r.out.find('\n', at) - at);
    EXPECT_NE(line.find("fastest predicted"), std::string::npos) << line;
  }
}

// --repack-growth takes a percent from -1 (no limit) up: anything else is refused before a model
// is opened, naming the flag.
TEST(Cli, RepackGrowthOutOfRangeIsAUsageError) {
  for (const char* name : {"run", "bench", "serve"}) {
    for (const char* bad : {"-5", "abc"}) {
      SCOPED_TRACE(std::string(name) + " " + bad);
      const Result r = Invoke({name, "-m", "/nonexistent/x.gguf", "--repack-growth", bad});
      EXPECT_NE(r.rc, 0);
      EXPECT_NE(r.err.find("--repack-growth"), std::string::npos) << r.err;
      EXPECT_EQ(r.err.find("/nonexistent/x.gguf"), std::string::npos) << r.err;
    }
  }
}

TEST(Cli, UnknownSubcommandIsAUsageError) {
  // A typo names the word and lists the commands instead of "A subcommand is required".
  const Result r = Invoke({"frobnicate", "-m", "x.gguf"});
  EXPECT_NE(r.rc, 0);
  EXPECT_NE(r.err.find("unknown command 'frobnicate'"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("Subcommands:"), std::string::npos) << r.err;
  EXPECT_EQ(r.out, "");
  const Result opt = Invoke({"--frobnicate"});
  EXPECT_NE(opt.rc, 0);
  EXPECT_NE(opt.err.find("unknown option '--frobnicate'"), std::string::npos) << opt.err;
  // --version still works without a command.
  const Result version = Invoke({"--version"});
  EXPECT_EQ(version.rc, 0);
  EXPECT_NE(version.out.find("moesplit "), std::string::npos) << version.out;
}

}  // namespace
}  // namespace moesplit::app
