// oneDNN's matmul against moesplit's gemm kernels on the dense / MLA projections of CPU-only
// prefill and decode: y [M x N] f32 = x [M x K] f32 . W^T, W [N rows x K].
//
//   shapes  DeepSeek-V2-Lite: attn_q 2048 -> 3072, kv_a_mqa 2048 -> 576, attn_output 2048 -> 2048,
//           dense ffn 2048 -> 10944;  DeepSeek-V3: q_a 7168 -> 1536, q_b 1536 -> 24576
//   tokens  M = 1 (decode), 64, 512 (prefill)
//   ours    the kernel table's gemm at the best ISA tier for BF16, F16, F32 (f32 activations) and
//           Q8_0, Q4_K (activations quantized inside the timed loop, on the calling thread).
//           1 thread: one gemm call over all N rows. 2 threads: rows split in two halves, the
//           second half on a spinning helper thread started once (no thread start-up per call).
//   oneDNN  matmul primitive, f32 src x {f32, bf16} weights -> f32 dst, weights reordered once
//           into the layout the primitive asks for (format_tag::any); threads via OpenMP
//           (omp_set_num_threads before the primitive is created). Where oneDNN has no f32 x bf16
//           kernel, the bf16 variant converts the activations to bf16 inside the timed loop.
//
// Reported per benchmark: GFLOPs (2 M N K per call, as a rate: GFLOP/s) and wbytes (weight bytes
// per call, as a rate). Built only with -DMOESPLIT_BENCH_ONEDNN=ON (needs libdnnl-dev).
// Example: build/bench/bench_onednn --benchmark_filter='kv_a_mqa' --benchmark_min_time=0.2
#include <benchmark/benchmark.h>
#include <omp.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <oneapi/dnnl/dnnl.hpp>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "core/base/dtype.h"
#include "core/base/random_values.h"
#include "cpu_kernels/cpu_features.h"
#include "cpu_kernels/gemv/gemv.h"
#include "cpu_kernels/quant/quant.h"

namespace moesplit::bench {
namespace {

struct Proj {
  const char* name;
  int64_t k;  // input width (values per weight row)
  int64_t n;  // output width (weight rows)
};
constexpr Proj kProjs[] = {
    {"v2lite_attn_q", 2048, 3072},
    {"v2lite_kv_a_mqa", 2048, 576},
    {"v2lite_attn_output", 2048, 2048},
    {"v2lite_dense_ffn", 2048, 10944},
    {"v3_q_a", 7168, 1536},
    {"v3_q_b", 1536, 24576},
};
constexpr int64_t kTokens[] = {1, 64, 512};
constexpr int kPatternRows = 64;  // distinct random rows, repeated (set-up speed only)

// [n rows, k] f32 weights: kPatternRows random rows repeated.
std::vector<float> WeightsF32(int64_t n, int64_t k) {
  const std::vector<float> pattern = NormalValues(kPatternRows * k, 1, 0.02f);  // [64, k]
  std::vector<float> w(n * k);                                                  // [n, k]
  for (int64_t r = 0; r < n; ++r) {
    std::copy_n(pattern.begin() + (r % kPatternRows) * k, k, w.begin() + r * k);
  }
  return w;
}

void SetCounters(benchmark::State& state, int64_t m, const Proj& p, int64_t weight_bytes) {
  const double iters = static_cast<double>(state.iterations());
  state.counters["GFLOPs"] =
      benchmark::Counter(2e-9 * m * p.n * p.k * iters, benchmark::Counter::kIsRate);
  state.counters["wbytes"] =
      benchmark::Counter(static_cast<double>(weight_bytes) * iters, benchmark::Counter::kIsRate,
                         benchmark::Counter::kIs1024);
}

// ---- ours ------------------------------------------------------------------------------------

// One helper thread that runs a job per Start() and spins between jobs, so that splitting a call
// over 2 threads costs two cache-line handshakes, not a thread start.
class SpinWorker {
 public:
  SpinWorker() : thread_([this] { Loop(); }) {}
  ~SpinWorker() {
    stop_.store(true, std::memory_order_relaxed);
    start_.fetch_add(1, std::memory_order_release);
    thread_.join();
  }
  void Start(std::function<void()> job) {
    job_ = std::move(job);
    start_.fetch_add(1, std::memory_order_release);
  }
  void Wait() {
    const uint64_t target = start_.load(std::memory_order_relaxed);
    while (done_.load(std::memory_order_acquire) != target) __builtin_ia32_pause();
  }

