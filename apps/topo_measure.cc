#include "apps/topo_measure.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <sstream>
#include <thread>

#include "apps/moe_calibration.h"
#include "core/base/dtype.h"
#include "core/base/random_values.h"
#include "cpu_kernels/gemv/gemv.h"
#include "cpu_kernels/quant/quant.h"
#include "numa/affinity.h"
#include "numa/bandwidth_probe.h"
#include "numa/node_memory.h"
#include "numa/thread_pool.h"

namespace moesplit::app {
namespace {

using Clock = std::chrono::steady_clock;

double Seconds(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

double Median(std::vector<double> v) {
  MOESPLIT_CHECK(!v.empty());
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

std::string Fmt(const char* fmt, double v) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), fmt, v);
  return buf;
}

// The DeepSeek-V3 routed-expert gate/up shape: 2048 output rows x 7168 inputs; Q4_K rows are
// 7168 / 256 blocks x 144 bytes = 4032 bytes, the matrix 2048 x 4032 = 8.26 MB.
constexpr int64_t kRows = 2048;
constexpr int64_t kK = 7168;
constexpr int64_t kPatternRows = 64;  // distinct quantized rows; the rest are copies
constexpr GgmlType kWeightType = GgmlType::kQ4_K;

// Runs fn on a fresh thread and waits: pool worker 0 is the thread that calls ParallelFor, so
// pinning a pool inside it leaves the caller's own affinity alone.
template <typename Fn>
void OnFreshThread(Fn&& fn) {
  std::thread t(std::forward<Fn>(fn));
  t.join();
}

// Pins worker w of `pool` to cpus[w]. One task per worker, each waiting (up to 2 s) until every
// task has started, so each worker runs exactly one; a worker that could not pin — or a pool
// that could not gather (an oversubscribed machine) — is a warning.
void PinPoolWorkers(numa::ThreadPool& pool, const std::vector<int>& cpus,
                    std::vector<std::string>* warnings) {
  const int n = pool.size();
  MOESPLIT_CHECK(static_cast<int>(cpus.size()) == n);
  std::atomic<int> arrived{0};
  std::vector<std::string> errors(static_cast<size_t>(n));  // [worker]
  std::vector<char> pinned(static_cast<size_t>(n), 0);      // [worker]
  pool.ParallelFor(n, [&](int64_t, int worker) {
    const Status s = numa::PinCurrentThread({cpus[static_cast<size_t>(worker)]});
    if (s.ok()) {
      pinned[static_cast<size_t>(worker)] = 1;
    } else {
      errors[static_cast<size_t>(worker)] = s.message();
    }
    arrived.fetch_add(1);
    const Clock::time_point t0 = Clock::now();
    while (arrived.load() < n && Seconds(t0, Clock::now()) < 2.0) std::this_thread::yield();
  });
  for (int w = 0; w < n; ++w) {
    if (pinned[static_cast<size_t>(w)]) continue;
    warnings->push_back(
        StrCat("worker ", w, " (cpu ", cpus[static_cast<size_t>(w)], ") ran unpinned",
               errors[static_cast<size_t>(w)].empty() ? std::string(": the pool did not gather")
                                                      : ": " + errors[static_cast<size_t>(w)]));
  }
}

// One activation row of kK values quantized for the weight type's kernels (Q8_K for Q4_K),
// `count` rows `stride` bytes apart: [count x stride] bytes, 8-byte aligned.
std::vector<uint64_t> Activations(const gemv::GemvKernels& kernels, GgmlType act_type,
                                  int64_t count, size_t stride) {
  std::vector<uint64_t> a(stride * static_cast<size_t>(count) / 8 + 1);
  const std::vector<float> x = NormalValues(count * kK, 2, 1.0f);  // [count x kK]
  const gemv::QuantizeFn quantize = kernels.Quantizer(act_type);
  MOESPLIT_CHECK(quantize != nullptr);
  auto* base = reinterpret_cast<uint8_t*>(a.data());
  for (int64_t t = 0; t < count; ++t) quantize(x.data() + t * kK, base + t * stride, kK);
  return a;
}

// kPatternRows random rows quantized to kWeightType, repeated down `rows` rows at `dst`: the
// kernels' speed does not depend on the values, and this keeps set-up to memcpy.
void FillWeights(uint8_t* dst, int64_t rows) {
  const int64_t row_bytes = RowBytes(kWeightType, kK);
  const std::vector<float> wf = NormalValues(kPatternRows * kK, 1, 0.02f);  // [64 x kK]
  std::vector<uint8_t> pattern(static_cast<size_t>(kPatternRows * row_bytes));
  for (int64_t r = 0; r < kPatternRows; ++r) {
    quant::QuantizeRow(kWeightType, wf.data() + r * kK, pattern.data() + r * row_bytes, kK);
  }
  for (int64_t r = 0; r < rows; ++r) {
    std::memcpy(dst + r * row_bytes, pattern.data() + (r % kPatternRows) * row_bytes,
                static_cast<size_t>(row_bytes));
  }
}

}  // namespace

