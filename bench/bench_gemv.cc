// Single-thread GEMV throughput per ISA tier and weight type, on the DeepSeek-V3 routed-expert
// down-projection shape: W is [7168 rows, 2048 values] (hidden 7168 x expert width 2048), times
// one activation row of 2048 values quantized once.
//
//   /rows:256   one row-block (256 x 2048): Q4_K 288 KiB, Q8_0 544 KiB; stays in L2, so this is
//               the kernel's compute rate
//   /rows:7168  the whole matrix: Q4_K 7.9 MiB, Q8_0 14.9 MiB; streams from L3 / DRAM
//
// Reported: bytes/s = weight bytes read per second (the number that matters for decode), plus
// items/s = rows per second. Tiers this CPU lacks are reported as skipped.
#include <benchmark/benchmark.h>

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "core/base/dtype.h"
#include "cpu_kernels/cpu_features.h"
#include "cpu_kernels/gemv/gemv.h"
#include "cpu_kernels/quant/quant.h"

namespace moesplit::gemv {
namespace {

constexpr int64_t kN = 2048;        // values per row (expert width)
constexpr int64_t kMaxRows = 7168;  // rows of the full matrix (hidden size)

std::vector<float> RandomValues(int64_t count, uint32_t seed, float scale) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, scale);
  std::vector<float> v(count);  // [count]
  for (float& x : v) x = dist(rng);
  return v;
}

void BM_Gemv(benchmark::State& state, cpu::IsaTier tier, GgmlType wtype) {
  const cpu::IsaTier best = cpu::BestTier(cpu::DetectCpuFeatures());
  if (static_cast<int>(tier) > static_cast<int>(best)) {
    state.SkipWithError("this CPU lacks the ISA tier");
    return;
  }
  const int64_t rows = state.range(0);
  const GemvKernels& k = KernelsFor(tier);
  const int64_t row_bytes = RowBytes(wtype, kN);
  // Weights: [rows, row_bytes] bytes. Rows are quantized from one random pattern per 64 rows to
  // keep set-up fast; the data do not change the kernel's speed.
  std::vector<uint8_t> w(row_bytes * rows);
  const std::vector<float> wf = RandomValues(kN * 64, 1, 0.02f);  // [64, kN]
  for (int64_t r = 0; r < rows; ++r) {
    quant::QuantizeRow(wtype, wf.data() + (r % 64) * kN, w.data() + r * row_bytes, kN);
  }
  GgmlType atype;
  if (!ActivationTypeFor(wtype, &atype)) {
    state.SkipWithError("no kernel for the weight type");
    return;
  }
  std::vector<uint32_t> a(RowBytes(atype, kN) / 4 + 1);  // activation blocks, 4-byte aligned
  const std::vector<float> af = RandomValues(kN, 2, 1.0f);
  k.Quantizer(atype)(af.data(), a.data(), kN);
  std::vector<float> y(rows);  // [rows]
  for (auto _ : state) {
    Gemv(k, wtype, w.data(), row_bytes, rows, kN, a.data(), y.data());
    benchmark::DoNotOptimize(y.data());
    benchmark::ClobberMemory();
  }
  const int64_t iters = static_cast<int64_t>(state.iterations());
  state.SetBytesProcessed(iters * row_bytes * rows);
  state.SetItemsProcessed(iters * rows);
}

void RegisterAll() {
  for (GgmlType wtype : {GgmlType::kQ4_K, GgmlType::kQ8_0}) {
    for (int t = 0; t < cpu::kNumIsaTiers; ++t) {
      const auto tier = static_cast<cpu::IsaTier>(t);
      const std::string name =
          std::string("BM_Gemv/") + TypeName(wtype) + "/" + std::string(cpu::IsaTierName(tier));
      benchmark::RegisterBenchmark(name.c_str(), BM_Gemv, tier, wtype)
          ->ArgName("rows")
          ->Arg(256)
          ->Arg(kMaxRows);
    }
  }
}

}  // namespace
}  // namespace moesplit::gemv

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  moesplit::gemv::RegisterAll();
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
