// One whole routed-MoE layer, moe::ExpertEngine::Forward, at the real shapes:
//
//   model    D     F     experts  top-k  variants (gate/up - down)
//   v3       7168  2048  256      8      q4_K-q6_K (Q4_K_M's mix), q4_K-q4_K
//   v2lite   2048  1408  64       6      q4_K-q5_0 (llama.cpp's Q4_K_M fallback: 1408 is no
//                                        multiple of 256), q4_K-q8_0
//
// Expert bytes (gate + up + down of one expert): v3 q4_K-q6_K = 2 x 2048 x 4032 + 7168 x 1680
// = 28.56 MB (x 256 = 7.31 GB); v3 q4_K-q4_K = 3 x 8.26 MB = 24.77 MB (6.34 GB); v2lite
// q4_K-q5_0 = 2 x 1408 x 1152 + 2048 x 968 = 5.23 MB; q4_K-q8_0 = 6.31 MB.
//
// Workloads: decode = 1 token, k distinct experts drawn uniformly, a new route set every
// iteration (64 sets in rotation: 8 x 28.6 MB per token cannot stay in a 32 MiB L3 anyway);
// prefill = 64 and 512 tokens, each token's k distinct experts drawn from a Zipf(s = 1) law
// over a random ranking of the experts (some experts hot, a long tail; 4 sets in rotation).
// Threads 1 and 2 (numa::ThreadPool).
//
// Counters: tok/s; MB/iter = expert bytes read per iteration (each distinct active expert's
// gate+up+down bytes once); experts = distinct active experts per iteration; GB/s = those bytes
// / s (1e9); bw_frac = GB/s / read bandwidth of the probe with the same thread count (measured at
// start-up, shown in the context header). Real time; default MinTime 0.5 s.
//
// Memory: the layer is built lazily by the first benchmark that needs it and freed when a
// benchmark of another variant starts. MOESPLIT_BENCH_EXPERTS=N caps the experts built (routing
// then spans N); without it all experts are built if MemAvailable leaves 2 GiB spare, else as
// many as fit (printed).
#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "bench/bandwidth.h"
#include "bench/bench_common.h"
#include "core/base/dtype.h"
#include "core/base/tensor_view.h"
#include "cpu_kernels/cpu_features.h"
#include "cpu_kernels/gemv/gemv.h"
#include "cpu_kernels/quant/quant.h"
#include "moe/expert_engine.h"
#include "numa/thread_pool.h"

