// The same jobs on three moesplit::Executor implementations, to decide which runs each job:
//
//   ours  numa::NodePool: one worker per CPU, pinned (cpus = the first `threads` CPUs this
//         process may run on, node 0; the caller is worker 0 and is pinned for the benchmark's
//         duration, then its affinity is restored); spin ~2000 pauses, then sleep; tasks claimed
//         one by one from an atomic ticket.
//   tbb   oneTBB: a tbb::task_arena with constraints{numa_id of node 0 (when tbb::info::
//         numa_nodes() reports one, else unconstrained), max_concurrency = threads};
//         ParallelFor = arena.execute(tbb::parallel_for over [0, n) with grain 1 and the
//         simple_partitioner, so every task is its own stealable range); worker =
//         tbb::this_task_arena::current_thread_index().
//   omp   OpenMP: #pragma omp parallel for schedule(dynamic, 1) num_threads(threads);
//         worker = omp_get_thread_num(). Runtime defaults (OMP_WAIT_POLICY etc. unset).
//
// Workloads, threads 1 and 2:
//   empty           ParallelFor(threads tasks, no work): the hand-off + barrier latency.
//   decode          one MoE layer (moe::ExpertEngine::Forward) for 1 token, k distinct uniform
//                   experts, 64 route sets in rotation (two ParallelFor phases per layer).
//   prefill:64/512  the same for 64 / 512 tokens, Zipf(s = 1) expert popularity, 4 sets.
// The layer is V2-Lite's: D 2048, F 1408, 64 experts, top-6, gate/up Q4_K, down Q8_0 (6.31 MB
// per expert, 404 MB per layer), built once (bench/moe_layer_setup.h) at the best ISA tier
// under MOESPLIT_MAX_ISA.
//
// Counters: tok/s (tokens / s), us/layer (us per Forward); empty: us/job. Real time; default
// MinTime 0.5 s, so the 24 benchmarks take ~20-40 s.
#include <benchmark/benchmark.h>
#include <omp.h>
#include <tbb/blocked_range.h>
#include <tbb/info.h>
#include <tbb/parallel_for.h>
#include <tbb/partitioner.h>
#include <tbb/task_arena.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "bench/bench_common.h"
#include "bench/moe_layer_setup.h"
#include "core/base/status.h"
#include "cpu_kernels/cpu_features.h"
#include "cpu_kernels/gemv/gemv.h"
#include "moe/expert_engine.h"
#include "numa/affinity.h"
#include "core/base/executor.h"
#include "numa/node_pool.h"

namespace moesplit::bench {
namespace {

constexpr Variant kV2Lite = {"v2lite/q4_K-q8_0", 2048, 1408, 64, 6, GgmlType::kQ4_K,
                             GgmlType::kQ8_0};
constexpr int64_t kEmpty = 0;                       // workload id of the empty job
constexpr int64_t kWorkloads[] = {kEmpty, 1, 64, 512};  // empty, decode, prefill 64 / 512
constexpr int kThreads[] = {1, 2};

enum class Kind { kOurs, kTbb, kOmp };
constexpr Kind kKinds[] = {Kind::kOurs, Kind::kTbb, Kind::kOmp};
const char* KindName(Kind k) { return k == Kind::kOurs ? "ours" : k == Kind::kTbb ? "tbb" : "omp"; }

class TbbExecutor : public moesplit::Executor {
 public:
  // numa_id: tbb's id of the node to constrain the arena to, or -1 (tbb::task_arena::automatic).
  TbbExecutor(int threads, int numa_id)
      : threads_(threads), arena_(tbb::task_arena::constraints(numa_id, threads)) {}
  int size() const override { return threads_; }
  void ParallelFor(int64_t n_tasks,
                   const std::function<void(int64_t task, int worker)>& fn) override {
    if (n_tasks <= 0) return;
    arena_.execute([&] {
      tbb::parallel_for(
          tbb::blocked_range<int64_t>(0, n_tasks, 1),
          [&](const tbb::blocked_range<int64_t>& r) {
            const int worker = tbb::this_task_arena::current_thread_index();
            MOESPLIT_CHECK(worker >= 0 && worker < threads_, "tbb thread index ", worker);
            for (int64_t t = r.begin(); t < r.end(); ++t) fn(t, worker);
          },
          tbb::simple_partitioner());
    });
  }

