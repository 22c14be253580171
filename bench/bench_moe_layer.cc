// One whole routed-MoE layer, moe::ExpertEngine::Forward, at the real shapes:
//
//   model    D     F     experts  top-k  variants (gate/up - down)
//   v3       7168  2048  256      8      q4_K-q6_K, q4_K-q4_K (Q4_K_M gives about half of the
//                                        layers a Q6_K down projection, the others Q4_K)
//   v2lite   2048  1408  64       6      q4_K-q5_0 (llama.cpp's Q4_K_M fallback: 1408 is no
//                                        multiple of 256), q4_K-q8_0
//   v3 / v2lite iq4_xs-iq4_xs / iq4_xs-iq4_nl (IQ4_XS files; repacked only)
//   v3       q5_K-q5_K, q5_K-q6_K (Q5_K_M); repacked only
//   v3       q2_K-q2_K, q2_K-q3_K (UD-Q2_K_XL-like), q3_K-q3_K, q3_K-q4_K (Q3_K_M); repacked only
//   v3       iq2_xxs-iq2_xxs, iq1_m-iq1_m, iq1_s-iq1_s, iq1_s-iq2_xxs, iq3_xxs-iq3_xxs,
//            iq3_s-iq3_s, iq2_xs-iq2_xs, iq2_s-iq2_s (each also repacked)
//   v3 mxfp4-mxfp4 (MXFP4_MOE files), v3 / v2lite mxfp4-mxfp4/repacked
//   v2lite   iq1_s-q8_0/repacked (the planner's IQ1_S validation file)
// each in the file layout, and ".../repacked" (all four) as the engine stores
// them by default: repacked at load into 16-row groups where the tier has the layouts
// (gemv::LoadLayout: q4_K_r16, q6_K_r16, q5_0_r16, q8_0_r16 on AVX-512 VNNI; q2_K_r16,
// q3_K_r16, q4_0_r16, q5_0_r16, iq4_nl_r16 and iq4_xs_r16 on AVX2).
//
// Expert bytes (gate + up + down of one expert): v3 q4_K-q6_K = 2 x 2048 x 4032 + 7168 x 1680
// = 28.56 MB (x 256 = 7.31 GB); v3 q4_K-q4_K = 3 x 8.26 MB = 24.77 MB (6.34 GB); v3 q2_K-q2_K
// = 3 x 2048 x 28 x 84 = 14.45 MB (3.70 GB); iq2_xxs-iq2_xxs = 3 x 2048 x 28 x 66 = 11.35 MB;
// iq1_m-iq1_m (56 B per 256) = 9.63 MB; iq1_s-iq1_s (50 B) = 8.60 MB; iq3_xxs-iq3_xxs (98 B)
// = 16.86 MB; iq3_s-iq3_s (110 B) = 18.92 MB; iq2_xs-iq2_xs (74 B) = 12.73 MB; iq2_s-iq2_s
// (82 B) = 14.11 MB; q3_K-q3_K repacked (114 B per 256) = 19.61 MB; q5_K-q5_K (176 B) =
// 3 x 2048 x 28 x 176 = 30.28 MB; v2lite
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
// / s (1e9); probe = read bandwidth (GB/s) of the probe with the same thread count, measured
// right before and right after this benchmark's timed loop (mean of the two medians);
// bw_frac = GB/s / probe; GB/s_med = the median over iterations of (that iteration's expert bytes
// / its time), bw_frac_med = GB/s_med / probe. Why a median next to the mean: the probe is a
// median over passes (bandwidth.h), so a host hiccup (both vCPUs stalled for 0.3-35 ms: seen in
// per-iteration timings on the Intel VM, 2026-11-24 (k): V3 decode, 2 threads, every route set's
// median 6.5-6.7 ms, its maximum 6.8-41 ms) lowers the mean GB/s but not the probe; the median
// compares like with like, and the mean stays printed beside it. Why adjacent probes: on a shared
// VM the bandwidth drifts by 10% and more within minutes (1-thread probe 16.1-18.1 GB/s over one
// 8-minute session), so a fraction against the start-up probe (still in the context header) moved
// as much as the kernels did. Decode layers (1 token) run every iteration on a new route set, so
// their loop mixes DRAM streams the way decode does. Real time; default MinTime 0.5 s.
//
// Memory: the layer is built lazily by the first benchmark that needs it and freed when a
// benchmark of another variant starts. MOESPLIT_BENCH_EXPERTS=N caps the experts built (routing
// then spans N); without it all experts are built if MemAvailable leaves 2 GiB spare, else as
// many as fit (printed). The adjacent probes' 1 GiB buffer comes out of that spare.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "bench/bandwidth.h"
#include "bench/bench_common.h"
#include "bench/moe_layer_setup.h"
#include "core/base/dtype.h"
#include "cpu_kernels/cpu_features.h"
#include "cpu_kernels/gemv/gemv.h"
#include "moe/expert_engine.h"
#include "numa/thread_pool.h"