namespace moesplit::bench {
namespace {

struct Variant {
  const char* name;  // "v3/q4_K-q6_K"
  int64_t d;         // hidden size
  int64_t f;         // expert FFN width
  int64_t experts;   // routed experts of the model
  int k;             // experts per token
  GgmlType gate_up;
  GgmlType down;
};

constexpr Variant kVariants[] = {
    {"v3/q4_K-q6_K", 7168, 2048, 256, 8, GgmlType::kQ4_K, GgmlType::kQ6_K},
    {"v3/q4_K-q4_K", 7168, 2048, 256, 8, GgmlType::kQ4_K, GgmlType::kQ4_K},
    {"v2lite/q4_K-q5_0", 2048, 1408, 64, 6, GgmlType::kQ4_K, GgmlType::kQ5_0},
    {"v2lite/q4_K-q8_0", 2048, 1408, 64, 6, GgmlType::kQ4_K, GgmlType::kQ8_0},
};
constexpr int64_t kTokens[] = {1, 64, 512};  // decode, prefill 64, prefill 512
constexpr int kThreads[] = {1, 2};
constexpr int64_t kSpareBytes = int64_t{2} << 30;  // left to the other users of the machine

// Stacked expert slabs of one layer, llama.cpp layout: gate/up [D, F, E], down [F, D, E].
struct ExpertLayer {
  const Variant* variant = nullptr;
  int64_t experts = 0;       // E built (<= variant->experts)
  int64_t expert_bytes = 0;  // gate + up + down bytes of one expert
  LargeBuffer gate, up, down;
  moe::ExpertEngine::Layer views;
};

// Quantizes one [rows x cols] matrix from random floats into expert 0's slab and copies it to
// experts 1..E-1: `slab` is [E x rows x row_bytes].
void FillSlab(GgmlType type, int64_t rows, int64_t cols, int64_t experts, uint32_t seed,
              uint8_t* slab) {
  const int64_t row_bytes = RowBytes(type, cols);
  const std::vector<float> w = RandomValues(rows * cols, seed, 0.02f);  // [rows x cols]
  for (int64_t r = 0; r < rows; ++r) {
    quant::QuantizeRow(type, w.data() + r * cols, slab + r * row_bytes, cols);
  }
  const size_t matrix = static_cast<size_t>(rows * row_bytes);
  for (int64_t e = 1; e < experts; ++e) std::memcpy(slab + e * matrix, slab, matrix);
}

TensorView SlabView(const char* name, GgmlType type, int64_t cols, int64_t rows, int64_t experts,
                    const LargeBuffer& buf) {
  TensorView v;
  v.name = name;
  v.type = type;
  v.n_dims = 3;
  v.ne = {cols, rows, experts, 1};
  v.data = buf.data();
  v.nbytes = buf.size();
  return v;
}

// How many experts to build: the model's, capped by MOESPLIT_BENCH_EXPERTS and by free memory.
int64_t ExpertsToBuild(const Variant& v, int64_t expert_bytes) {
  int64_t e = v.experts;
  if (const char* env = std::getenv("MOESPLIT_BENCH_EXPERTS"); env != nullptr && *env != '\0') {
    e = std::clamp<int64_t>(std::atoll(env), v.k, v.experts);
  }
  const int64_t avail = MemAvailableBytes();
  if (avail > 0 && e * expert_bytes > avail - kSpareBytes) {
    const int64_t fit = std::max<int64_t>(v.k, (avail - kSpareBytes) / expert_bytes);
    std::fprintf(stderr,
                 "%s: %lld experts x %.1f MB do not fit in MemAvailable %.1f GB - 2 GiB; "
                 "building %lld\n",
                 v.name, static_cast<long long>(e), expert_bytes * 1e-6, avail * 1e-9,
                 static_cast<long long>(fit));
    e = std::min(e, fit);
  }
  return e;
}

// One layer at a time: Google Benchmark calls a benchmark function several times, and the
// benchmarks of one variant are registered together, so each variant is built once per run.
class LayerCache {
 public:
  const ExpertLayer& Get(const Variant& v);

