#include "apps/cmd_version.h"

#include <CLI/CLI.hpp>
#include <iostream>

#include "apps/model_summary.h"
#include "core/base/status.h"
#ifdef MOESPLIT_HAVE_CUDA
#include "gpu_kernels/device_info.h"
#endif

namespace moesplit::app {

std::string VersionString() {
#ifdef MOESPLIT_HAVE_CUDA
  return StrCat("moesplit ", MOESPLIT_VERSION, " (CUDA ", gpu::RuntimeVersionString(),
                " backend built)");
#else
  return StrCat("moesplit ", MOESPLIT_VERSION, " (CPU-only build)");
#endif
}

namespace {

int RunVersion() {
  std::cout << VersionString() << "\n";
#ifdef MOESPLIT_HAVE_CUDA
  auto devices = gpu::ListDevices(/*with_free_memory=*/true);
  if (!devices.ok()) {
    std::cout << "CUDA devices: none usable (" << devices.status().message() << ")\n";
    return 0;
  }
  if (devices->empty()) std::cout << "CUDA devices: none found (the CPU path will be used)\n";
  for (const gpu::DeviceInfo& d : *devices) {
    std::cout << "CUDA device " << d.index << ": " << d.name << ", sm_" << d.cc_major << d.cc_minor
              << ", " << d.sm_count << " SMs, " << HumanBytes(d.total_bytes) << " ("
              << HumanBytes(d.free_bytes) << " free)\n";
  }
#else
  std::cout << "CUDA devices: not available (built without CUDA)\n";
#endif
  return 0;
}

}  // namespace

void RegisterVersion(CLI::App& app, std::function<int()>* action) {
  CLI::App* cmd = app.add_subcommand("version", "Print the build configuration and CUDA devices");
  cmd->callback([action] { *action = RunVersion; });
}

}  // namespace moesplit::app
