// Single-thread GEMV and GEMM throughput for every weight type of the kernel table
// (gemv::KernelsFor(tier).For(type) != nullptr) at every ISA tier this CPU runs.
//
// GEMV, one token, at the routed-expert shapes (rows x K, skipped when the type's block size does
// not divide K, e.g. K-quants at K = 1408 = 5.5 x 256):
//   2048 x 7168  DeepSeek-V3 gate/up     7168 x 2048  V3 down
//   1408 x 2048  V2-Lite gate/up         2048 x 1408  V2-Lite down
// each in two memory modes:
//   cold  the matrix is one of `copies` identical copies spanning >= 256 MiB (8x the 32 MiB L3)
//         and each iteration takes the next, so the weights stream from DRAM as in decode
//         (V3 gate at Q4_K: 2048 x 7168 x 4.5 / 8 = 8.26 MB, 33 copies);
//   hot   the same matrix every iteration: L2/L3-resident when it fits, the kernel's compute rate.
// GEMM, n_tok = 2, 4, 8, 16, 24, 64, 256 tokens (24: the AMX tier's 16-token tile + an 8-token
// rest), on 256 x 7168 (one 256-row block of a V3 gate; hot), 256 x 2048 (V2-Lite gate / up) and
// 256 x 1408 (V2-Lite down): the prefill tile, compute-bound.
//
// The repacked layouts (q4_K_r16, q5_K_r16, q6_K_r16, q8_0_r16, q5_0_r16, q4_0_r16: 16-row groups,
// built at load by the expert store) run where the tier has its own tiles.
//
// MLA's absorbed decode over one chunk of the latent cache (forward_mla.cc: 16 heads, the
// ds-v2-lite count, against 512 positions of 576-value f32 rows, 1.2 MB: L2/L3), per tier:
//   mla/scores_gemm  the scores as the F32 GEMM computes them (weights = the cache rows, the 16
//                    queries as tokens: its dot form), mla/row_scores  the same by
//                    GemvKernels::row_scores, mla/row_mix  p C (512 of the 576 values) by row_mix;
//                    hot (the same rows each time) and cold (copies spanning 256 MiB: from DRAM).
//
// Counters: GB/s = weight bytes read / s (1e9), GFLOP/s = 2 * rows * K * n_tok / s, bw_frac =
// (weight bytes / s) / (1-thread read bandwidth of the probe, measured once at start-up and shown
// in the context header as read_bw_1t). Real time. Default MinTime 0.5 s
// (--benchmark_min_time overrides).
#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "bench/bandwidth.h"
#include "bench/bench_common.h"
#include "core/base/dtype.h"
#include "cpu_kernels/cpu_features.h"
#include "cpu_kernels/gemv/gemv.h"
#include "cpu_kernels/quant/quant.h"
#include "cpu_kernels/quant/repack.h"

namespace moesplit::bench {
namespace {

struct Shape {
  int64_t rows;  // M: weight rows (outputs)
  int64_t k;     // K: values per row
};
constexpr Shape kGemvShapes[] = {{2048, 7168}, {7168, 2048}, {1408, 2048}, {2048, 1408}};
// GEMM: one 256-row block of a V3 gate (K = 7168), of a V2-Lite gate / up (K = 2048) and of a
// V2-Lite down projection (K = 1408, where the fused path's down tasks run 256-row blocks).
constexpr Shape kGemmShapes[] = {{256, 7168}, {256, 2048}, {256, 1408}};
constexpr int64_t kGemmTokens[] = {2, 4, 8, 16, 24, 64, 256};
// F32 x F32 at the expanded MLA attention's shapes, 16 tokens (a token block): scores (2048
// positions x K = 192 = nope + rope) and softmax x values (128 = v rows x K = 2048 positions);
// run by the F32 kernel and, on the amx tier, by GemvKernels::f32_gemm_bf16x3 ("f32_bf16x3").
constexpr Shape kAttentionShapes[] = {{2048, 192}, {128, 2048}};
constexpr int64_t kColdBytes = int64_t{256} << 20;  // cold copies span at least this
constexpr int64_t kPatternRows = 64;                // distinct quantized rows; the rest are copies

// One weight matrix of `type`, [copies x rows x row_bytes] bytes: copy c starts at
// data + c * matrix_bytes.
struct WeightSet {
  GgmlType type = GgmlType::kF32;
  Shape shape{};
  int64_t copies = 0;
  int64_t row_bytes = 0;
  int64_t matrix_bytes = 0;  // rows * row_bytes
  LargeBuffer data;
};

// Google Benchmark calls a benchmark function several times (growing iteration counts), so the
// weights are built once per (type, shape, copies) and kept until another set is asked for.
class WeightCache {
 public:
  const WeightSet& Get(GgmlType type, Shape shape, int64_t copies);

