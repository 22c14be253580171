// The NUMA flags shared by run / chat / bench: --numa, --nodes, --plan, --no-pin (and -t), and
// their resolution against the live topology into an engine::CpuPlacement.
//
//   moesplit run -m R1.gguf --plan r1.yaml              the planner's saved choice
//   moesplit run -m R1.gguf --numa shard --nodes 0,1    two sockets, experts sharded
//   moesplit bench -m x.gguf -t 8 --nodes 1             8 pinned workers on node 1
//
// Precedence: a flag given on the command line > the plan file > defaults. Without any of them
// a one-node machine keeps the default (one unpinned pool of -t threads reading the file mapping)
// and a machine with several nodes gets the planner's choice for the model.
#pragma once

#include <functional>
#include <memory>
#include <ostream>
#include <string>
#include <vector>

#include "apps/gpu_placement.h"
#include "core/base/status.h"
#include "core/engine/engine.h"
#include "numa/topology.h"

namespace CLI {
class App;  // <CLI/CLI.hpp> only where flags are registered: it costs ~6 s per file
}  // namespace CLI

namespace moesplit::app {

struct PlacementFlags {
  std::string plan;   // --plan FILE (YAML written by `moesplit plan -o`)
  std::string numa;   // --numa single|interleave|replicate|shard
  std::string nodes;  // --nodes 0,1 (OS node ids, ranges allowed: 0-3)
  bool no_pin = false;
  // --no-mmap: the routed experts are copied into process memory on 2 MiB pages (the file's
  // pages released as each tensor is copied) instead of being read from the file mapping.
  bool no_mmap = false;
  // --no-repack: expert tensors stay in their file layout (no Q4_K -> 16-row groups at load).
  bool no_repack = false;
  // --repack-growth PCT: how much (percent of the file) repacked layouts may add; -1: no limit.
  double repack_growth_pct = 8;
  DeviceFlags device;  // --device, -ngl, -ot, --cpu-moe, --n-cpu-moe, --rules

  bool Any() const { return !plan.empty() || !numa.empty() || !nodes.empty() || no_mmap; }
};

// Adds --numa, --nodes, --plan, --no-pin and the device flags (gpu_placement.h) to a subcommand.
void AddPlacementFlags(CLI::App* cmd, PlacementFlags* flags);

// The placement for `threads` workers in total (0 = one per physical core of the chosen nodes, or
// the plan's counts) on `topo`. Errors: unknown mode, nodes the machine lacks or without CPUs,
// single over several nodes, a plan that does not load, more threads than the nodes' CPUs.
// Pinning problems are not errors here (the pools warn).
// Without any flag: on a machine with one node with CPUs, an empty placement (groups empty: the
// default pool); with several and a `model_path`, the planner's choice for that model (numa/
// planner.h, assumed figures), logged to `log` — never one pool spread over sockets.
StatusOr<engine::CpuPlacement> ResolvePlacement(const PlacementFlags& flags, int threads,
                                                const numa::Topology& topo,
                                                const std::string& model_path = "",
                                                std::ostream* log = nullptr);

// The same on the live topology (loaded only when needed).
StatusOr<engine::CpuPlacement> ResolvePlacement(const PlacementFlags& flags, int threads,
                                                const std::string& model_path, std::ostream* log);

// "shard over nodes 0,1: 2 x 32 workers" — for logs and the bench table.
std::string DescribePlacement(const engine::CpuPlacement& p);

// A progress callback for copying experts to their nodes: "numa: placing experts 37% (12.1 of
// 32.6 GiB)" rewritten in place on a terminal, a line per 10% otherwise.
std::function<void(uint64_t, uint64_t)> CopyProgress(std::ostream& err);

// Session::Create with the placement, printing the session's placement report to err.
StatusOr<std::unique_ptr<engine::Session>> MakeSession(const engine::Model& model,
                                                       const engine::SessionOptions& options,
                                                       std::ostream& err);

// What run / chat / serve open: the device flags applied (ApplyDeviceFlags: --device auto
// falls back to the CPU, said on err), the backend opened, the CPU placement resolved into the
// engine's options (options.backend points at `backend`, which must outlive the engine).
struct EngineSetup {
  std::unique_ptr<engine::DenseBackend> backend;  // null: the CPU pass
  engine::EngineOptions options;
};
StatusOr<EngineSetup> SetUpEngine(const engine::Model& model, const std::string& model_path,
                                  PlacementFlags flags, int threads, int64_t ctx_size,
                                  cpu::IsaTier tier, std::ostream& err);

// A session of run / chat: the device flags applied (ApplyDeviceFlags), the backend opened, the
// CPU placement resolved, Session::Create with all of it. `backend` outlives `session` (members
// are destroyed in reverse order).
struct OpenedSession {
  std::unique_ptr<engine::DenseBackend> backend;  // null: the CPU pass
  std::unique_ptr<engine::Session> session;
};
StatusOr<OpenedSession> OpenSession(const engine::Model& model, const std::string& model_path,
                                    PlacementFlags flags, int threads, int64_t ctx_size,
                                    cpu::IsaTier tier, std::ostream& err);

}  // namespace moesplit::app