 private:
  int threads_;
  tbb::task_arena arena_;
};

class OmpExecutor : public moesplit::Executor {
 public:
  explicit OmpExecutor(int threads) : threads_(threads) {}
  int size() const override { return threads_; }
  void ParallelFor(int64_t n_tasks,
                   const std::function<void(int64_t task, int worker)>& fn) override {
    const int threads = threads_;
#pragma omp parallel for schedule(dynamic, 1) num_threads(threads)
    for (int64_t t = 0; t < n_tasks; ++t) fn(t, omp_get_thread_num());
  }

 private:
  int threads_;
};

struct Context {
  cpu::IsaTier tier = cpu::IsaTier::kScalar;
  gemv::DecodeRead read = gemv::DecodeRead::kPrefetched;  // BenchDecodeRead(), once
  std::vector<int> cpus;  // the CPUs `ours` pins to, in order (worker w -> cpus[w])
  int tbb_numa_id = -1;   // tbb's id of node 0, or -1 when tbb reports no NUMA nodes
  LayerCache layers;
};

// One executor for one benchmark, and the caller's affinity restored when it ends (ours pins
// the calling thread: pin_caller).
class Runner {
 public:
  Runner(const Context& ctx, Kind kind, int threads) : saved_(numa::AllowedCpus()) {
    if (kind == Kind::kOurs) {
      std::vector<int> cpus(ctx.cpus.begin(), ctx.cpus.begin() + threads);
      auto pool = std::make_unique<numa::NodePool>(
          numa::NodePoolOptions{.node = 0, .cpus = cpus, .pin_caller = true});
      for (const std::string& w : pool->warnings()) std::fprintf(stderr, "warning: %s\n", w.c_str());
      label_ = "cpus " + std::to_string(cpus.front()) + (threads > 1 ? ".." + std::to_string(cpus.back()) : "");
      exec_ = std::move(pool);
    } else if (kind == Kind::kTbb) {
      exec_ = std::make_unique<TbbExecutor>(threads, ctx.tbb_numa_id);
      label_ = "numa_id " + std::to_string(ctx.tbb_numa_id);
    } else {
      exec_ = std::make_unique<OmpExecutor>(threads);
    }
  }
  ~Runner() {
    exec_.reset();
    if (!saved_.empty()) (void)numa::PinCurrentThread(saved_);  // undo pin_caller
  }
  moesplit::Executor& exec() { return *exec_; }
  const std::string& label() const { return label_; }

