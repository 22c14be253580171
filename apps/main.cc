// The `moesplit` command: a thin dispatcher; the command line lives in apps/cli.cc so tests can
// run it in-process.
#include <iostream>
#include <string>
#include <vector>

#include "apps/cli.h"

int main(int argc, char** argv) {
  return moesplit::app::RunCommandLine(std::vector<std::string>(argv + 1, argv + argc), std::cout,
                                       std::cerr);
}