 private:
  std::unique_ptr<ExpertLayer> layer_;
};

const ExpertLayer& LayerCache::Get(const Variant& v) {
  if (layer_ && layer_->variant == &v) return *layer_;
  layer_.reset();  // free the previous variant first
  const auto t0 = std::chrono::steady_clock::now();
  auto l = std::make_unique<ExpertLayer>();
  l->variant = &v;
  const int64_t gate_bytes = RowBytes(v.gate_up, v.d) * v.f;  // one expert's gate (= up)
  const int64_t down_bytes = RowBytes(v.down, v.f) * v.d;
  l->expert_bytes = 2 * gate_bytes + down_bytes;
  l->experts = ExpertsToBuild(v, l->expert_bytes);
  const int64_t e = l->experts;
  l->gate = LargeBuffer(static_cast<size_t>(e * gate_bytes));
  l->up = LargeBuffer(static_cast<size_t>(e * gate_bytes));
  l->down = LargeBuffer(static_cast<size_t>(e * down_bytes));
  FillSlab(v.gate_up, v.f, v.d, e, 11, l->gate.data());
  FillSlab(v.gate_up, v.f, v.d, e, 12, l->up.data());
  FillSlab(v.down, v.d, v.f, e, 13, l->down.data());
  l->views.gate_exps = SlabView("ffn_gate_exps", v.gate_up, v.d, v.f, e, l->gate);
  l->views.up_exps = SlabView("ffn_up_exps", v.gate_up, v.d, v.f, e, l->up);
  l->views.down_exps = SlabView("ffn_down_exps", v.down, v.f, v.d, e, l->down);
  const std::chrono::duration<double> dt = std::chrono::steady_clock::now() - t0;
  std::fprintf(stderr, "%s: built %lld experts, %.2f GB, in %.1f s\n", v.name,
               static_cast<long long>(e), e * l->expert_bytes * 1e-9, dt.count());
  layer_ = std::move(l);
  return *layer_;
}

// One iteration's routing: ids/weights [n_tok x k]; distinct = experts with >= 1 token.
struct RouteSet {
  std::vector<int32_t> ids;    // [n_tok x k]
  std::vector<float> weights;  // [n_tok x k], each row sums to 1
  int64_t distinct = 0;
};

// Decode (n_tok == 1): k distinct experts uniformly. Prefill: per token k distinct experts from
// P(rank r) ~ 1 / (r + 1) over a random ranking of the E experts (rejection of repeats).
RouteSet MakeRoutes(int64_t experts, int k, int64_t n_tok, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<int32_t> rank_to_expert(static_cast<size_t>(experts));
  std::iota(rank_to_expert.begin(), rank_to_expert.end(), 0);
  std::shuffle(rank_to_expert.begin(), rank_to_expert.end(), rng);
  std::vector<double> zipf(static_cast<size_t>(experts));
  for (int64_t r = 0; r < experts; ++r) {
    zipf[static_cast<size_t>(r)] = n_tok == 1 ? 1.0 : 1.0 / static_cast<double>(r + 1);
  }
  std::discrete_distribution<int64_t> pick(zipf.begin(), zipf.end());
  std::uniform_real_distribution<float> gate(0.05f, 1.0f);
  RouteSet s;
  std::vector<char> active(static_cast<size_t>(experts), 0);
  for (int64_t t = 0; t < n_tok; ++t) {
    float sum = 0;
    for (int j = 0; j < k; ++j) {
      int32_t e;
      do {
        e = rank_to_expert[static_cast<size_t>(pick(rng))];
      } while (std::find(s.ids.end() - j, s.ids.end(), e) != s.ids.end());
      s.ids.push_back(e);
      s.weights.push_back(gate(rng));
      sum += s.weights.back();
      active[static_cast<size_t>(e)] = 1;
    }
    for (int j = 0; j < k; ++j) s.weights[static_cast<size_t>(t * k + j)] /= sum;
  }
  s.distinct = std::count(active.begin(), active.end(), 1);
  return s;
}

struct Context {
  cpu::IsaTier tier = cpu::IsaTier::kScalar;
  double read_bw[3] = {};  // bytes/s by thread count (index = threads), probe median
  LayerCache layers;
};

void BM_MoeLayer(benchmark::State& state, Context* ctx, const Variant* v, int64_t n_tok,
                 int threads) {
  const ExpertLayer& layer = ctx->layers.Get(*v);
  const int n_sets = n_tok == 1 ? 64 : 4;
  std::vector<RouteSet> routes;  // [n_sets]
  for (int i = 0; i < n_sets; ++i) {
    routes.push_back(MakeRoutes(layer.experts, v->k, n_tok, 100 + i));
  }
  const std::vector<float> hidden = RandomValues(n_tok * v->d, 7, 1.0f);  // [n_tok x D]
  std::vector<float> out(static_cast<size_t>(n_tok * v->d));              // [n_tok x D]
  numa::ThreadPool pool(threads);
  moe::ExpertEngine engine(&pool, &gemv::KernelsFor(ctx->tier));

  int64_t iter = 0, experts_read = 0;
  const auto t0 = std::chrono::steady_clock::now();  // the loop's wall time, as UseRealTime
  for (auto _ : state) {
    const RouteSet& r = routes[static_cast<size_t>(iter++ % n_sets)];
    engine.Forward(layer.views, hidden.data(), n_tok, r.ids.data(), r.weights.data(), v->k,
                   out.data());
    experts_read += r.distinct;
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
  }
  const std::chrono::duration<double> dt = std::chrono::steady_clock::now() - t0;
  const double bytes = static_cast<double>(experts_read) * static_cast<double>(layer.expert_bytes);
  state.counters["tok/s"] = static_cast<double>(iter * n_tok) / dt.count();
  state.counters["GB/s"] = bytes / dt.count() * 1e-9;
  state.counters["bw_frac"] = bytes / dt.count() / ctx->read_bw[threads];
  state.counters["MB/iter"] = bytes / static_cast<double>(iter) * 1e-6;
  state.counters["experts"] = static_cast<double>(experts_read) / static_cast<double>(iter);
  // Label: types the tier's kernel table lacks (the engine then takes its reference path) and
  // a reduced expert count.
  std::string label;
  const gemv::GemvKernels& k = gemv::KernelsFor(ctx->tier);
  for (GgmlType t : {v->gate_up, v->down}) {
    if (k.For(t) == nullptr) label += std::string("no ") + TypeName(t) + " kernel; ";
  }
  if (layer.experts < v->experts) label += "E=" + std::to_string(layer.experts);
  state.SetLabel(label);
}

void RegisterAll(Context* ctx) {
  for (const Variant& v : kVariants) {
    for (int64_t n_tok : kTokens) {
      for (int threads : kThreads) {
        const std::string name = std::string("moe/") + v.name + "/" +
                                 (n_tok == 1 ? "decode" : "prefill:" + std::to_string(n_tok)) +
                                 "/threads:" + std::to_string(threads);
        benchmark::RegisterBenchmark(name.c_str(), BM_MoeLayer, ctx, &v, n_tok, threads)
            ->UseRealTime();
      }
    }
  }
}

// The read bandwidth per thread count, before any layer is built (the probe's 1 GiB and a
// 7 GB layer are never allocated together).
void MeasureBandwidths(Context* ctx) {
  for (int threads : kThreads) {
    const ReadBandwidth bw = MeasureReadBandwidth(threads, ProbeOptionsFromEnv());
    ctx->read_bw[threads] = bw.gbps * 1e9;
    char line[128];
    std::snprintf(line, sizeof(line), "%.1f GB/s (probe, %lld MiB, median; min %.1f max %.1f)",
                  bw.gbps, static_cast<long long>(bw.bytes_per_pass >> 20), bw.min_gbps,
                  bw.max_gbps);
    std::fprintf(stderr, "read bandwidth, %d thread(s): %s\n", threads, line);
    benchmark::AddCustomContext("read_bw_" + std::to_string(threads) + "t", line);
  }
}

}  // namespace
}  // namespace moesplit::bench

int main(int argc, char** argv) {
  std::vector<std::vector<char>> storage;
  std::vector<char*> args = moesplit::bench::WithDefaultMinTime(&argc, argv, 0.5, &storage);
  benchmark::Initialize(&argc, args.data());
  if (benchmark::ReportUnrecognizedArguments(argc, args.data())) return 1;

  moesplit::bench::Context ctx;
  const std::vector<moesplit::cpu::IsaTier> tiers = moesplit::bench::RunnableTiers();
  ctx.tier = tiers.back();  // the best tier this CPU runs under MOESPLIT_MAX_ISA
  benchmark::AddCustomContext("isa_tier", std::string(moesplit::cpu::IsaTierName(ctx.tier)));
  moesplit::bench::MeasureBandwidths(&ctx);
  moesplit::bench::RegisterAll(&ctx);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