std::vector<int> ThreadCounts(const std::vector<int>& requested, int cores) {
  std::vector<int> counts;
  if (requested.empty()) {
    for (int t = 1; t < cores; t *= 2) counts.push_back(t);
  } else {
    for (int t : requested) {
      if (t >= 1 && t < cores) counts.push_back(t);
    }
  }
  counts.push_back(std::max(cores, 1));
  std::sort(counts.begin(), counts.end());
  counts.erase(std::unique(counts.begin(), counts.end()), counts.end());
  return counts;
}

StatusOr<double> MeasureGemmGmacs(int cpu, const MeasureOptions& options,
                                  std::vector<std::string>* warnings) {
  const gemv::GemvKernels& kernels = gemv::KernelsFor(options.tier, options.decode_read);
  const gemv::TypeKernels* tk = kernels.For(kWeightType);
  if (tk == nullptr)
    return UnimplementedError("no Q4_K kernel at tier ", IsaTierName(options.tier));
  constexpr int64_t kTokens = 256;
  // 2048 x 7168 (8.26 MB of weights, mostly cache-resident after the first run: the compute
  // rate prefill sees); --quick: 256 rows, 0.47 GMAC per run.
  const int64_t rows = options.quick ? 256 : kRows;
  const int64_t row_bytes = RowBytes(kWeightType, kK);
  std::vector<uint64_t> w(static_cast<size_t>(rows * row_bytes) / 8 + 1);
  FillWeights(reinterpret_cast<uint8_t*>(w.data()), rows);
  const size_t a_stride = static_cast<size_t>((RowBytes(tk->act_type, kK) + 63) / 64 * 64);
  const std::vector<uint64_t> a = Activations(kernels, tk->act_type, kTokens, a_stride);
  std::vector<float> y(static_cast<size_t>(rows * kTokens));  // [kTokens x rows]
  std::vector<double> gmacs;                                  // [runs]
  OnFreshThread([&] {
    if (Status s = numa::PinCurrentThread({cpu}); !s.ok()) {
      warnings->push_back(StrCat("gemm: cpu ", cpu, " ran unpinned: ", s.message()));
    }
    const int runs = options.quick ? 2 : 4;  // the first is a warm-up
    for (int r = 0; r < runs; ++r) {
      const Clock::time_point t0 = Clock::now();
      tk->gemm(w.data(), static_cast<size_t>(row_bytes), rows, a.data(), a_stride, kTokens, kK,
               y.data(), rows);
      const double s = Seconds(t0, Clock::now());
      if (r > 0) gmacs.push_back(static_cast<double>(rows * kK * kTokens) / s * 1e-9);
    }
  });
  return Median(gmacs);
}

double MeasureBarrierUs(const std::vector<int>& cpus, const MeasureOptions& options,
                        std::vector<std::string>* warnings) {
  MOESPLIT_CHECK(!cpus.empty());
  std::vector<double> us;  // [reps]
  OnFreshThread([&] {
    numa::ThreadPool pool(static_cast<int>(cpus.size()));
    PinPoolWorkers(pool, cpus, warnings);
    const int reps = options.quick ? 200 : 2000;
    us.reserve(static_cast<size_t>(reps));
    for (int r = 0; r < reps; ++r) {
      const Clock::time_point t0 = Clock::now();
      pool.ParallelFor(pool.size(), [](int64_t, int) {});
      us.push_back(Seconds(t0, Clock::now()) * 1e6);
    }
  });
  return Median(us);
}