 private:
  std::unique_ptr<WeightSet> set_;
};

const WeightSet& WeightCache::Get(GgmlType type, Shape shape, int64_t copies) {
  if (set_ && set_->type == type && set_->shape.rows == shape.rows && set_->shape.k == shape.k &&
      set_->copies == copies) {
    return *set_;
  }
  set_.reset();  // free the old set before allocating the new one
  auto s = std::make_unique<WeightSet>();
  s->type = type;
  s->shape = shape;
  s->copies = copies;
  s->row_bytes = RowBytes(type, shape.k);
  s->matrix_bytes = s->row_bytes * shape.rows;
  s->data = LargeBuffer(static_cast<size_t>(s->matrix_bytes * copies));
  // Quantize kPatternRows random rows, repeat them down the matrix, then copy the matrix: the
  // kernels' speed does not depend on the values, and this keeps set-up to a memcpy. Repacked
  // layouts: the matrix is built in the file type, then repacked (as the expert store does).
  const bool repacked = RowGroup(type) > 1;
  const GgmlType file_type = quant::UnpackedType(type);
  const int64_t file_row_bytes = RowBytes(file_type, shape.k);
  const std::vector<float> wf = NormalValues(kPatternRows * shape.k, 1, 0.02f);  // [64 x K]
  std::vector<uint8_t> pattern(static_cast<size_t>(kPatternRows * file_row_bytes));
  QuantizeRowsForBench(file_type, wf.data(), kPatternRows, shape.k, pattern.data());
  std::vector<uint8_t> file_rows;  // [rows x file_row_bytes] when repacking
  if (repacked) file_rows.resize(static_cast<size_t>(shape.rows * file_row_bytes));
  uint8_t* dst = repacked ? file_rows.data() : s->data.data();
  for (int64_t r = 0; r < shape.rows; ++r) {
    std::memcpy(dst + r * file_row_bytes, pattern.data() + (r % kPatternRows) * file_row_bytes,
                static_cast<size_t>(file_row_bytes));
  }
  if (repacked) {
    quant::RepackRows(file_type, file_rows.data(), static_cast<size_t>(file_row_bytes), shape.rows,
                      shape.k, s->data.data());
  }
  for (int64_t c = 1; c < copies; ++c) {
    std::memcpy(s->data.data() + c * s->matrix_bytes, s->data.data(),
                static_cast<size_t>(s->matrix_bytes));
  }
  set_ = std::move(s);
  return *set_;
}

struct Context {
  double read_bw_1t = 0;  // bytes/s, 1 thread, probe median
  gemv::DecodeRead read = gemv::DecodeRead::kPrefetched;  // BenchDecodeRead(), once
  WeightCache weights;
};

// n_tok activation rows of K values in the type's activation format, rows a_stride bytes apart
// (the row bytes rounded up to 64): [n_tok x a_stride] bytes, 8-byte aligned.
struct Activations {
  std::vector<uint64_t> data;
  size_t stride = 0;
};

Activations MakeActivations(const gemv::GemvKernels& kernels, GgmlType act_type, int64_t n_tok,
                            int64_t k) {
  Activations a;
  a.stride = static_cast<size_t>((RowBytes(act_type, k) + 63) / 64 * 64);
  a.data.resize(a.stride * static_cast<size_t>(n_tok) / 8);
  const std::vector<float> x = NormalValues(n_tok * k, 2, 1.0f);  // [n_tok x K]
  auto* base = reinterpret_cast<uint8_t*>(a.data.data());
  const gemv::QuantizeFn quantize = kernels.Quantizer(act_type);
  for (int64_t t = 0; t < n_tok; ++t) {
    if (quantize == nullptr) {  // F32 activations: plain rows
      std::memcpy(base + t * a.stride, x.data() + t * k, static_cast<size_t>(k) * sizeof(float));
    } else {
      quantize(x.data() + t * k, base + t * a.stride, k);
    }
  }
  return a;
}

struct Case {
  cpu::IsaTier tier;
  GgmlType type;
  Shape shape;
  int64_t n_tok;
  bool cold;
  bool bf16x3 = false;  // F32: the tier's f32_gemm_bf16x3 instead of its F32 gemm
};

void BM_Gemm(benchmark::State& state, Context* ctx, Case c) {
  const gemv::GemvKernels& kernels = gemv::KernelsFor(c.tier, ctx->read);
  const gemv::TypeKernels* tk = kernels.For(c.type);
  const int64_t matrix_bytes = RowBytes(c.type, c.shape.k) * c.shape.rows;
  const int64_t copies =
      c.cold ? std::max<int64_t>(2, (kColdBytes + matrix_bytes - 1) / matrix_bytes) : 1;
  const WeightSet& w = ctx->weights.Get(c.type, c.shape, copies);
  const Activations a = MakeActivations(kernels, tk->act_type, c.n_tok, c.shape.k);
  std::vector<float> y(static_cast<size_t>(c.n_tok * c.shape.rows));  // [n_tok x rows]
  int64_t copy = 0;
  const auto t0 = std::chrono::steady_clock::now();  // the loop's wall time, as UseRealTime
  const gemv::GemmFn gemm = c.bf16x3 ? kernels.f32_gemm_bf16x3 : tk->gemm;
  for (auto _ : state) {
    gemm(w.data.data() + copy * w.matrix_bytes, static_cast<size_t>(w.row_bytes), c.shape.rows,
         a.data.data(), a.stride, c.n_tok, c.shape.k, y.data(), c.shape.rows);
    if (++copy == copies) copy = 0;
    benchmark::DoNotOptimize(y.data());
    benchmark::ClobberMemory();
  }
  const std::chrono::duration<double> dt = std::chrono::steady_clock::now() - t0;
  const double iters = static_cast<double>(state.iterations());
  const double bytes_per_s = iters * static_cast<double>(matrix_bytes) / dt.count();
  state.counters["GB/s"] = bytes_per_s * 1e-9;
  state.counters["GFLOP/s"] = iters * 2.0 * c.shape.rows * c.shape.k * c.n_tok / dt.count() * 1e-9;
  state.counters["bw_frac"] = bytes_per_s / ctx->read_bw_1t;
}

enum class MlaOp { kScoresGemm, kRowScores, kRowMix };

void BM_MlaDecode(benchmark::State& state, cpu::IsaTier tier, MlaOp op, bool cold) {
  constexpr int64_t kHeads = 16, kPos = 512, kW = 576, kL = 512;
  const gemv::GemvKernels& kernels = gemv::KernelsFor(tier);
  // [copies x kPos x kW] cache rows: cold, copies spanning kColdBytes, the next one each time.
  const int64_t copies = cold ? kColdBytes / (kPos * kW * 4) : 1;
  std::vector<float> rows = NormalValues(kPos * kW, 3, 1.0f);
  rows.resize(static_cast<size_t>(copies * kPos * kW));
  for (int64_t c = 1; c < copies; ++c) {
    std::copy_n(rows.begin(), kPos * kW, rows.begin() + c * kPos * kW);
  }
  int64_t copy = 0;
  const std::vector<float> q = NormalValues(kHeads * kW, 4, 1.0f);     // [kHeads x kW] queries
  std::vector<float> p = NormalValues(kHeads * kPos, 5, 1.0f / kPos);  // [kHeads x kPos]
  std::vector<float> out(static_cast<size_t>(kHeads * kPos));          // [kHeads x max(kPos, kL)]
  const gemv::GemmFn gemm = kernels.For(GgmlType::kF32)->gemm;
  const auto t0 = std::chrono::steady_clock::now();
  for (auto _ : state) {
    const float* r = rows.data() + copy * kPos * kW;
    if (++copy == copies) copy = 0;
    switch (op) {
      case MlaOp::kScoresGemm:
        gemm(r, kW * sizeof(float), kPos, q.data(), kW * sizeof(float), kHeads, kW, out.data(),
             kPos);
        break;
      case MlaOp::kRowScores:
        kernels.row_scores(q.data(), kW, kHeads, r, kW, kPos, kW, out.data(), kPos);
        break;
      case MlaOp::kRowMix:
        kernels.row_mix(p.data(), kPos, kHeads, r, kW, kPos, kL, out.data(), kL);
        break;
    }
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
  }
  const std::chrono::duration<double> dt = std::chrono::steady_clock::now() - t0;
  const double macs = static_cast<double>(kHeads * kPos) * (op == MlaOp::kRowMix ? kL : kW);
  state.counters["GFLOP/s"] =
      static_cast<double>(state.iterations()) * 2 * macs / dt.count() * 1e-9;
}

void Register(Context* ctx, const Case& c) {
  const std::string shape = std::to_string(c.shape.rows) + "x" + std::to_string(c.shape.k);
  std::string name = std::string(c.n_tok == 1 ? "gemv/" : "gemm/") + TypeName(c.type) +
                     (c.bf16x3 ? "_bf16x3/" : "/") + std::string(cpu::IsaTierName(c.tier)) + "/" +
                     shape + "/";
  name += c.n_tok == 1 ? (c.cold ? "cold" : "hot") : "tok:" + std::to_string(c.n_tok);
  benchmark::RegisterBenchmark(name.c_str(), BM_Gemm, ctx, c)->UseRealTime();
}

// Every (tier, type) the table has: GEMV at each shape whose K the block size divides (cold and
// hot), then GEMM at each token count.
void RegisterAll(Context* ctx) {
  for (cpu::IsaTier tier : RunnableTiers()) {
    const gemv::GemvKernels& kernels = gemv::KernelsFor(tier, ctx->read);
    std::string listed;
    for (uint32_t id = 0; id < kTypeIdLimit; ++id) {
      const auto type = static_cast<GgmlType>(id);
      // Repacked layouts: only where the tier has its own tiles (the others unpack per call).
      const bool repacked = id >= kGgmlTypeIdLimit;
      if (repacked ? (kernels.For(type) == nullptr || !kernels.native_layout[id])
                   : (FindTypeTraits(id) == nullptr || kernels.For(type) == nullptr)) {
        continue;
      }
      if (!repacked && !CanBuildBenchWeights(type)) {
        std::fprintf(stderr, "skipping %s: no way to build its weights\n",
                     TypeName(type));
        continue;
      }
      listed += std::string(" ") + TypeName(type);
      const int64_t block = GetTypeTraits(type).block_size;
      for (const Shape& s : kGemvShapes) {
        if (s.k % block != 0) continue;
        for (bool cold : {true, false}) Register(ctx, {tier, type, s, 1, cold});
      }
      for (const Shape& s : kGemmShapes) {
        if (s.k % block != 0) continue;
        for (int64_t n_tok : kGemmTokens) Register(ctx, {tier, type, s, n_tok, false});
      }
      if (type != GgmlType::kF32) continue;
      for (const Shape& s : kAttentionShapes) {
        Register(ctx, {tier, type, s, 16, false});
        if (kernels.f32_gemm_bf16x3 != nullptr) Register(ctx, {tier, type, s, 16, false, true});
      }
      if (kernels.f32_gemm_bf16x3 == nullptr) continue;
      for (const Shape& s : kGemmShapes) {
        for (int64_t n_tok : kGemmTokens) Register(ctx, {tier, type, s, n_tok, false, true});
      }
    }
    std::fprintf(stderr, "tier %s: kernels for%s\n", std::string(cpu::IsaTierName(tier)).c_str(),
                 listed.c_str());
    const std::string t(cpu::IsaTierName(tier));
    for (const auto& [op, name] :
         {std::pair{MlaOp::kScoresGemm, "scores_gemm"}, std::pair{MlaOp::kRowScores, "row_scores"},
          std::pair{MlaOp::kRowMix, "row_mix"}}) {
      for (const bool cold : {false, true}) {
        benchmark::RegisterBenchmark(
            ("mla/" + std::string(name) + "/" + t + "/16x512x576/" + (cold ? "cold" : "hot"))
                .c_str(),
            BM_MlaDecode, tier, op, cold)
            ->UseRealTime();
      }
    }
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
  const moesplit::numa::ReadResult bw =
      moesplit::bench::MeasureReadBandwidth(1, moesplit::bench::ProbeOptionsFromEnv());
  ctx.read_bw_1t = bw.gbps * 1e9;
  char line[128];
  std::snprintf(line, sizeof(line), "%.1f GB/s (%s, 1 thread, %lld MiB, median; min %.1f max %.1f)",
                bw.gbps, moesplit::numa::ReadKernelName(bw.kernel),
                static_cast<long long>(bw.bytes_per_pass >> 20), bw.min_gbps, bw.max_gbps);
  std::fprintf(stderr, "read bandwidth, 1 thread: %s\n", line);
  benchmark::AddCustomContext("read_bw_1t", line);
  ctx.read = moesplit::bench::BenchDecodeRead();
  benchmark::AddCustomContext("decode_read", std::string(moesplit::gemv::DecodeReadName(ctx.read)));

  moesplit::bench::RegisterAll(&ctx);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
