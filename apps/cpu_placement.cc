#include "apps/cpu_placement.h"

#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <memory>
#include <sstream>

#include "apps/cpu_tier.h"
#include "apps/model_shape_source.h"
#include "numa/plan.h"
#include "numa/planner.h"

namespace moesplit::app {

void AddPlacementFlags(CLI::App* cmd, PlacementFlags* f) {
  cmd->add_option("--numa", f->numa,
                  "where expert weights and workers go: single | interleave | replicate | shard "
                  "(default: single for one node, shard for several --nodes; with no flag on a "
                  "multi-node machine, the planner's choice: the fastest predicted mode that "
                  "fits, see `moesplit plan`)");
  cmd->add_option("--nodes", f->nodes, "NUMA nodes to use, e.g. 0,1 (see `moesplit topo`)");
  cmd->add_option("--plan", f->plan, "a plan saved by `moesplit plan -o FILE` (flags override it)");
  cmd->add_flag("--no-pin", f->no_pin, "do not pin workers to CPUs");
  // Why: streaming 10 GB of experts per second through 4 KiB page-cache pages costs a TLB miss
  // per 4 KiB and stops the L2 prefetchers at every page edge; 2 MiB pages do neither. Measured
  // on ds-v2-lite Q4_K_M, 2 threads: tg128 median 25.5 vs 24.0 t/s (docs/PERFORMANCE.md).
  cmd->add_flag("--no-mmap", f->no_mmap,
                "copy the routed experts into memory on 2 MiB huge pages at load (the file's pages "
                "are released as each tensor is copied) instead of reading the file mapping");
  // Why: experts in 16-row groups let one load feed 16 rows' accumulators; the decode kernels
  // do a half (Q4_K) to a third (Q5_0) of the vector work per byte (bench_gemv *_r16 hot;
  // docs/PERFORMANCE.md).
  cmd->add_flag(
      "--no-repack", f->no_repack,
      "read the weights in their file layout instead of repacking experts and dense matrices "
      "(attention projections, dense FFN, output head) of the types with 16-row layouts (Q2_K "
      "to Q6_K, Q8_0, Q5_0, Q5_1, Q4_0, Q4_1, IQ4_NL, IQ4_XS, MXFP4, IQ3_XXS, IQ3_S, IQ2_XXS, "
      "IQ2_XS, IQ2_S, IQ1_S, IQ1_M) "
      "into 16-row groups at load (repacking needs the AVX-512 VNNI kernel tier, VBMI and GFNI "
      "for the IQ2/IQ3/IQ1 types; the AVX2 tier repacks Q2_K, Q3_K, Q4_0, Q5_0, IQ4_NL and "
      "IQ4_XS; the repacked copy "
      "replaces the file's pages)");
  // Why: IQ1_S's / IQ1_M's 16-row layouts store base-3 digits (58 / 66 bytes per 256 values
  // where the files have 50 / 56) and decode ~3-4x faster; a file of such experts repacked
  // whole is ~1.16-1.18x its size, over the 1.1x resident-memory budget (docs/PERFORMANCE.md).
  cmd->add_option("--repack-growth", f->repack_growth_pct,
                  "percent of the file's size that repacked expert layouts may add (IQ1_S's and "
                  "IQ1_M's grow 16% / 18%, IQ2_XXS's 6%); tensors past it stay in the file layout "
                  "and decode slower. -1: no limit")
      ->default_val(8)
      ->check(CLI::Range(-1.0, 1000.0));
  AddDeviceFlags(cmd, &f->device, /*with_device=*/true);
}

namespace {

// --no-repack and --repack-growth (percent; negative: no limit) into the placement.
void ApplyRepackFlags(const PlacementFlags& f, engine::CpuPlacement* p) {
  p->repack = !f.no_repack;
  p->repack_growth = f.repack_growth_pct < 0 ? -1.0 : f.repack_growth_pct / 100.0;
}

struct Choice {
  numa::NumaMode mode = numa::NumaMode::kSingle;
  std::vector<int> nodes;                   // OS ids
  std::vector<std::vector<int>> plan_cpus;  // [nodes] from the plan (may be empty)
};

StatusOr<Choice> Choose(const PlacementFlags& f, const numa::Topology& topo,
                        const numa::Plan* auto_plan) {
  Choice c;
  bool mode_set = false;
  if (!f.plan.empty() || auto_plan != nullptr) {
    numa::Plan plan;
    if (auto_plan != nullptr) {
      plan = *auto_plan;
    } else {
      MOESPLIT_ASSIGN_OR_RETURN(plan, numa::LoadPlan(f.plan));
    }
    c.mode = plan.numa_mode;
    mode_set = true;
    for (const numa::NodePlan& n : plan.nodes) {
      c.nodes.push_back(n.id);
      c.plan_cpus.push_back(n.cpus);
    }
  }
  if (!f.nodes.empty()) {
    MOESPLIT_ASSIGN_OR_RETURN(c.nodes, numa::ParseCpuList(f.nodes));
    c.plan_cpus.clear();
  }
  if (!f.numa.empty()) {
    MOESPLIT_ASSIGN_OR_RETURN(c.mode, numa::NumaModeFromName(f.numa));
    mode_set = true;
  }
  if (c.nodes.empty()) {
    for (const numa::NumaNode& n : topo.nodes) {
      if (n.NumCores() > 0) {
        c.nodes.push_back(n.id);
        break;
      }
    }
  }
  for (int id : c.nodes) {
    const int i = topo.NodeIndex(id);
    if (i < 0 || topo.nodes[i].NumCores() == 0) {
      std::string have;
      for (const numa::NumaNode& n : topo.nodes) {
        if (n.NumCores() > 0) have += (have.empty() ? "" : ",") + std::to_string(n.id);
      }
      return InvalidArgumentError("NUMA node ", id,
                                  " does not exist or has no CPUs here (nodes "
                                  "with CPUs: ",
                                  have, "; see `moesplit topo`)");
    }
  }
  if (!mode_set) c.mode = c.nodes.size() == 1 ? numa::NumaMode::kSingle : numa::NumaMode::kShard;
  if (c.mode == numa::NumaMode::kSingle && c.nodes.size() != 1) {
    return InvalidArgumentError("--numa single uses one node, but ", c.nodes.size(),
                                " were given; use interleave, replicate or shard for several");
  }
  return c;
}

// The flags (or `auto_plan` in their place) resolved against `topo`.
StatusOr<engine::CpuPlacement> Resolve(const PlacementFlags& f, int threads,
                                       const numa::Topology& topo, const numa::Plan* auto_plan) {
  engine::CpuPlacement p;
  MOESPLIT_ASSIGN_OR_RETURN(Choice c, Choose(f, topo, auto_plan));
  p.mode = c.mode;
  p.pin = !f.no_pin;
  p.copy_single = topo.nodes.size() > 1 || f.no_mmap;
  const int n = static_cast<int>(c.nodes.size());
  std::vector<std::vector<int>> cpus(n);
  // A node listed k times (a fake node map: --numa shard --nodes 0,0) is cut into k groups with
  // distinct CPUs: each repeat continues where the previous one stopped.
  std::vector<int> used(topo.nodes.size(), 0);
  for (int i = 0; i < n; ++i) {
    const int ni = topo.NodeIndex(c.nodes[i]);
    const numa::NumaNode& node = topo.nodes[ni];
    const int repeats = static_cast<int>(std::count(c.nodes.begin(), c.nodes.end(), node.id));
    std::vector<int> order = node.CoresFirstCpus();
    order.erase(order.begin(), order.begin() + std::min<size_t>(used[ni], order.size()));
    int want = threads > 0 ? threads / n + (i < threads % n ? 1 : 0)
                           : std::max(1, node.NumCores() / repeats);
    if (threads <= 0 && i < static_cast<int>(c.plan_cpus.size()) && !c.plan_cpus[i].empty()) {
      cpus[i] = c.plan_cpus[i];  // the plan's own CPU list
      continue;
    }
    if (want > static_cast<int>(order.size())) {
      return InvalidArgumentError(threads, " threads over ", n, " node(s) asks ", want,
                                  " workers of node ", node.id, ", which has ", order.size(),
                                  " CPUs (", node.NumCores(), " cores)");
    }
    want = std::max(want, 1);
    if (want > static_cast<int>(order.size())) {
      return InvalidArgumentError("node ", node.id, " is listed ", repeats, " times but has only ",
                                  node.CoresFirstCpus().size(), " CPUs for them");
    }
    cpus[i].assign(order.begin(), order.begin() + want);
    used[ni] += want;
  }
  if (p.mode == numa::NumaMode::kSingle || p.mode == numa::NumaMode::kInterleave) {
    engine::CpuPlacement::Group g{.mem_nodes = c.nodes};
    for (const std::vector<int>& v : cpus) g.cpus.insert(g.cpus.end(), v.begin(), v.end());
    p.groups.push_back(std::move(g));
  } else {
    for (int i = 0; i < n; ++i) p.groups.push_back({.mem_nodes = {c.nodes[i]}, .cpus = cpus[i]});
  }
  return p;
}

int NodesWithCpus(const numa::Topology& topo) {
  return static_cast<int>(std::count_if(topo.nodes.begin(), topo.nodes.end(),
                                        [](const numa::NumaNode& n) { return n.NumCores() > 0; }));
}

// No flags on a machine with several nodes that have CPUs: the planner chooses (assumed figures;
// the mode and nodes matter here, not the predicted speed). The alternative it replaces, one pool
// over every CPU reading pages wherever the page cache put them, is the naive two-socket run of
// the reference observation (254 threads over 2 sockets: 8.4 tok/s; 126 on one: 13.7).
StatusOr<engine::CpuPlacement> AutoPlacement(const PlacementFlags& f, int threads,
                                             const numa::Topology& topo,
                                             const std::string& model_path, std::ostream* log) {
  MOESPLIT_ASSIGN_OR_RETURN(numa::ModelShape shape, ModelShapeFromGguf(model_path));
  int cores = 0;
  for (const numa::NumaNode& n : topo.nodes) cores += n.NumCores();
  // -t above the physical cores (the bench default is every PU) -> one worker per core.
  const int want = threads > 0 && threads <= cores ? threads : 0;
  StatusOr<numa::Plan> plan = numa::MakePlan(topo, numa::AssumedProfile(topo),
                                             {.model = shape, .batch = 512, .threads = want});
  if (!plan.ok()) {
    // The planner refuses (e.g. RAM): run on the first node with CPUs, pages where they are.
    if (log) {
      *log << "numa: warning: no automatic plan (" << plan.status().message()
           << "); using node 0's CPUs only (choose with --numa / --nodes)\n";
    }
    PlacementFlags first = f;
    first.numa = "single";
    return Resolve(first, want, topo, nullptr);
  }
  MOESPLIT_ASSIGN_OR_RETURN(engine::CpuPlacement p, Resolve(f, want, topo, &*plan));
  if (log) {
    *log << "numa: " << NodesWithCpus(topo) << " NUMA nodes with CPUs and no --numa / --nodes / "
         << "--plan: the planner's choice, " << DescribePlacement(p) << " (see `moesplit plan -m "
         << model_path << "`)\n";
  }
  return p;
}

}  // namespace

StatusOr<engine::CpuPlacement> ResolvePlacement(const PlacementFlags& f, int threads,
                                                const numa::Topology& topo,
                                                const std::string& model_path, std::ostream* log) {
  StatusOr<engine::CpuPlacement> p = engine::CpuPlacement{};
  if (f.Any()) {
    p = Resolve(f, threads, topo, nullptr);
  } else if (!model_path.empty() && NodesWithCpus(topo) >= 2) {
    p = AutoPlacement(f, threads, topo, model_path, log);
  }
  if (p.ok()) ApplyRepackFlags(f, &*p);
  return p;
}

StatusOr<engine::CpuPlacement> ResolvePlacement(const PlacementFlags& f, int threads,
                                                const std::string& model_path, std::ostream* log) {
  if (f.Any()) {
    MOESPLIT_ASSIGN_OR_RETURN(numa::Topology topo, numa::LoadTopology(""));
    StatusOr<engine::CpuPlacement> p = Resolve(f, threads, topo, nullptr);
    if (p.ok()) ApplyRepackFlags(f, &*p);
    return p;
  }
  StatusOr<numa::Topology> topo = numa::LoadTopology("");
  if (!topo.ok()) {  // no flags asked for a topology: keep the default pool, say why
    if (log) *log << "numa: warning: " << topo.status().message() << "; one unpinned pool\n";
    engine::CpuPlacement p;
    ApplyRepackFlags(f, &p);
    return p;
  }
  return ResolvePlacement(f, threads, *topo, model_path, log);
}

std::string DescribePlacement(const engine::CpuPlacement& p) {
  if (p.groups.empty()) return "default (one unpinned pool)";
  std::ostringstream s;
  s << numa::NumaModeName(p.mode) << " over node";
  std::vector<int> nodes;
  for (const auto& g : p.groups) nodes.insert(nodes.end(), g.mem_nodes.begin(), g.mem_nodes.end());
  s << (nodes.size() > 1 ? "s " : " ") << numa::FormatCpuList(nodes) << ": ";
  for (size_t i = 0; i < p.groups.size(); ++i) {
    s << (i ? " + " : "") << p.groups[i].cpus.size();
  }
  s << " workers" << (p.pin ? "" : " (unpinned)");
  return s.str();
}

std::function<void(uint64_t, uint64_t)> CopyProgress(std::ostream& err) {
  const bool tty = ::isatty(STDERR_FILENO);
  auto last = std::make_shared<int>(-1);
  return [&err, tty, last](uint64_t done, uint64_t total) {
    const int pct = total ? static_cast<int>(100 * done / total) : 100;
    if (pct == *last || (!tty && pct / 10 == *last / 10 && pct != 100)) return;
    *last = pct;
    char line[96];
    std::snprintf(line, sizeof(line), "numa: placing experts %3d%% (%.1f of %.1f GiB)", pct,
                  done / 1073741824.0, total / 1073741824.0);
    err << (tty ? "\r" : "") << line << (tty && pct < 100 ? "" : "\n") << std::flush;
  };
}

StatusOr<std::unique_ptr<engine::Session>> MakeSession(const engine::Model& model,
                                                       const engine::SessionOptions& options,
                                                       std::ostream& err) {
  MOESPLIT_ASSIGN_OR_RETURN(std::unique_ptr<engine::Session> s,
                            engine::Session::Create(model, options));
  for (const std::string& line : s->placement_report()) err << "numa: " << line << "\n";
  return s;
}

StatusOr<EngineSetup> SetUpEngine(const engine::Model& model, const std::string& model_path,
                                  PlacementFlags flags, int threads, int64_t ctx_size,
                                  cpu::IsaTier tier, std::ostream& err) {
  MOESPLIT_ASSIGN_OR_RETURN(DeviceChoice device,
                            ApplyDeviceFlags(flags.device, TensorEntriesOf(model.file().tensors()),
                                             err, &threads, &flags.numa, &flags.nodes,
                                             HybridBlocker(model, CudaHasKernel)));
  EngineSetup o;
  MOESPLIT_ASSIGN_OR_RETURN(o.backend, OpenDenseBackend(device));
  MOESPLIT_ASSIGN_OR_RETURN(engine::CpuPlacement placement,
                            ResolvePlacement(flags, threads, model_path, &err));
  o.options = {.ctx_size = ctx_size,
               .n_threads = threads,
               .isa_tier = tier,
               .decode_read = DecodeReadFromEnv(),
               .placement = placement,
               .progress = CopyProgress(err),
               .backend = o.backend.get(),
               .expert_homes = device.expert_homes};
  return o;
}

StatusOr<OpenedSession> OpenSession(const engine::Model& model, const std::string& model_path,
                                    PlacementFlags flags, int threads, int64_t ctx_size,
                                    cpu::IsaTier tier, std::ostream& err) {
  MOESPLIT_ASSIGN_OR_RETURN(EngineSetup setup,
                            SetUpEngine(model, model_path, flags, threads, ctx_size, tier, err));
  OpenedSession o;
  o.backend = std::move(setup.backend);
  MOESPLIT_ASSIGN_OR_RETURN(o.session, MakeSession(model, setup.options, err));
  return o;
}

}  // namespace moesplit::app
