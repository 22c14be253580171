// `moesplit version`: build configuration (ISA tiers compiled, CUDA) and visible CUDA devices.
#pragma once

#include <functional>
#include <string>

namespace CLI {
class App;  // <CLI/CLI.hpp> only where flags are registered: it costs ~6 s per file
}  // namespace CLI

namespace moesplit::app {

std::string VersionString();  // "moesplit 0.1.0 (CUDA 13.0 backend built)" / "(CPU-only build)"
void RegisterVersion(CLI::App& app, std::function<int()>* action);

}  // namespace moesplit::app