 private:
  void Loop() {
    uint64_t seen = 0;
    for (;;) {
      while (start_.load(std::memory_order_acquire) == seen) __builtin_ia32_pause();
      ++seen;
      if (stop_.load(std::memory_order_relaxed)) return;
      job_();
      done_.store(seen, std::memory_order_release);
    }
  }

  std::function<void()> job_;
  std::atomic<uint64_t> start_{0}, done_{0};
  std::atomic<bool> stop_{false};
  std::thread thread_;  // last: starts after the fields above exist
};

void BM_Ours(benchmark::State& state, GgmlType wtype, Proj p, int64_t m, int threads) {
  const cpu::IsaTier tier = cpu::BestTier(cpu::DetectCpuFeatures());
  const gemv::GemvKernels& k = gemv::KernelsFor(tier);
  const gemv::TypeKernels* tk = k.For(wtype);
  const int64_t row_bytes = RowBytes(wtype, p.k);
  std::vector<uint8_t> w(row_bytes * p.n);  // [n rows, row_bytes]
  {
    const std::vector<float> wf = WeightsF32(kPatternRows, p.k);  // [64, k]
    for (int64_t r = 0; r < p.n; ++r) {
      quant::QuantizeRow(wtype, wf.data() + (r % kPatternRows) * p.k, w.data() + r * row_bytes,
                         p.k);
    }
  }
  const std::vector<float> x = NormalValues(m * p.k, 2, 1.0f);  // [m, k] activations
  const gemv::QuantizeFn quantize = k.Quantizer(tk->act_type);  // nullptr: f32 rows as they are
  const size_t a_stride = static_cast<size_t>(RowBytes(tk->act_type, p.k));
  std::vector<uint32_t> aq(quantize ? (a_stride * m) / 4 + 1 : 0);  // [m, a_stride] bytes
  std::vector<float> y(m * p.n);                                    // [m, n]
  const void* a = quantize ? static_cast<const void*>(aq.data()) : x.data();
  // Rows [r0, r1) of y for all m tokens.
  auto rows = [&](int64_t r0, int64_t r1) {
    tk->gemm(w.data() + r0 * row_bytes, row_bytes, r1 - r0, a, a_stride, m, p.k, y.data() + r0,
             p.n);
  };
  std::unique_ptr<SpinWorker> worker;
  if (threads > 1) worker = std::make_unique<SpinWorker>();
  const int64_t half = (p.n / 2 + 15) / 16 * 16;  // split on a 16-row boundary
  for (auto _ : state) {
    if (quantize) {
      auto* dst = reinterpret_cast<uint8_t*>(aq.data());
      for (int64_t t = 0; t < m; ++t) quantize(x.data() + t * p.k, dst + t * a_stride, p.k);
    }
    if (worker == nullptr) {
      rows(0, p.n);
    } else {
      worker->Start([&] { rows(half, p.n); });
      rows(0, half);
      worker->Wait();
    }
    benchmark::DoNotOptimize(y.data());
    benchmark::ClobberMemory();
  }
  SetCounters(state, m, p, row_bytes * p.n);
  state.SetLabel(std::string(cpu::IsaTierName(tier)));
}

// ---- oneDNN ----------------------------------------------------------------------------------

using dnnl::memory;
using Dt = memory::data_type;
using Tag = memory::format_tag;

// The matmul primitive and its memories for one shape, weights already reordered.
struct OneDnnMatmul {
  dnnl::engine eng{dnnl::engine::kind::cpu, 0};
  dnnl::stream strm{eng};
  dnnl::matmul prim;
  memory src, wei, dst;
  dnnl::reorder to_bf16;  // bf16-src variant only: x f32 -> src bf16, timed
  memory x;               // bf16-src variant only: the f32 activations
  std::string label;
};

// f32 src when oneDNN has a kernel for it with these weights, else bf16 src (converted per call).
bool MakeOneDnn(OneDnnMatmul* mm, Dt wdt, const Proj& p, int64_t m, std::vector<float>* x,
                std::vector<float>* wf, std::vector<float>* y) {
  const memory::desc dst_md({m, p.n}, Dt::f32, Tag::ab);
  const memory::desc wei_any({p.k, p.n}, wdt, Tag::any);
  for (Dt sdt : {Dt::f32, Dt::bf16}) {
    const memory::desc src_md({m, p.k}, sdt, Tag::ab);
    dnnl::matmul::primitive_desc pd;
    try {
      pd = dnnl::matmul::primitive_desc(dnnl::matmul::desc(src_md, wei_any, dst_md), mm->eng);
    } catch (const dnnl::error&) {
      continue;  // no kernel for this combination: try the next src type
    }
    mm->prim = dnnl::matmul(pd);
    // Our weights are [n rows, k]: element (k, n) at n * K + k, i.e. dims {K, N} in tag ba.
    memory user_w({{p.k, p.n}, Dt::f32, Tag::ba}, mm->eng, wf->data());
    mm->wei = memory(pd.weights_desc(), mm->eng);
    dnnl::reorder(user_w, mm->wei).execute(mm->strm, user_w, mm->wei);
    mm->dst = memory(dst_md, mm->eng, y->data());
    if (sdt == Dt::f32) {
      mm->src = memory(src_md, mm->eng, x->data());
    } else {
      mm->x = memory({{m, p.k}, Dt::f32, Tag::ab}, mm->eng, x->data());
      mm->src = memory(src_md, mm->eng);
      mm->to_bf16 = dnnl::reorder(mm->x, mm->src);
    }
    mm->strm.wait();
    mm->label = std::string(sdt == Dt::f32 ? "f32" : "bf16(converted)") + " src, impl " +
                pd.impl_info_str();
    return true;
  }
  return false;
}

void BM_OneDnn(benchmark::State& state, Dt wdt, Proj p, int64_t m, int threads) {
  omp_set_num_threads(threads);
  std::vector<float> wf = WeightsF32(p.n, p.k);           // [n, k]
  std::vector<float> x = NormalValues(m * p.k, 2, 1.0f);  // [m, k]
  std::vector<float> y(m * p.n);                          // [m, n]
  OneDnnMatmul mm;
  if (!MakeOneDnn(&mm, wdt, p, m, &x, &wf, &y)) {
    state.SkipWithError("oneDNN has no matmul for these types");
    return;
  }
  wf.clear();
  wf.shrink_to_fit();
  const bool convert = mm.x.get(true) != nullptr;
  for (auto _ : state) {
    if (convert) mm.to_bf16.execute(mm.strm, mm.x, mm.src);
    mm.prim.execute(mm.strm,
                    {{DNNL_ARG_SRC, mm.src}, {DNNL_ARG_WEIGHTS, mm.wei}, {DNNL_ARG_DST, mm.dst}});
    mm.strm.wait();
    benchmark::ClobberMemory();
  }
  SetCounters(state, m, p, static_cast<int64_t>(mm.wei.get_desc().get_size()));
  state.SetLabel(mm.label);
}

void RegisterAll() {
  const gemv::GemvKernels& k = gemv::KernelsFor(cpu::BestTier(cpu::DetectCpuFeatures()));
  for (const Proj& p : kProjs) {
    for (int64_t m : kTokens) {
      for (int threads : {1, 2}) {
        std::string tail = "/";  // appended piecewise: GCC 12's -Wrestrict misfires on "/" + str
        tail.append(p.name).append("/M").append(std::to_string(m));
        tail.append("/t").append(std::to_string(threads));
        for (GgmlType wtype :
             {GgmlType::kBF16, GgmlType::kF16, GgmlType::kF32, GgmlType::kQ8_0, GgmlType::kQ4_K}) {
          if (k.For(wtype) == nullptr) continue;  // not in the kernel table (yet)
          benchmark::RegisterBenchmark(
              (std::string("ours/").append(TypeName(wtype)) + tail).c_str(), BM_Ours, wtype, p, m,
              threads)
              ->Unit(benchmark::kMicrosecond)
              ->UseRealTime();
        }
        for (Dt wdt : {Dt::bf16, Dt::f32}) {
          const char* w = wdt == Dt::bf16 ? "onednn/bf16w" : "onednn/f32w";
          benchmark::RegisterBenchmark((std::string(w) + tail).c_str(), BM_OneDnn, wdt, p, m,
                                       threads)
              ->Unit(benchmark::kMicrosecond)
              ->UseRealTime();
        }
      }
    }
  }
}

}  // namespace
}  // namespace moesplit::bench

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  moesplit::bench::RegisterAll();
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
