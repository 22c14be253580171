// The `moesplit` command line: every subcommand registered on one CLI11 app, and the dispatch
// main() does. A library function (not main.cc) so tests can run any command line in-process,
// `--help` of each subcommand included, and read what a user would see.
#pragma once

#include <functional>
#include <ostream>
#include <string>
#include <vector>

namespace CLI {
class App;  // <CLI/CLI.hpp> only where flags are registered: it costs ~6 s per file
}  // namespace CLI

namespace moesplit::app {

// Sets `app`'s description and version flag and registers every subcommand; the chosen one's
// work lands in *action once `app` has parsed a command line.
void RegisterCommands(CLI::App& app, std::function<int()>* action);

// Parses `args` (argv without the program name) and runs the chosen subcommand; returns the
// exit status. No arguments at all prints the command list to `out` and returns 0, as --help
// does: a newcomer's first try should show what the program can do, not an error. Help and parse
// errors go to `out` / `err` as CLI11 prints them; a subcommand's own output goes where it writes.
int RunCommandLine(std::vector<std::string> args, std::ostream& out, std::ostream& err);

}  // namespace moesplit::app
