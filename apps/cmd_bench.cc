#include "apps/cmd_bench.h"

#include <CLI/CLI.hpp>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <fstream>
#include <iostream>
#include <memory>
#include <optional>
#include <random>
#include <sstream>
#include <thread>

#include "apps/bench_profile.h"
#include "apps/bench_report.h"
#include "apps/cpu_tier.h"
#include "apps/sweep_chart.h"
#include "core/base/int_math.h"
#include "core/engine/engine.h"
#include "numa/bandwidth_probe.h"
#include "numa/topology.h"

namespace moesplit::app {
namespace {

using Clock = std::chrono::steady_clock;

// llama.cpp's long file-type name, as llama-bench prints it in the "model" column.
std::string FileTypeDescription(const gguf::GgufFile& f) {
  auto ft = f.GetUint("general.file_type");
  return ft.ok() ? moesplit::FileTypeDescription(static_cast<uint32_t>(*ft)) : "?";
}

std::string CpuModelName() {
  std::ifstream f("/proc/cpuinfo");
  std::string line;
  while (std::getline(f, line)) {
    if (line.rfind("model name", 0) == 0) {
      const size_t colon = line.find(':');
      if (colon != std::string::npos) return line.substr(line.find_first_not_of(' ', colon + 1));
    }
  }
  return "unknown CPU";
}

BenchModelInfo ModelInfo(const engine::Model& model, const std::string& path) {
  BenchModelInfo m;
  m.filename = path;
  for (const gguf::TensorInfo& t : model.file().tensors()) {
    m.size_bytes += t.nbytes;
    m.n_params += static_cast<uint64_t>(t.NumElements());
  }
  char size[32];
  if (m.n_params >= 1000000000ull) {
    std::snprintf(size, sizeof(size), "%.0fB", m.n_params / 1e9);
  } else {
    std::snprintf(size, sizeof(size), "%.0fM", m.n_params / 1e6);
  }
  m.model_type =
      StrCat(ModelArchName(model.config().arch), " ", size, " ", FileTypeDescription(model.file()));
  m.cpu_info = CpuModelName();
  m.build = StrCat("moesplit ", MOESPLIT_VERSION);
  return m;
}

// One measured run of a test from an empty context: t.n_depth tokens untimed (and outside
// `profile`, the session's profile during the timed part; may be null), then the prompt in
// n_batch-sized Eval calls, then n_gen single-token Eval calls. Random ids as llama-bench uses
// (BOS not special-cased).
StatusOr<uint64_t> RunOnce(engine::Session& s, int64_t n_vocab, const BenchTest& t, int n_batch,
                           std::mt19937& rng, engine::Profile* profile = nullptr) {
  std::uniform_int_distribution<int32_t> tok(0, static_cast<int32_t>(n_vocab - 1));
  s.Reset();
  std::vector<int32_t> ids(static_cast<size_t>(std::max(t.n_depth, t.n_prompt)));
  for (int32_t& id : ids) id = tok(rng);
  if (t.n_depth > 0) {  // depth: not timed, not profiled
    s.set_profile(nullptr);
    for (int done = 0; done < t.n_depth; done += n_batch) {
      const int n = std::min(n_batch, t.n_depth - done);
      MOESPLIT_RETURN_IF_ERROR(s.Eval(std::span(ids).subspan(done, n), false).status());
    }
    s.set_profile(profile);
    for (int32_t& id : ids) id = tok(rng);  // the prompt after it: other tokens
  }
  const auto t0 = Clock::now();
  for (int done = 0; done < t.n_prompt; done += n_batch) {
    const int n = std::min(n_batch, t.n_prompt - done);
    MOESPLIT_RETURN_IF_ERROR(s.Eval(std::span(ids).subspan(done, n), false).status());
  }
  for (int i = 0; i < t.n_gen; ++i) {
    const int32_t one[1] = {tok(rng)};
    MOESPLIT_RETURN_IF_ERROR(s.Eval(one, false).status());
  }
  return engine::NsSince(t0);
}

// A tg test with t.n_parallel sequences on s's engine: sequence i owns blocks [i*nb, (i+1)*nb)
// of the pool (nb blocks hold its depth and its tokens); its depth is evaluated untimed, then
// every timed step evaluates one token of each sequence.
StatusOr<uint64_t> RunParallel(engine::Session& s, int64_t n_vocab, const BenchTest& t, int n_batch,
                               std::mt19937& rng, engine::Profile* profile = nullptr) {
  engine::Engine& e = s.engine();
  std::uniform_int_distribution<int32_t> tok(0, static_cast<int32_t>(n_vocab - 1));
  const int N = t.n_parallel;
  const int64_t nb = CeilDiv(t.n_depth + t.n_gen, e.kv_block_size());
  MOESPLIT_CHECK(nb * N <= e.kv_blocks(), "bench: the pool holds ", e.kv_blocks(), " blocks");
  std::vector<std::vector<int32_t>> blocks(static_cast<size_t>(N));
  for (int i = 0; i < N; ++i) {
    for (int64_t b = 0; b < nb; ++b) blocks[i].push_back(static_cast<int32_t>(i * nb + b));
  }
  std::vector<float> logits;
  std::vector<int32_t> ids(static_cast<size_t>(std::max(t.n_depth, N)));
  s.set_profile(nullptr);  // depth: not timed, not profiled
  for (int i = 0; i < N; ++i) {
    for (int32_t& id : ids) id = tok(rng);
    for (int done = 0; done < t.n_depth; done += n_batch) {
      const int n = std::min(n_batch, t.n_depth - done);
      const engine::StepSeq seq{std::span(ids).subspan(done, n), blocks[i], done, 0};
      MOESPLIT_RETURN_IF_ERROR(e.Step({&seq, 1}, &logits));
    }
  }
  s.set_profile(profile);
  std::vector<engine::StepSeq> step(static_cast<size_t>(N));
  const auto t0 = Clock::now();
  for (int g = 0; g < t.n_gen; ++g) {
    for (int i = 0; i < N; ++i) {
      ids[i] = tok(rng);
      step[i] = {std::span(ids).subspan(i, 1), blocks[i], t.n_depth + g, 1};
    }
    logits.clear();
    MOESPLIT_RETURN_IF_ERROR(e.Step(step, &logits));
  }
  return engine::NsSince(t0);
}

// llama-bench's order: per depth, the pp tests, the tg tests, the pg tests.
StatusOr<std::vector<BenchTest>> PlanTests(const BenchArgs& a, int n_threads) {
  std::vector<BenchTest> tests;
  for (int d : a.n_depth) {
    for (int p : a.n_prompt) {
      if (p > 0) tests.push_back({.n_prompt = p, .n_depth = d, .n_threads = n_threads});
    }
    for (int npl : a.n_parallel) {
      for (int n : a.n_gen) {
        if (n > 0)
          tests.push_back({.n_gen = n, .n_depth = d, .n_parallel = npl, .n_threads = n_threads});
      }
    }
    for (const std::string& pg : a.pg) {
      int p = 0, n = 0;
      if (std::sscanf(pg.c_str(), "%d,%d", &p, &n) != 2 || p <= 0 || n <= 0) {
        return InvalidArgumentError("-pg expects PP,TG with both > 0, got '", pg, "'");
      }
      tests.push_back({.n_prompt = p, .n_gen = n, .n_depth = d, .n_threads = n_threads});
    }
  }
  return tests;
}

Status Validate(const BenchArgs& a) {
  if (a.repetitions < 1) return InvalidArgumentError("-r must be >= 1, got ", a.repetitions);
  if (a.n_batch < 1) return InvalidArgumentError("-b must be >= 1, got ", a.n_batch);
  for (int t : a.threads) {
    if (t < 1) return InvalidArgumentError("-t values must be >= 1, got ", t);
  }
  for (int v : a.n_prompt) {
    if (v < 0) return InvalidArgumentError("-p values must be >= 0, got ", v);
  }
  for (int v : a.n_gen) {
    if (v < 0) return InvalidArgumentError("-n values must be >= 0, got ", v);
  }
  for (int v : a.n_depth) {
    if (v < 0) return InvalidArgumentError("-d values must be >= 0, got ", v);
  }
  for (int v : a.n_parallel) {
    if (v < 1 || v > 256) return InvalidArgumentError("--npl values must be 1-256, got ", v);
  }
  for (int v : a.prompt_sizes) {
    if (v < 1) return InvalidArgumentError("--prompt-sizes values must be >= 1, got ", v);
  }
  if (a.output != "md" && a.output != "csv" && a.output != "json") {
    return InvalidArgumentError("-o must be md, csv or json, got '", a.output, "'");
  }
  return Status::Ok();
}

}  // namespace

namespace {

// One configuration of the run: a thread count and the placement flags it runs with.
struct BenchConfig {
  int threads = 0;
  PlacementFlags flags;
};

// --sweep items "threads=1,2,4" and "numa=single,shard" -> their product (numa outer), else one
// config per -t value with the command line's placement flags.
StatusOr<std::vector<BenchConfig>> Configs(const BenchArgs& a, const std::vector<int>& threads) {
  std::vector<BenchConfig> out;
  std::vector<int> sweep_threads = threads;
  std::vector<std::string> sweep_numa = {a.placement.numa};
  // Quoted ("threads=1,2 numa=single,shard") or separate words: split on blanks.
  std::vector<std::string> items;
  for (const std::string& arg : a.sweep) {
    std::istringstream words(arg);
    for (std::string w; words >> w;) items.push_back(w);
  }
  for (const std::string& item : items) {
    const size_t eq = item.find('=');
    const std::string key = item.substr(0, eq),
                      values = eq == std::string::npos ? "" : item.substr(eq + 1);
    if (eq == std::string::npos || values.empty()) {
      return InvalidArgumentError("--sweep item '", item,
                                  "': expected KEY=V1,V2 (threads=1,2,4 or "
                                  "numa=single,shard)");
    }
    std::vector<std::string> list;
    std::stringstream ss(values);
    for (std::string v; std::getline(ss, v, ',');) list.push_back(v);
    if (key == "threads") {
      sweep_threads.clear();
      for (const std::string& v : list) {
        char* end = nullptr;
        const long n = std::strtol(v.c_str(), &end, 10);
        if (v.empty() || *end != 0 || n < 1 || n > 4096) {
          return InvalidArgumentError("--sweep threads: '", v, "' is not a thread count");
        }
        sweep_threads.push_back(static_cast<int>(n));
      }
    } else if (key == "numa") {
      for (const std::string& v : list)
        MOESPLIT_RETURN_IF_ERROR(numa::NumaModeFromName(v).status());
      sweep_numa = list;
    } else {
      return InvalidArgumentError("--sweep key '", key, "' is not one of threads, numa");
    }
  }
  for (const std::string& mode : sweep_numa) {
    for (int t : sweep_threads) {
      BenchConfig c{.threads = t, .flags = a.placement};
      c.flags.numa = mode;
      out.push_back(c);
    }
  }
  return out;
}

// "shard 0,1" / "single 0" for the table's numa column; "" for the default placement.
std::string PlacementLabel(const engine::CpuPlacement& p) {
  if (p.groups.empty()) return p.repack ? "" : "no-repack";
  std::vector<int> nodes;
  for (const auto& g : p.groups) nodes.insert(nodes.end(), g.mem_nodes.begin(), g.mem_nodes.end());
  const bool copied_single = p.mode == numa::NumaMode::kSingle && p.copy_single;
  return StrCat(numa::NumaModeName(p.mode), " ", numa::FormatCpuList(nodes), p.pin ? "" : " nopin",
                copied_single ? " no-mmap" : "", p.repack ? "" : " no-repack");
}

// The warm-up and the timed repetitions of one test on `s` (RunOnce resets it each time).
// profile (may be null): receives the phases of the timed runs (not of the warm-up).
Status MeasureTest(engine::Session& s, int64_t n_vocab, const BenchArgs& a, BenchTest& t,
                   engine::Profile* profile, std::ostream& err) {
  std::mt19937 rng(a.seed);
  // Warm-up as llama-bench does it: the prompt once, and one generated token.
  const BenchTest warm{.n_prompt = t.n_prompt, .n_gen = std::min(t.n_gen, 1)};
  MOESPLIT_RETURN_IF_ERROR(RunOnce(s, n_vocab, warm, a.n_batch, rng).status());
  if (t.n_parallel > 1) {
    const BenchTest warm_n{.n_gen = 1, .n_parallel = t.n_parallel};
    MOESPLIT_RETURN_IF_ERROR(RunParallel(s, n_vocab, warm_n, a.n_batch, rng).status());
  }
  const bool tty = ::isatty(STDERR_FILENO);  // progress only where it can be overwritten
  s.set_profile(profile);
  for (int r = 0; r < a.repetitions; ++r) {
    if (tty) {
      err << "\rbench: " << t.Name() << ", " << t.n_threads << " threads, run " << (r + 1) << "/"
          << a.repetitions << "   " << std::flush;
    }
    StatusOr<uint64_t> ns = t.n_parallel > 1 ? RunParallel(s, n_vocab, t, a.n_batch, rng, profile)
                                             : RunOnce(s, n_vocab, t, a.n_batch, rng, profile);
    if (!ns.ok()) s.set_profile(nullptr);
    MOESPLIT_RETURN_IF_ERROR(ns.status());
    t.samples_ns.push_back(*ns);
  }
  s.set_profile(nullptr);
  if (tty) err << "\r" << std::string(60, ' ') << "\r" << std::flush;
  return Status::Ok();
}

// The tests of one configuration (thread count, placement) on one session sized for the largest
// of them: the experts are placed (copied, repacked) once per configuration, as llama-bench
// loads (and repacks) a model once for all its tests; the tests differ only in their context.
// With --verbose, appends one profile table per test to *profiles.
Status MeasureConfig(const engine::Model& model, const BenchArgs& a, cpu::IsaTier tier,
                     const DeviceChoice& device, const engine::CpuPlacement& placement,
                     std::vector<BenchTest>& tests, std::optional<double> probe_gbps,
                     std::string* profiles, std::ostream& err) {
  if (tests.empty()) return Status::Ok();
  int64_t ctx = 16;
  for (const BenchTest& t : tests) {
    // Parallel tests: whole blocks per sequence.
    const int64_t per_seq = t.n_depth + t.n_prompt + t.n_gen;
    ctx = std::max<int64_t>(ctx, t.n_parallel > 1 ? t.n_parallel * RoundUp(per_seq, engine::kKvBlockSize)
                                                 : per_seq);
  }
  // A backend per session: its device memory is freed with it.
  MOESPLIT_ASSIGN_OR_RETURN(std::unique_ptr<engine::DenseBackend> backend,
                            OpenDenseBackend(device));
  MOESPLIT_ASSIGN_OR_RETURN(std::unique_ptr<engine::Session> s,
                            MakeSession(model,
                                        {.ctx_size = ctx,
                                         .n_threads = tests.front().n_threads,
                                         .isa_tier = tier,
                                         .decode_read = DecodeReadFromEnv(),
                                         .placement = placement,
                                         .progress = CopyProgress(err),
                                         .backend = backend.get(),
                                         .expert_homes = device.expert_homes},
                                        err));
  for (BenchTest& t : tests) {
    engine::Profile profile;
    MOESPLIT_RETURN_IF_ERROR(
        MeasureTest(*s, model.config().n_vocab, a, t, a.verbose ? &profile : nullptr, err));
    if (a.verbose) {
      const std::string label = t.numa.empty() ? "" : StrCat(", ", t.numa);
      *profiles += FormatProfile(StrCat(t.Name(), ", ", t.n_threads, " threads", label), profile,
                                 probe_gbps);
    }
  }
  return Status::Ok();
}

// The table users publish for long prompts: one run per prompt size, prefill then n_gen tokens.
StatusOr<std::vector<PromptSizeRow>> MeasurePromptSizes(const engine::Model& model,
                                                        const BenchArgs& a, cpu::IsaTier tier,
                                                        const DeviceChoice& device, int n_threads,
                                                        std::ostream& err) {
  const int n_gen = a.n_gen.empty() ? 0 : a.n_gen.front();
  std::vector<PromptSizeRow> rows;
  // One session for all sizes (the experts placed once), sized for the largest.
  const int max_size = *std::max_element(a.prompt_sizes.begin(), a.prompt_sizes.end());
  MOESPLIT_ASSIGN_OR_RETURN(std::unique_ptr<engine::DenseBackend> backend,
                            OpenDenseBackend(device));
  MOESPLIT_ASSIGN_OR_RETURN(std::unique_ptr<engine::Session> owned,
                            engine::Session::Create(model, {.ctx_size = max_size + n_gen + 1,
                                                            .n_threads = n_threads,
                                                            .isa_tier = tier,
                                                            .decode_read = DecodeReadFromEnv(),
                                                            .backend = backend.get(),
                                                            .expert_homes = device.expert_homes}));
  engine::Session& s = *owned;
  for (int size : a.prompt_sizes) {
    err << "bench: prompt size " << size << " + " << n_gen << " generated, " << n_threads
        << " threads\n";
    BenchTest pp{.n_prompt = size, .n_threads = n_threads};
    BenchTest tg{.n_gen = n_gen, .n_depth = size, .n_threads = n_threads};
    std::mt19937 rng(a.seed);
    MOESPLIT_ASSIGN_OR_RETURN(uint64_t pp_ns,
                              RunOnce(s, model.config().n_vocab, pp, a.n_batch, rng));
    uint64_t tg_ns = 0;
    if (n_gen > 0) {
      MOESPLIT_ASSIGN_OR_RETURN(tg_ns, RunOnce(s, model.config().n_vocab, tg, a.n_batch, rng));
    }
    rows.push_back({size, n_gen, pp_ns / 1e9, tg_ns / 1e9});
  }
  return rows;
}

// The readers of bench --verbose's probe: the placement's CPUs (the first `threads`) and its
// first memory node where it names them, else the machine's first cores and node.
StatusOr<numa::ReadOptions> ProbeReaders(const engine::CpuPlacement& placement, int threads) {
  if (placement.groups.empty()) return numa::FirstCoresReadOptions(threads);
  numa::ReadOptions o{.mem_node = placement.groups.front().mem_nodes.front()};
  for (const auto& g : placement.groups) o.cpus.insert(o.cpus.end(), g.cpus.begin(), g.cpus.end());
  if (o.cpus.size() > static_cast<size_t>(threads)) o.cpus.resize(static_cast<size_t>(threads));
  return o;
}

// The read bandwidth `threads` pinned readers get (bench --verbose), ProbeReaders' CPUs and node.
// One 512 MiB buffer (16x a 32 MiB L3), 5 passes per read pattern (~0.1-0.2 s each); the fastest
// of the plain two-stream read and the same with prefetcht0 / prefetchnta 4 KiB ahead
// (numa::KernelLikeReads), as bench/bandwidth.h's yardstick: a fraction of bandwidth is taken
// against the fastest pattern. nullopt (with a note) when it fails.
std::optional<double> ProbeBandwidth(const engine::CpuPlacement& placement, int threads,
                                     std::ostream& err) {
  auto no_probe = [&err](const Status& s) {
    err << "bench: no bandwidth probe (" << s.ToString() << ")\n";
    return std::nullopt;
  };
  StatusOr<numa::ReadOptions> o = ProbeReaders(placement, threads);
  if (!o.ok()) return no_probe(o.status());
  o->bytes = int64_t{512} << 20;
  o->kernels = numa::KernelLikeReads();
  StatusOr<numa::ReadResult> r = numa::MeasureRead(*o);
  if (!r.ok()) return no_probe(r.status());
  char line[160];
  std::snprintf(line, sizeof(line),
                "%.1f GB/s (%s, the fastest of %zu read patterns; median of 5 passes, %.1f-%.1f)",
                r->gbps, numa::ReadKernelName(r->kernel), o->kernels.size(), r->min_gbps,
                r->max_gbps);
  err << "bench: read bandwidth probe, " << r->threads << " threads on cpus "
      << numa::FormatCpuList(o->cpus) << ": " << line << "\n";
  return r->gbps;
}

}  // namespace

Status RunBench(const BenchArgs& args, std::ostream& out, std::ostream& err) {
  MOESPLIT_RETURN_IF_ERROR(Validate(args));
  MOESPLIT_ASSIGN_OR_RETURN(cpu::IsaTier tier, KernelTierFromEnv());
  MOESPLIT_ASSIGN_OR_RETURN(std::unique_ptr<engine::Model> model, engine::Model::Load(args.model));
  // Fault the mapped weights in before timing anything, as a long-running server has them:
  // otherwise the first repetitions pay millions of minor page faults.
  model->file().Prefault();
  // The device and rule checks of run, once; a rule file's numa / nodes apply to every config
  // (its threads do not: bench takes -t lists).
  BenchArgs args_with_rules = args;
  MOESPLIT_ASSIGN_OR_RETURN(
      DeviceChoice device,
      ApplyDeviceFlags(args.placement.device, TensorEntriesOf(model->file().tensors()), err,
                       /*threads=*/nullptr, &args_with_rules.placement.numa,
                       &args_with_rules.placement.nodes, HybridBlocker(*model, CudaHasKernel)));
  std::vector<int> threads = args.threads;
  if (threads.empty())
    threads = {static_cast<int>(std::max(1u, std::thread::hardware_concurrency()))};
  std::string thread_list;
  for (int n : threads) thread_list += (thread_list.empty() ? "" : ",") + std::to_string(n);
  const gemv::DecodeRead read = DecodeReadFromEnv();
  LogKernels(err, tier, thread_list, model->FallbackTypes(gemv::KernelsFor(tier, read)),
             cpu::DetectCpuFeatures(), read);
  std::vector<BenchTest> done;
  std::string profiles;  // --verbose: one table per test
  MOESPLIT_ASSIGN_OR_RETURN(std::vector<BenchConfig> configs, Configs(args_with_rules, threads));
  for (const BenchConfig& c : configs) {
    MOESPLIT_ASSIGN_OR_RETURN(engine::CpuPlacement placement,
                              ResolvePlacement(c.flags, c.threads, args.model, &err));
    const std::string label = PlacementLabel(placement);
    if (!label.empty())
      err << "bench: " << c.threads << " threads, " << DescribePlacement(placement) << "\n";
    MOESPLIT_ASSIGN_OR_RETURN(std::vector<BenchTest> tests, PlanTests(args, c.threads));
    for (BenchTest& t : tests) t.numa = label;
    const std::optional<double> probe =
        args.verbose ? ProbeBandwidth(placement, c.threads, err) : std::nullopt;
    MOESPLIT_RETURN_IF_ERROR(
        MeasureConfig(*model, args, tier, device, placement, tests, probe, &profiles, err));
    for (BenchTest& t : tests) done.push_back(std::move(t));
  }
  const BenchFormat format = args.output == "json"  ? BenchFormat::kJson
                             : args.output == "csv" ? BenchFormat::kCsv
                                                    : BenchFormat::kMarkdown;
  BenchModelInfo info = ModelInfo(*model, args.model);
  info.isa = std::string(cpu::IsaTierName(tier));
  if (device.gpu) info.backend = "CUDA,CPU";  // llama-bench's name for a CUDA + CPU split
  if (!done.empty()) out << FormatBenchReport(info, done, format);
  // The profiles are markdown: after the table on stdout, on stderr beside CSV / JSON output.
  if (!profiles.empty()) (format == BenchFormat::kMarkdown ? out : err) << profiles;
  if (!args.sweep.empty() && !done.empty()) {
    std::ofstream chart(args.sweep_chart);
    chart << SweepChartSvg(done, info.model_type + " — " + info.cpu_info);
    if (!chart) return IoError("cannot write the sweep chart ", args.sweep_chart);
    err << "bench: chart written to " << args.sweep_chart << "\n";
  }
  if (!args.prompt_sizes.empty()) {
    MOESPLIT_ASSIGN_OR_RETURN(std::vector<PromptSizeRow> rows,
                              MeasurePromptSizes(*model, args, tier, device, threads.back(), err));
    out << "\n"
        << info.model_type << ", " << threads.back() << " threads:\n"
        << FormatPromptSizeTable(rows);
  }
  return Status::Ok();
}

void RegisterBench(CLI::App& app, std::function<int()>* action) {
  auto a = std::make_shared<BenchArgs>();
  CLI::App* cmd = app.add_subcommand(
      "bench", "Throughput tests in llama-bench's format (pp/tg/pg, mean ± stddev)");
  cmd->add_option("-m,--model", a->model, "GGUF model file")->required();
  cmd->add_option("-p,--n-prompt", a->n_prompt, "prompt sizes, comma-separated (0 = none)")
      ->delimiter(',')
      ->capture_default_str();
  cmd->add_option("-n,--n-gen", a->n_gen, "generated tokens, comma-separated (0 = none)")
      ->delimiter(',')
      ->capture_default_str();
  cmd->add_option("--pg", a->pg, "prompt + generation test PP,TG (repeatable)");
  cmd->add_option("-d,--n-depth", a->n_depth,
                  "tokens already in the context before each test, comma-separated (as "
                  "llama-bench's -d: \"tg128 @ d4096\")")
      ->delimiter(',')
      ->capture_default_str();
  cmd->add_option("--npl", a->n_parallel,
                  "tg tests with this many sequences decoding together, comma-separated "
                  "(aggregate t/s, as llama-batched-bench's -npl)")
      ->delimiter(',')
      ->capture_default_str();
  cmd->add_option("-t,--threads", a->threads, "thread counts, comma-separated (default: all)")
      ->delimiter(',');
  cmd->add_option("-r,--repetitions", a->repetitions, "timed runs per test")->capture_default_str();
  cmd->add_option("-b,--batch-size", a->n_batch, "prompt tokens per evaluation")
      ->capture_default_str();
  cmd->add_option("-o,--output", a->output, "md | csv | json")->capture_default_str();
  cmd->add_option("--prompt-sizes", a->prompt_sizes,
                  "also measure prefill and decode after prompts of these sizes")
      ->delimiter(',');
  cmd->add_option("--sweep", a->sweep,
                  "sweep configurations: threads=1,2,4 numa=single,shard (table + chart)")
      ->expected(1, 2);
  cmd->add_option("--sweep-chart", a->sweep_chart, "SVG chart of a sweep")->capture_default_str();
  cmd->add_flag("-v,--verbose", a->verbose,
                "per test: time, bytes read and GB/s per phase of the forward pass, against a "
                "read-bandwidth probe with the same threads");
  AddPlacementFlags(cmd, &a->placement);
  cmd->callback([a, action] {
    *action = [a] {
      Status s = RunBench(*a, std::cout, std::cerr);
      if (!s.ok()) std::cerr << "moesplit bench: " << s.ToString() << "\n";
      return s.ok() ? 0 : 1;
    };
  });
}

}  // namespace moesplit::app
