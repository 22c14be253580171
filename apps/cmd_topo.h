// `moesplit topo`: the machine as the planner sees it — packages, NUMA nodes, L3 groups, cores
// and hardware threads with their real CPU ids, memory per node and node distances — for the
// live machine or any other (--topology FILE.xml | "synthetic description"). With --measure,
// the bandwidth probe and kernel calibrations of apps/topo_measure.h on the live machine, saved
// as a machine profile (YAML) the planner reads.
#pragma once

#include <cstdint>
#include <functional>
#include <ostream>
#include <string>

#include "core/base/status.h"

namespace CLI {
class App;  // <CLI/CLI.hpp> only where flags are registered: it costs ~6 s per file
}  // namespace CLI

namespace moesplit::app {

struct TopoArgs {
  std::string topology;         // "" = live; an hwloc XML file or a synthetic description
  std::string format = "text";  // text | json
  bool measure = false;         // run the probe (live machine only)
  std::string save;             // --measure: write the profile here; "" = YAML to stdout
  std::string threads;          // --measure: per-node thread counts, e.g. "1,2,4"; "" = default
  std::string bytes;            // --measure: probe buffer ("1G", "512M", "64MiB"); "" = 1G
                                //   (64M with --quick)
  bool quick = false;           // --measure: 64 MiB buffers, 3 passes, small GEMM (tests)
};

// Returns the process exit code: 0 on success, 1 on any error (printed to `err`). Progress of
// --measure goes to `err`; its report goes to `out` with --save, else to `err` (stdout then
// carries only the YAML).
int RunTopo(const TopoArgs& args, std::ostream& out, std::ostream& err);

// "1G" = 2^30, "512M" / "512MiB" = 512 x 2^20, "4096" = 4096 bytes; K, M, G, T (binary).
StatusOr<int64_t> ParseByteSize(const std::string& text);

// Adds the `topo` subcommand to `app`; when it is selected, `*action` runs it.
void RegisterTopo(CLI::App& app, std::function<int()>* action);

}  // namespace moesplit::app