namespace {

// "[3/12] node 0: probe, 2 threads ... 50.3 GB/s" on the progress stream.
class Progress {
 public:
  Progress(std::ostream& os, int total) : os_(os), total_(total) {}
  void Start(const std::string& what) {
    os_ << "[" << ++step_ << "/" << total_ << "] " << what << " ... " << std::flush;
  }
  void Done(const std::string& result) { os_ << result << "\n" << std::flush; }

 private:
  std::ostream& os_;
  const int total_;
  int step_ = 0;
};

struct Context {
  const MeasureOptions& options;
  Progress& progress;
  std::ostream& report;
  std::vector<std::string>& warnings;
};

// The probe with the first `threads` cores of `cpu_node` reading memory bound to `mem_node`.
StatusOr<numa::ReadResult> Read(Context& ctx, const numa::NumaNode& cpu_node, int threads,
                                int mem_node, numa::ReadKernel kernel) {
  const std::vector<int> primary = cpu_node.PrimaryCpus();
  numa::ReadOptions o;
  o.cpus.assign(primary.begin(), primary.begin() + threads);
  o.mem_node = mem_node;
  o.kernels = {kernel};
  o.bytes = ctx.options.bytes;
  o.passes = ctx.options.passes;
  ctx.progress.Start(StrCat("cpus of node ", cpu_node.id, ", memory on node ", mem_node, ": ",
                            numa::ReadKernelName(kernel), ", ", threads, " thread(s)"));
  StatusOr<numa::ReadResult> r = numa::MeasureRead(o);
  if (!r.ok()) return r.status();
  ctx.progress.Done(Fmt("%.1f GB/s", r->gbps));
  for (const std::string& w : r->warnings) ctx.warnings.push_back(w);
  return r;
}

std::string MinMax(const numa::ReadResult& r) {
  return Fmt("%.1f", r.min_gbps) + "-" + Fmt("%.1f", r.max_gbps);
}

// Local read curve, strided and STREAM-style figures of one node, with its report section.
StatusOr<numa::NodeProfile> MeasureNode(Context& ctx, const numa::NumaNode& node) {
  numa::NodeProfile np;
  np.node = node.id;
  const std::vector<int> counts = ThreadCounts(ctx.options.threads, node.NumCores());
  std::ostringstream table;
  table << "node " << node.id << " (cores on cpus " << numa::FormatCpuList(node.PrimaryCpus())
        << ", memory bound to node " << node.id << "):\n"
        << "  threads  probe GB/s  min-max\n";
  double probe_max = 0;  // probe at the largest count, for the STREAM check
  for (int t : counts) {
    MOESPLIT_ASSIGN_OR_RETURN(numa::ReadResult r,
                              Read(ctx, node, t, node.id, numa::ReadKernel::kProbe));
    np.read.push_back({t, r.gbps});
    probe_max = r.gbps;
    char line[96];
    std::snprintf(line, sizeof(line), "  %7d  %10.1f  %s\n", t, r.gbps, MinMax(r).c_str());
    table << line;
  }
  const int max_t = counts.back();
  MOESPLIT_ASSIGN_OR_RETURN(numa::ReadResult strided,
                            Read(ctx, node, max_t, node.id, numa::ReadKernel::kStrided));
  np.strided_gbps = strided.gbps;
  table << "  strided (one 64 B line per 256 B), " << max_t
        << " thread(s): " << Fmt("%.1f", strided.gbps) << " GB/s of lines read\n";
  MOESPLIT_ASSIGN_OR_RETURN(numa::ReadResult stream,
                            Read(ctx, node, max_t, node.id, numa::ReadKernel::kStream));
  np.stream_gbps = stream.gbps;
  // The probe must agree with a STREAM-style sum on the same cores within 10%: a larger gap
  // means one of them measures its own instructions (or the machine was busy).
  const double ratio = probe_max / stream.gbps;
  const bool agree = std::abs(ratio - 1) <= 0.10;
  table << "  STREAM-style sum, " << max_t << " thread(s): " << Fmt("%.1f", stream.gbps)
        << " GB/s; probe / STREAM = " << Fmt("%.3f", ratio)
        << (agree ? " (within 10%)" : " (DIFFER by more than 10%)") << "\n";
  if (!agree) {
    ctx.warnings.push_back(StrCat("node ", node.id, ": probe ", Fmt("%.1f", probe_max),
                                  " GB/s vs STREAM ", Fmt("%.1f", stream.gbps), " GB/s differ by ",
                                  Fmt("%.0f", std::abs(ratio - 1) * 100),
                                  "% (> 10%): other load on the machine? re-run on a quiet one"));
  }
  ctx.report << table.str();
  return np;
}

// Every ordered pair of nodes with CPUs: all cores of a reading memory bound to b.
Status MeasureCross(Context& ctx, const std::vector<const numa::NumaNode*>& cpu_nodes,
                    numa::MachineProfile* profile) {
  if (cpu_nodes.size() < 2) {
    ctx.report << "cross-node: none (" << cpu_nodes.size()
               << " node with CPUs on this machine: nothing to cross)\n";
    return Status::Ok();
  }
  ctx.report << "cross-node probe, all cores of the CPU node (GB/s):\n  cpu node -> mem node\n";
  for (const numa::NumaNode* a : cpu_nodes) {
    for (const numa::NumaNode* b : cpu_nodes) {
      if (a == b) continue;
      const int t = a->NumCores();
      MOESPLIT_ASSIGN_OR_RETURN(numa::ReadResult r,
                                Read(ctx, *a, t, b->id, numa::ReadKernel::kProbe));
      profile->cross.push_back({a->id, b->id, t, r.gbps});
      const numa::NodeProfile* local = profile->FindNode(a->id);
      const double local_gbps = local != nullptr ? local->read.back().gbps : 0;
      ctx.report << "  " << a->id << " -> " << b->id << ": " << Fmt("%.1f", r.gbps) << " GB/s, "
                 << t << " threads"
                 << (local_gbps > 0 ? Fmt(" (%.2f of local)", r.gbps / local_gbps) : "") << "\n";
    }
  }
  return Status::Ok();
}

// Dense prefill types measured (those the tier's kernel table has): what GGUF files put on
// DeepSeek's tensors.
constexpr GgmlType kDenseTypes[] = {GgmlType::kQ4_K, GgmlType::kQ5_K, GgmlType::kQ6_K,
                                    GgmlType::kQ8_0, GgmlType::kQ4_0, GgmlType::kQ5_0,
                                    GgmlType::kBF16, GgmlType::kF16,  GgmlType::kF32};

int DenseTypeCount(cpu::IsaTier tier) {
  const gemv::GemvKernels& table = gemv::KernelsFor(tier);
  int n = 0;
  for (GgmlType t : kDenseTypes) {
    n += table.For(t) != nullptr ? 1 : 0;
  }
  return n;
}

// Routed-expert types whose decode rate per core is measured (those the tier has kernels and a
// quantizer for): what DeepSeek GGUF files put on their experts, from Q8_0 to UD-IQ1_S.
constexpr GgmlType kExpertTypes[] = {
    GgmlType::kQ8_0,    GgmlType::kQ6_K,   GgmlType::kQ5_K,  GgmlType::kQ4_K, GgmlType::kQ4_0,
    GgmlType::kIQ4_XS,  GgmlType::kIQ4_NL, GgmlType::kMXFP4, GgmlType::kQ3_K, GgmlType::kQ2_K,
    GgmlType::kIQ2_XXS, GgmlType::kIQ1_M,  GgmlType::kIQ1_S};

int ExpertTypeCount(cpu::IsaTier tier) {
  int n = 0;
  for (GgmlType t : kExpertTypes) n += CanMeasureExpertDecode(tier, t) ? 1 : 0;
  return n;
}

// MoE prefill batches measured, ascending so the last is the 512-token figure.
constexpr int64_t kMoeTokens[] = {64, 171, 512};

// Probe / MoE-decode pairs taken for decode_fraction (one with --quick).
int KernelRounds(const MeasureOptions& o) { return o.quick ? 1 : 3; }

// Each expert type's decode on one core: where threads x this is below the memory's rate, the
// planner predicts decode compute-bound.
Status MeasureExpertRates(Context& ctx, const numa::NumaNode& node, numa::MachineProfile* profile) {
  std::string rates;
  for (GgmlType t : kExpertTypes) {
    if (!CanMeasureExpertDecode(ctx.options.tier, t)) continue;
    ctx.progress.Start(StrCat("routed-expert decode (V3 shape), ", TypeName(t), ", 1 thread"));
    MOESPLIT_ASSIGN_OR_RETURN(double g,
                              MeasureExpertDecodeGbps(node, t, ctx.options, &ctx.warnings));
    ctx.progress.Done(Fmt("%.1f GB/s", g));
    profile->kernels.expert_decode_gbps_per_core[TypeName(t)] = g;
    rates += StrCat(rates.empty() ? "" : ", ", TypeName(t), " ", Fmt("%.1f", g));
  }
  ctx.report << "  routed-expert decode by type, 1 thread (V3 experts from DRAM, top-8), GB/s "
             << "of file bytes per core: " << rates << "\n";
  return Status::Ok();
}

Status MeasureKernels(Context& ctx, const numa::NumaNode& node, numa::MachineProfile* profile) {
  const int threads = node.NumCores();
  MOESPLIT_CHECK(profile->FindNode(node.id) != nullptr);
  ctx.report << "kernels (" << IsaTierName(ctx.options.tier) << ", node " << node.id << "):\n";
  // Probe and MoE decode in alternation, the fraction taken per pair: on a shared machine the
  // bandwidth drifts by tens of percent within a minute (45-67 GB/s on the 2-core development
  // box), so a probe taken minutes earlier says little about the decode run; the median of the
  // pairs' ratios does.
  std::vector<double> ratios, decodes, probes, dense_ratios;  // [rounds]
  for (int round = 0; round < KernelRounds(ctx.options); ++round) {
    MOESPLIT_ASSIGN_OR_RETURN(numa::ReadResult fresh,
                              Read(ctx, node, threads, node.id, numa::ReadKernel::kProbe));
    ctx.progress.Start(StrCat("MoE layer decode (V2-Lite shape), ", threads, " thread(s)"));
    MOESPLIT_ASSIGN_OR_RETURN(double decode,
                              MeasureMoeDecodeGbps(node, threads, ctx.options, &ctx.warnings));
    ctx.progress.Done(Fmt("%.1f GB/s", decode));
    ctx.progress.Start(StrCat("dense q4_K decode (GEMV), ", threads, " thread(s)"));
    MOESPLIT_ASSIGN_OR_RETURN(double dense,
                              MeasureDenseDecodeGbps(node, threads, ctx.options, &ctx.warnings));
    ctx.progress.Done(Fmt("%.1f GB/s", dense));
    probes.push_back(fresh.gbps);
    decodes.push_back(decode);
    ratios.push_back(fresh.gbps > 0 ? decode / fresh.gbps : 0);
    dense_ratios.push_back(fresh.gbps > 0 ? dense / fresh.gbps : 0);
  }
  const double ratio = Median(ratios);
  // The layouts the calibrations store their weights in, as the engine does after loading.
  const gemv::GemvKernels& k = gemv::KernelsFor(ctx.options.tier);
  const char* q4k = TypeName(gemv::LoadLayout(k, GgmlType::kQ4_K, 1408));
  ctx.report << "  MoE layer decode (moe::ExpertEngine, 2048x1408 experts as " << q4k << " / "
             << TypeName(gemv::LoadLayout(k, GgmlType::kQ8_0, 2048)) << ", 1 token, top-6), "
             << threads << " thread(s), " << ratios.size() << " probe/decode pair(s):";
  for (size_t i = 0; i < ratios.size(); ++i) {
    ctx.report << (i ? "," : "") << " " << Fmt("%.1f", decodes[i]) << "/" << Fmt("%.1f", probes[i])
               << " GB/s";
  }
  ctx.report << "; median fraction of the probe " << Fmt("%.3f", ratio) << "\n";
  const double dense_ratio = Median(dense_ratios);
  ctx.report << "  dense q4_K GEMV (2816x2048 matrices as " << q4k << ", 1 token), " << threads
             << " thread(s): median fraction of the probe " << Fmt("%.3f", dense_ratio) << "\n";
  // Long sequential GEMV streams can beat the probe's access pattern a little; kept as
  // measured up to 1.5x (more means the probe was disturbed).
  profile->kernels.dense_decode_fraction = std::clamp(dense_ratio, 0.01, 1.5);
  if (dense_ratio > 1.5) {
    ctx.warnings.push_back(StrCat("dense decode read ", Fmt("%.2f", dense_ratio),
                                  "x the probe's bandwidth; saved as 1.5 (machine busy?)"));
  }
  // The kernels cannot stream weights faster than the memory delivers them: a ratio above 1
  // means the probe was disturbed (or software prefetch beats plain loads on one core). The
  // profile keeps 1.0, the planner's "as fast as the probe".
  profile->kernels.decode_fraction = std::min(ratio, 1.0);
  if (ratio > 1.0) {
    ctx.warnings.push_back(StrCat("MoE decode read ", Fmt("%.2f", ratio),
                                  "x the probe's bandwidth; decode_fraction saved as 1.0 (was the "
                                  "machine busy? re-run on a quiet one)"));
  }

  MOESPLIT_RETURN_IF_ERROR(MeasureExpertRates(ctx, node, profile));

  const int cpu = node.PrimaryCpus().front();
  double moe_gmacs = 0;  // at 512 tokens
  std::string moe_curve;
  for (int64_t tokens : kMoeTokens) {
    ctx.progress.Start(StrCat("MoE layer prefill (V2-Lite shape, ", tokens, " tokens), 1 thread"));
    MOESPLIT_ASSIGN_OR_RETURN(double g,
                              MeasureMoePrefillGmacs(node, tokens, ctx.options, &ctx.warnings));
    ctx.progress.Done(Fmt("%.1f GMAC/s", g));
    const double experts = ctx.options.quick ? 8 : 64;
    profile->kernels.moe_gmacs_by_tokens_per_expert[tokens * 6 / experts] = g;
    moe_curve += StrCat(moe_curve.empty() ? "" : ", ", tokens, " tokens (",
                        Fmt("%.0f", tokens * 6 / experts), " per expert) ", Fmt("%.0f", g));
    moe_gmacs = g;
  }
  profile->kernels.moe_gmacs_per_core = moe_gmacs;
  // The dense rate per weight type the tier has a kernel for (the types GGUF files put on
  // DeepSeek's tensors); q4_K's is gemm_gmacs_per_core.
  const gemv::GemvKernels& table = gemv::KernelsFor(ctx.options.tier, ctx.options.decode_read);
  std::string by_type;
  for (GgmlType t : kDenseTypes) {
    if (table.For(t) == nullptr) continue;
    ctx.progress.Start(StrCat("dense ", TypeName(t), " projection, 512 tokens, 1 thread"));
    MOESPLIT_ASSIGN_OR_RETURN(double g, MeasureDenseGmacs(node, t, ctx.options, &ctx.warnings));
    ctx.progress.Done(Fmt("%.1f GMAC/s", g));
    profile->kernels.gemm_gmacs_by_type[TypeName(t)] = g;
    by_type += StrCat(by_type.empty() ? "" : ", ", TypeName(t), " ", Fmt("%.0f", g));
  }
  const double dense_gmacs = profile->kernels.gemm_gmacs_by_type["q4_K"];
  if (dense_gmacs <= 0) {
    return FailedPreconditionError("no q4_K kernel at tier ", IsaTierName(ctx.options.tier));
  }
  profile->kernels.gemm_gmacs_per_core = dense_gmacs;
  ctx.progress.Start("dense SwiGLU FFN (2048 -> 11264 q4_K), 512 tokens, 1 thread");
  MOESPLIT_ASSIGN_OR_RETURN(double ffn_gmacs, MeasureFfnGmacs(node, ctx.options, &ctx.warnings));
  ctx.progress.Done(Fmt("%.1f GMAC/s", ffn_gmacs));
  profile->kernels.ffn_gmacs_per_core = ffn_gmacs;
  ctx.progress.Start("Q4_K x Q8_K GEMM kernel alone, 256 tokens, 1 thread");
  MOESPLIT_ASSIGN_OR_RETURN(double peak, MeasureGemmGmacs(cpu, ctx.options, &ctx.warnings));
  ctx.progress.Done(Fmt("%.1f GMAC/s", peak));
  // Prefill per core, what the planner uses against the kernel alone (the gap is dispatch,
  // quantization, SiLU and combine, and short per-expert token runs).
  ctx.report << "  prefill, 1 thread (cpu " << cpu << "), GMAC/s: MoE layer (512 tokens x top-6 of "
             << "64 experts) " << Fmt("%.1f", moe_gmacs) << ", dense q4_K projection (512 tokens) "
             << Fmt("%.1f", dense_gmacs) << "; the Q4_K x Q8_K GEMM kernel alone "
             << Fmt("%.1f", peak) << " (MoE " << Fmt("%.2f", moe_gmacs / peak) << "x, dense "
             << Fmt("%.2f", dense_gmacs / peak) << "x of it)\n";
  ctx.report << "  dense prefill by weight type, GMAC/s per core: " << by_type
             << "; SwiGLU FFN (q4_K) " << Fmt("%.0f", ffn_gmacs) << "\n";
  ctx.report << "  MoE layer prefill by batch, GMAC/s per core: " << moe_curve << "\n";

  ctx.progress.Start(StrCat("empty parallel-for, ", threads, " worker(s)"));
  const double us = MeasureBarrierUs(node.PrimaryCpus(), ctx.options, &ctx.warnings);
  ctx.progress.Done(Fmt("%.2f us", us));
  profile->kernels.barrier_us = us;
  ctx.report << "  empty parallel-for over " << threads << " worker(s): " << Fmt("%.2f", us)
             << " us (median)\n";
  return Status::Ok();
}

}  // namespace

