// `moesplit plan`: where a model's tensors go on this (or any) machine and how fast it will run,
// before anything is loaded —
//   moesplit plan (-m FILE | --preset NAME [--quant Q4_K_M] [--layers N]) [--topology T]
//                 [--profile P] [--gpu-mem 24G] [--gpu-bw GBPS] [--ctx-size C] [--batch B]
//                 [--depth D] [--kv-type f16|f32] [--threads N] [--numa MODE] [--nodes 0,1]
//                 [--format text|json|yaml] [-o plan.yaml]
// --preset plans a model that is not on disk at full size (`--preset ds-v3` is DeepSeek-V3/R1's
// shape); --topology takes an hwloc XML file or synthetic description (default: this machine);
// without --profile the figures come from configs/profiles/<stem>.yaml next to a
// configs/topologies/<stem>.xml topology, else numa::AssumedProfile (the plan says so).
#pragma once

#include <cstdint>
#include <functional>
#include <iostream>
#include <ostream>
#include <string>

#include "apps/gpu_placement.h"
#include "core/base/status.h"

namespace CLI {
class App;  // <CLI/CLI.hpp> only where flags are registered: it costs ~6 s per file
}  // namespace CLI

namespace moesplit::app {

struct PlanArgs {
  std::string model;             // -m GGUF file
  std::string preset;            // --preset (make-model presets)
  std::string quant = "Q4_K_M";  // --quant, with --preset
  int64_t layers = 0;            // --layers, with --preset (0 = the preset's full depth)
  std::string topology;          // --topology FILE.xml | "synthetic" ("" = this machine)
  std::string profile;           // --profile FILE.yaml ("" = next to the topology, or assumed)
  std::string gpu_mem = "0";     // --gpu-mem: VRAM, e.g. 24G / 24GiB / 512M (0 = CPU only)
  double gpu_bw = 0;             // --gpu-bw: GPU memory GB/s (0 = assumed)
  int64_t ctx_size = 4096;       // --ctx-size: KV cache positions
  int batch = 512;               // --batch: prompt tokens per prefill batch
  int64_t depth = 0;             // --depth: tokens already in the cache when decoding
  std::string kv_type = "f32";   // --kv-type f16 | f32: the CPU cache (run / chat: f32)
  int threads = 0;               // --threads: total workers (0 = every physical core)
  std::string numa;              // --numa single | interleave | replicate | shard ("" = auto)
  std::string nodes;             // --nodes: OS node ids, e.g. "0,1" or "0-3"
  std::string format = "text";   // --format text | json | yaml
  std::string output;            // -o: also save the plan as YAML (for run/bench --plan)
  DeviceFlags device;            // -ngl, -ot, --cpu-moe, --n-cpu-moe, --rules (no --device)
};

// "24G", "24GiB", "512M", "1.5T", "4096" (bytes): K/M/G/T and KiB..TiB are powers of 1024,
// KB/MB/GB/TB powers of 1000. InvalidArgument naming the text otherwise.
StatusOr<uint64_t> ParseSize(const std::string& text);

// Makes the plan and prints it to `out` in args.format (and saves YAML to -o). User errors
// (unknown preset, bad --numa, unknown node, infeasible plan) come back as a Status.
Status RunPlan(const PlanArgs& args, std::ostream& out = std::cout);

void RegisterPlan(CLI::App& app, std::function<int()>* action);

}  // namespace moesplit::app