 private:
  std::vector<int> saved_;  // the caller's CPUs before the benchmark
  std::unique_ptr<moesplit::Executor> exec_;
  std::string label_;
};

void BM_Empty(benchmark::State& state, const Context* ctx, Kind kind, int threads) {
  Runner run(*ctx, kind, threads);
  const std::function<void(int64_t, int)> nothing = [](int64_t, int) {};
  int64_t jobs = 0;
  const auto t0 = std::chrono::steady_clock::now();
  for (auto _ : state) {
    run.exec().ParallelFor(threads, nothing);
    ++jobs;
  }
  const std::chrono::duration<double> dt = std::chrono::steady_clock::now() - t0;
  state.counters["us/job"] = dt.count() / static_cast<double>(jobs) * 1e6;
  state.SetLabel(run.label());
}

void BM_MoeLayer(benchmark::State& state, Context* ctx, Kind kind, int64_t n_tok, int threads) {
  const ExpertLayer& layer = ctx->layers.Get(kV2Lite, gemv::KernelsFor(ctx->tier, ctx->read));
  const int n_sets = n_tok == 1 ? 64 : 4;
  std::vector<RouteSet> routes;  // [n_sets]
  for (int i = 0; i < n_sets; ++i) {
    routes.push_back(MakeRoutes(layer.experts, kV2Lite.k, n_tok, 100 + i));
  }
  const std::vector<float> hidden = NormalValues(n_tok * kV2Lite.d, 7, 1.0f);  // [n_tok x D]
  std::vector<float> out(static_cast<size_t>(n_tok * kV2Lite.d));              // [n_tok x D]
  Runner run(*ctx, kind, threads);
  moe::ExpertEngine engine(&run.exec(), &gemv::KernelsFor(ctx->tier, ctx->read));

  int64_t iter = 0;
  const auto t0 = std::chrono::steady_clock::now();  // the loop's wall time, as UseRealTime
  for (auto _ : state) {
    const RouteSet& r = routes[static_cast<size_t>(iter++ % n_sets)];
    engine.Forward(layer.views, hidden.data(), n_tok, r.ids.data(), r.weights.data(), kV2Lite.k,
                   out.data());
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
  }
  const std::chrono::duration<double> dt = std::chrono::steady_clock::now() - t0;
  state.counters["tok/s"] = static_cast<double>(iter * n_tok) / dt.count();
  state.counters["us/layer"] = dt.count() / static_cast<double>(iter) * 1e6;
  std::string label = run.label();
  if (layer.experts < kV2Lite.experts) label += " E=" + std::to_string(layer.experts);
  state.SetLabel(label);
}

// Names: pool/<workload>/threads:<n>/<executor>, the three executors of a job side by side.
void RegisterAll(Context* ctx) {
  for (int64_t w : kWorkloads) {
    for (int threads : kThreads) {
      if (threads > static_cast<int>(ctx->cpus.size())) continue;
      for (Kind kind : kKinds) {
        const std::string job = w == kEmpty ? "empty" : w == 1 ? "v2lite/decode"
                                                             : "v2lite/prefill:" + std::to_string(w);
        const std::string name = "pool/" + job + "/threads:" + std::to_string(threads) + "/" +
                                 KindName(kind);
        if (w == kEmpty) {
          benchmark::RegisterBenchmark(name.c_str(), BM_Empty, ctx, kind, threads)->UseRealTime();
        } else {
          benchmark::RegisterBenchmark(name.c_str(), BM_MoeLayer, ctx, kind, w, threads)
              ->UseRealTime();
        }
      }
    }
  }
}

// tbb's id for node 0: the first of tbb::info::numa_nodes() (a single -1 when tbbbind / hwloc
// could not be loaded: the arena is then unconstrained).
int TbbNode0() {
  const std::vector<tbb::numa_node_id> nodes = tbb::info::numa_nodes();
  return nodes.empty() ? -1 : nodes.front();
}

}  // namespace
}  // namespace moesplit::bench

int main(int argc, char** argv) {
  namespace b = moesplit::bench;
  std::vector<std::vector<char>> storage;
  std::vector<char*> args = b::WithDefaultMinTime(&argc, argv, 0.5, &storage);
  benchmark::Initialize(&argc, args.data());
  if (benchmark::ReportUnrecognizedArguments(argc, args.data())) return 1;

  b::Context ctx;
  ctx.tier = b::RunnableTiers().back();  // the best tier this CPU runs under MOESPLIT_MAX_ISA
  ctx.read = b::BenchDecodeRead();
  // The machine's CPUs as the process may use them; a single-node box's node 0 is all of them.
  ctx.cpus = moesplit::numa::AllowedCpus();
  ctx.tbb_numa_id = b::TbbNode0();
  benchmark::AddCustomContext("isa_tier", std::string(moesplit::cpu::IsaTierName(ctx.tier)));
  benchmark::AddCustomContext("tbb_numa_nodes", std::to_string(tbb::info::numa_nodes().size()));
  benchmark::AddCustomContext("omp_max_threads", std::to_string(omp_get_max_threads()));
  b::RegisterAll(&ctx);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
