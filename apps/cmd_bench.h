// `moesplit bench`: llama-bench-compatible throughput tests on one model.
//   moesplit bench -m FILE [-p 512] [-n 128] [-pg 512,128] [-t 1,2] [-r 5] [-o md|csv|json]
//                  [--prompt-sizes 1000,7500,16000] [--numa MODE] [--nodes 0,1] [--plan FILE]
//                  [--sweep threads=1,2,4 numa=single,shard [--sweep-chart FILE.svg]]
// pp<N>: N random tokens evaluated as one prompt; tg<N>: N tokens evaluated one at a time;
// pp<N>+tg<M>: both. A warm-up (the prompt once, one generated token, as llama-bench) precedes
// -r runs from an empty context;
// tokens/s are reported as mean ± sample stddev over the repetitions, in llama-bench's columns.
#pragma once

#include <functional>
#include <ostream>
#include <string>
#include <vector>

#include "apps/cpu_placement.h"
#include "core/base/status.h"

namespace CLI {
class App;  // <CLI/CLI.hpp> only where flags are registered: it costs ~6 s per file
}  // namespace CLI

namespace moesplit::app {

struct BenchArgs {
  std::string model;                  // -m
  std::vector<int> n_prompt = {512};  // -p (0 = no pp test)
  std::vector<int> n_gen = {128};     // -n (0 = no tg test)
  std::vector<std::string> pg;        // -pg "PP,TG" pairs
  // -d: every test again after this many tokens already in the KV cache (llama-bench's -d,
  // "pp512 @ d4096"): decode and prefill at the depth of a long conversation.
  std::vector<int> n_depth = {0};
  std::vector<int> threads;           // -t (default: all hardware threads)
  int repetitions = 5;                // -r
  int n_batch = 2048;                 // -b: prompt tokens per Eval call
  std::string output = "md";          // -o md|csv|json
  std::vector<int> prompt_sizes;      // --prompt-sizes: adds the prefill/decode table
  // --npl: the tg tests again with this many sequences decoding together (aggregate t/s: what a
  // server gets from that many streams; llama-batched-bench's -npl). 1 = the plain tg test.
  std::vector<int> n_parallel = {1};
  uint32_t seed = 42;                 // random token ids
  PlacementFlags placement;           // --numa, --nodes, --plan, --no-pin
  // --sweep threads=1,2,4 numa=single,shard: every combination, one table, and a chart
  std::vector<std::string> sweep;
  std::string sweep_chart = "moesplit-sweep.svg";  // --sweep-chart: where the SVG goes
  bool verbose = false;  // -v: per-phase profile of every test and a bandwidth probe per config
};

Status RunBench(const BenchArgs& args, std::ostream& out, std::ostream& err);

void RegisterBench(CLI::App& app, std::function<int()>* action);

}  // namespace moesplit::app