namespace moesplit::bench {
namespace {

constexpr Variant kVariants[] = {
    {"v3/q4_K-q6_K", 7168, 2048, 256, 8, GgmlType::kQ4_K, GgmlType::kQ6_K},
    {"v3/q4_K-q4_K", 7168, 2048, 256, 8, GgmlType::kQ4_K, GgmlType::kQ4_K},
    {"v2lite/q4_K-q5_0", 2048, 1408, 64, 6, GgmlType::kQ4_K, GgmlType::kQ5_0},
    {"v2lite/q4_K-q8_0", 2048, 1408, 64, 6, GgmlType::kQ4_K, GgmlType::kQ8_0},
    // As the engine stores them by default (repacked at load where the tier has the layouts).
    {"v3/q4_K-q6_K/repacked", 7168, 2048, 256, 8, GgmlType::kQ4_K, GgmlType::kQ6_K, true},
    {"v3/q4_K-q4_K/repacked", 7168, 2048, 256, 8, GgmlType::kQ4_K, GgmlType::kQ4_K, true},
    {"v2lite/q4_K-q5_0/repacked", 2048, 1408, 64, 6, GgmlType::kQ4_K, GgmlType::kQ5_0, true},
    {"v2lite/q4_K-q8_0/repacked", 2048, 1408, 64, 6, GgmlType::kQ4_K, GgmlType::kQ8_0, true},
    // Q5_K_M files (llama-quantize Q5_K_M: experts Q5_K, half the down projections Q6_K),
    // repacked to q5_K_r16 / q6_K_r16.
    {"v3/q5_K-q5_K/repacked", 7168, 2048, 256, 8, GgmlType::kQ5_K, GgmlType::kQ5_K, true},
    {"v3/q5_K-q6_K/repacked", 7168, 2048, 256, 8, GgmlType::kQ5_K, GgmlType::kQ6_K, true},
    // IQ4_XS files (llama-quantize IQ4_XS: experts IQ4_XS; V2-Lite's 1408-wide down rows fall
    // back to IQ4_NL), repacked at load to iq4_xs_r16 / iq4_nl_r16 on AVX-512 VNNI.
    {"v3/iq4_xs-iq4_xs/repacked", 7168, 2048, 256, 8, GgmlType::kIQ4_XS, GgmlType::kIQ4_XS, true},
    {"v2lite/iq4_xs-iq4_nl/repacked", 2048, 1408, 64, 6, GgmlType::kIQ4_XS, GgmlType::kIQ4_NL,
     true},
    // Low-bit files, repacked at load to q2_K_r16 / q3_K_r16 (q4_K_r16) on AVX-512 VNNI:
    // Unsloth UD-Q2_K_XL's experts (Q2_K, in a few layers a Q3_K down projection) and
    // llama-quantize Q3_K_M's (gate / up Q3_K, down Q4_K from layer n / 16 on).
    {"v3/q2_K-q2_K/repacked", 7168, 2048, 256, 8, GgmlType::kQ2_K, GgmlType::kQ2_K, true},
    {"v3/q2_K-q3_K/repacked", 7168, 2048, 256, 8, GgmlType::kQ2_K, GgmlType::kQ3_K, true},
    {"v3/q3_K-q3_K/repacked", 7168, 2048, 256, 8, GgmlType::kQ3_K, GgmlType::kQ3_K, true},
    {"v3/q3_K-q4_K/repacked", 7168, 2048, 256, 8, GgmlType::kQ3_K, GgmlType::kQ4_K, true},
    // Lattice-type experts (Unsloth's UD-IQ2_XXS / UD-IQ1_M / UD-IQ1_S files): the file layout;
    // IQ2_XXS, IQ1_S and IQ1_M also repacked at load to iq2_xxs_r16 / iq1_s_r16 / iq1_m_r16 on
    // AVX-512 VNNI with VBMI and GFNI (as the engine stores them).
    {"v3/iq2_xxs-iq2_xxs", 7168, 2048, 256, 8, GgmlType::kIQ2_XXS, GgmlType::kIQ2_XXS},
    {"v3/iq2_xxs-iq2_xxs/repacked", 7168, 2048, 256, 8, GgmlType::kIQ2_XXS, GgmlType::kIQ2_XXS,
     true},
    {"v3/iq1_m-iq1_m", 7168, 2048, 256, 8, GgmlType::kIQ1_M, GgmlType::kIQ1_M},
    {"v3/iq1_m-iq1_m/repacked", 7168, 2048, 256, 8, GgmlType::kIQ1_M, GgmlType::kIQ1_M, true},
    {"v3/iq1_s-iq1_s", 7168, 2048, 256, 8, GgmlType::kIQ1_S, GgmlType::kIQ1_S},
    {"v3/iq1_s-iq1_s/repacked", 7168, 2048, 256, 8, GgmlType::kIQ1_S, GgmlType::kIQ1_S, true},
    {"v3/iq1_s-iq2_xxs", 7168, 2048, 256, 8, GgmlType::kIQ1_S, GgmlType::kIQ2_XXS},
    {"v3/iq1_s-iq2_xxs/repacked", 7168, 2048, 256, 8, GgmlType::kIQ1_S, GgmlType::kIQ2_XXS, true},
    // The IQ3 / IQ2 lattice types of llama.cpp's IQ3_XXS / IQ3_S / IQ2_XS / IQ2_S mixes (the
    // file layout; each also repacked to its 16-row layout; random codes: no quantizer
    // here).
    {"v3/iq3_xxs-iq3_xxs", 7168, 2048, 256, 8, GgmlType::kIQ3_XXS, GgmlType::kIQ3_XXS},
    {"v3/iq3_xxs-iq3_xxs/repacked", 7168, 2048, 256, 8, GgmlType::kIQ3_XXS, GgmlType::kIQ3_XXS,
     true},
    {"v3/iq3_s-iq3_s", 7168, 2048, 256, 8, GgmlType::kIQ3_S, GgmlType::kIQ3_S},
    {"v3/iq3_s-iq3_s/repacked", 7168, 2048, 256, 8, GgmlType::kIQ3_S, GgmlType::kIQ3_S, true},
    {"v3/iq2_xs-iq2_xs", 7168, 2048, 256, 8, GgmlType::kIQ2_XS, GgmlType::kIQ2_XS},
    {"v3/iq2_xs-iq2_xs/repacked", 7168, 2048, 256, 8, GgmlType::kIQ2_XS, GgmlType::kIQ2_XS, true},
    {"v3/iq2_s-iq2_s", 7168, 2048, 256, 8, GgmlType::kIQ2_S, GgmlType::kIQ2_S},
    {"v3/iq2_s-iq2_s/repacked", 7168, 2048, 256, 8, GgmlType::kIQ2_S, GgmlType::kIQ2_S, true},
    // llama-quantize MXFP4_MOE files: every routed expert MXFP4, in the file layout and repacked
    // at load to mxfp4_r16 on AVX-512 VNNI (as the engine stores them).
    {"v3/mxfp4-mxfp4", 7168, 2048, 256, 8, GgmlType::kMXFP4, GgmlType::kMXFP4},
    {"v3/mxfp4-mxfp4/repacked", 7168, 2048, 256, 8, GgmlType::kMXFP4, GgmlType::kMXFP4, true},
    {"v2lite/mxfp4-mxfp4/repacked", 2048, 1408, 64, 6, GgmlType::kMXFP4, GgmlType::kMXFP4, true},
    // The planner's IQ1_S validation file (scripts/iq_experts_gguf.py on a Q8_0 ds-v2-lite):
    // gate / up IQ1_S, down Q8_0 (1408 is no multiple of 256).
    {"v2lite/iq1_s-q8_0/repacked", 2048, 1408, 64, 6, GgmlType::kIQ1_S, GgmlType::kQ8_0, true},
};
constexpr int64_t kTokens[] = {1, 64, 512};  // decode, prefill 64, prefill 512
constexpr int kThreads[] = {1, 2};

struct Context {
  cpu::IsaTier tier = cpu::IsaTier::kScalar;
  gemv::DecodeRead read = gemv::DecodeRead::kPrefetched;  // BenchDecodeRead(), once
  LayerCache layers;
};

void BM_MoeLayer(benchmark::State& state, Context* ctx, const Variant* v, int64_t n_tok,
                 int threads) {
  const ExpertLayer& layer = ctx->layers.Get(*v, gemv::KernelsFor(ctx->tier, ctx->read));
  const int n_sets = n_tok == 1 ? 64 : 4;
  std::vector<RouteSet> routes;  // [n_sets]
  for (int i = 0; i < n_sets; ++i) {
    routes.push_back(MakeRoutes(layer.experts, v->k, n_tok, 100 + i));
  }
  const std::vector<float> hidden = NormalValues(n_tok * v->d, 7, 1.0f);  // [n_tok x D]
  std::vector<float> out(static_cast<size_t>(n_tok * v->d));              // [n_tok x D]
  numa::ThreadPool pool(threads);
  moe::ExpertEngine engine(&pool, &gemv::KernelsFor(ctx->tier, ctx->read));

  const double probe_before = MeasureReadBandwidth(threads, ProbeOptionsFromEnv()).gbps;
  int64_t iter = 0, experts_read = 0;
  std::vector<double> iter_gbps;  // [iterations] expert bytes of that iteration / its time
  iter_gbps.reserve(4096);
  using Clock = std::chrono::steady_clock;
  const Clock::time_point t0 = Clock::now();  // the loop's wall time, as UseRealTime
  for (auto _ : state) {
    const RouteSet& r = routes[static_cast<size_t>(iter++ % n_sets)];
    const Clock::time_point a = Clock::now();
    engine.Forward(layer.views, hidden.data(), n_tok, r.ids.data(), r.weights.data(), v->k,
                   out.data());
    const std::chrono::duration<double> it = Clock::now() - a;
    iter_gbps.push_back(static_cast<double>(r.distinct) * static_cast<double>(layer.expert_bytes) /
                        it.count() * 1e-9);
    experts_read += r.distinct;
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
  }
  const std::chrono::duration<double> dt = Clock::now() - t0;
  const double probe =
      0.5 * (probe_before + MeasureReadBandwidth(threads, ProbeOptionsFromEnv()).gbps);
  const double bytes = static_cast<double>(experts_read) * static_cast<double>(layer.expert_bytes);
  state.counters["tok/s"] = static_cast<double>(iter * n_tok) / dt.count();
  state.counters["GB/s"] = bytes / dt.count() * 1e-9;
  state.counters["probe"] = probe;
  state.counters["bw_frac"] = bytes / dt.count() * 1e-9 / probe;
  if (!iter_gbps.empty()) {
    std::nth_element(iter_gbps.begin(), iter_gbps.begin() + iter_gbps.size() / 2, iter_gbps.end());
    const double median = iter_gbps[iter_gbps.size() / 2];
    state.counters["GB/s_med"] = median;
    state.counters["bw_frac_med"] = median / probe;
  }
  state.counters["MB/iter"] = bytes / static_cast<double>(iter) * 1e-6;
  state.counters["experts"] = static_cast<double>(experts_read) / static_cast<double>(iter);
  // Label: types the tier's kernel table lacks (the engine then takes its reference path) and
  // a reduced expert count.
  std::string label;
  const gemv::GemvKernels& k = gemv::KernelsFor(ctx->tier, ctx->read);
  for (GgmlType t : {layer.gate_up_type, layer.down_type}) {
    if (k.For(t) == nullptr) label += std::string("no ") + TypeName(t) + " kernel; ";
  }
  if (v->repack)
    label += std::string(TypeName(layer.gate_up_type)) + "-" + TypeName(layer.down_type) + " ";
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

// The read bandwidth per thread count at start-up, for the context header (bw_frac uses the
// probes adjacent to each benchmark).
void MeasureBandwidths() {
  for (int threads : kThreads) {
    const numa::ReadResult bw = MeasureReadBandwidth(threads, ProbeOptionsFromEnv());
    char line[128];
    std::snprintf(line, sizeof(line), "%.1f GB/s (%s, %lld MiB, median; min %.1f max %.1f)",
                  bw.gbps, numa::ReadKernelName(bw.kernel),
                  static_cast<long long>(bw.bytes_per_pass >> 20), bw.min_gbps, bw.max_gbps);
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
  ctx.read = moesplit::bench::BenchDecodeRead();
  benchmark::AddCustomContext("decode_read", std::string(moesplit::gemv::DecodeReadName(ctx.read)));
  moesplit::bench::MeasureBandwidths();
  moesplit::bench::RegisterAll(&ctx);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
