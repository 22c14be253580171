// Throughput of the scalar reference DequantizeRow / QuantizeRow per type, on a buffer of
// 256 rows x 4096 values (1 Mi values: 4 MiB of f32, 0.56 MiB of Q4_K). These are the
// correctness twins, not the production kernels: the numbers set the baseline every SIMD tier is
// compared with. Reported: bytes/s of quantized data and values/s.
#include <benchmark/benchmark.h>

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "core/base/dtype.h"
#include "cpu_kernels/quant/quant.h"

namespace moesplit::quant {
namespace {

constexpr int64_t kRowLen = 4096;
constexpr int64_t kRows = 256;
constexpr int64_t kValues = kRowLen * kRows;

std::vector<float> Inputs() {
  std::mt19937 rng(42);
  std::normal_distribution<float> dist(0.0f, 0.02f);
  std::vector<float> v(kValues);
  for (float& x : v) x = dist(rng);
  return v;
}

void SetCounters(benchmark::State& state, GgmlType t) {
  const int64_t iters = static_cast<int64_t>(state.iterations());
  state.SetBytesProcessed(iters * RowBytes(t, kRowLen) * kRows);
  state.SetItemsProcessed(iters * kValues);  // items = values
}

void BM_Dequantize(benchmark::State& state, GgmlType t) {
  const std::vector<float> in = Inputs();
  const int64_t row_bytes = RowBytes(t, kRowLen);
  std::vector<uint8_t> q(row_bytes * kRows);
  for (int64_t r = 0; r < kRows; ++r) {
    QuantizeRow(t, in.data() + r * kRowLen, q.data() + r * row_bytes, kRowLen);
  }
  std::vector<float> out(kValues);
  for (auto _ : state) {
    for (int64_t r = 0; r < kRows; ++r) {
      DequantizeRow(t, q.data() + r * row_bytes, out.data() + r * kRowLen, kRowLen);
    }
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
  }
  SetCounters(state, t);
}

void BM_Quantize(benchmark::State& state, GgmlType t) {
  const std::vector<float> in = Inputs();
  const int64_t row_bytes = RowBytes(t, kRowLen);
  std::vector<uint8_t> q(row_bytes * kRows);
  for (auto _ : state) {
    for (int64_t r = 0; r < kRows; ++r) {
      QuantizeRow(t, in.data() + r * kRowLen, q.data() + r * row_bytes, kRowLen);
    }
    benchmark::DoNotOptimize(q.data());
    benchmark::ClobberMemory();
  }
  SetCounters(state, t);
}

// Every type with a reference (de)quantizer.
constexpr GgmlType kTypes[] = {GgmlType::kF32,  GgmlType::kF16,  GgmlType::kBF16, GgmlType::kQ4_0,
                               GgmlType::kQ4_1, GgmlType::kQ5_0, GgmlType::kQ5_1, GgmlType::kQ8_0,
                               GgmlType::kQ2_K, GgmlType::kQ3_K, GgmlType::kQ4_K, GgmlType::kQ5_K,
                               GgmlType::kQ6_K, GgmlType::kQ8_K};

// Named "Dequantize/q4_K" etc. rather than by numeric type id.
void RegisterAll() {
  for (GgmlType t : kTypes) {
    const std::string name = TypeName(t);
    benchmark::RegisterBenchmark(("Dequantize/" + name).c_str(), BM_Dequantize, t)
        ->Unit(benchmark::kMillisecond);
  }
  for (GgmlType t : kTypes) {
    const std::string name = TypeName(t);
    benchmark::RegisterBenchmark(("Quantize/" + name).c_str(), BM_Quantize, t)
        ->Unit(benchmark::kMillisecond);
  }
}

}  // namespace
}  // namespace moesplit::quant

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  moesplit::quant::RegisterAll();
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