StatusOr<numa::MachineProfile> MeasureMachine(const numa::Topology& topo,
                                              const MeasureOptions& options, std::ostream& report,
                                              std::ostream& progress) {
  std::vector<const numa::NumaNode*> cpu_nodes;  // nodes with cores, ascending id
  for (const numa::NumaNode& n : topo.nodes) {
    if (n.NumCores() > 0) cpu_nodes.push_back(&n);
  }
  if (cpu_nodes.empty()) return FailedPreconditionError("no NUMA node with CPUs to measure");
  // The kernel calibrations: probe + decode pairs, MoE and dense prefill, the bare GEMM, the
  // barrier.
  int steps = 3 * KernelRounds(options) + 3 + std::size(kMoeTokens) + DenseTypeCount(options.tier) +
              ExpertTypeCount(options.tier);
  for (const numa::NumaNode* n : cpu_nodes) {
    steps += static_cast<int>(ThreadCounts(options.threads, n->NumCores()).size()) + 2;
  }
  steps += static_cast<int>(cpu_nodes.size() * (cpu_nodes.size() - 1));
  Progress prog(progress, steps);
  std::vector<std::string> warnings;
  Context ctx{options, prog, report, warnings};

  numa::MachineProfile profile;
  profile.source = "moesplit topo --measure";
  profile.measured = true;
  profile.cpu_model = topo.cpu_model;
  profile.topology = topo.source;
  profile.kernels.isa = std::string(IsaTierName(options.tier));
  report << "read bandwidth, GB/s = 1e9 bytes/s, median of " << options.passes << " pass(es) over "
         << (options.bytes >> 20) << " MiB, one pinned reader per core:\n";
  for (const numa::NumaNode* n : cpu_nodes) {
    MOESPLIT_ASSIGN_OR_RETURN(numa::NodeProfile np, MeasureNode(ctx, *n));
    profile.nodes.push_back(std::move(np));
  }
  MOESPLIT_RETURN_IF_ERROR(MeasureCross(ctx, cpu_nodes, &profile));
  MOESPLIT_RETURN_IF_ERROR(MeasureKernels(ctx, *cpu_nodes.front(), &profile));

  // The same warning (THP mode, a refused mbind) comes from every measurement: list it once.
  std::vector<std::string> unique;
  for (const std::string& w : warnings) {
    if (std::find(unique.begin(), unique.end(), w) == unique.end()) unique.push_back(w);
  }
  for (const std::string& w : unique) report << "warning: " << w << "\n";
  return profile;
}

}  // namespace moesplit::app
