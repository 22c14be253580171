#include "apps/cpu_placement.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <memory>
#include <sstream>

#include "numa/plan.h"

namespace moesplit::app {

void AddPlacementFlags(CLI::App* cmd, PlacementFlags* f) {
  cmd->add_option("--numa", f->numa,
                  "where expert weights and workers go: single | interleave | replicate | shard "
                  "(default: single on one node, shard over several)");
  cmd->add_option("--nodes", f->nodes, "NUMA nodes to use, e.g. 0,1 (see `moesplit topo`)");
  cmd->add_option("--plan", f->plan, "a plan saved by `moesplit plan -o FILE` (flags override it)");
  cmd->add_flag("--no-pin", f->no_pin, "do not pin workers to CPUs");
}

namespace {

// Workers of one node: physical cores first (one PU each), then their SMT siblings.
std::vector<int> NodeCpuOrder(const numa::NumaNode& n) {
  std::vector<int> cpus = n.PrimaryCpus();
  for (int c : n.Cpus()) {
    if (std::find(cpus.begin(), cpus.end(), c) == cpus.end()) cpus.push_back(c);
  }
  return cpus;
}

struct Choice {
  numa::NumaMode mode = numa::NumaMode::kSingle;
  std::vector<int> nodes;                  // OS ids
  std::vector<std::vector<int>> plan_cpus;  // [nodes] from the plan (may be empty)
};

StatusOr<Choice> Choose(const PlacementFlags& f, const numa::Topology& topo) {
  Choice c;
  bool mode_set = false;
  if (!f.plan.empty()) {
    MOESPLIT_ASSIGN_OR_RETURN(numa::Plan plan, numa::LoadPlan(f.plan));
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
      return InvalidArgumentError("NUMA node ", id, " does not exist or has no CPUs here (nodes "
                                  "with CPUs: ", have, "; see `moesplit topo`)");
    }
  }
  if (!mode_set) c.mode = c.nodes.size() == 1 ? numa::NumaMode::kSingle : numa::NumaMode::kShard;
  if (c.mode == numa::NumaMode::kSingle && c.nodes.size() != 1) {
    return InvalidArgumentError("--numa single uses one node, but ", c.nodes.size(),
                                " were given; use interleave, replicate or shard for several");
  }
  return c;
}

}  // namespace

StatusOr<engine::CpuPlacement> ResolvePlacement(const PlacementFlags& f, int threads,
                                                const numa::Topology& topo) {
  engine::CpuPlacement p;
  if (!f.Any()) return p;
  MOESPLIT_ASSIGN_OR_RETURN(Choice c, Choose(f, topo));
  p.mode = c.mode;
  p.pin = !f.no_pin;
  p.copy_single = topo.nodes.size() > 1;
  const int n = static_cast<int>(c.nodes.size());
  std::vector<std::vector<int>> cpus(n);
  // A node listed k times (a fake node map: --numa shard --nodes 0,0) is cut into k groups with
  // distinct CPUs: each repeat continues where the previous one stopped.
  std::vector<int> used(topo.nodes.size(), 0);
  for (int i = 0; i < n; ++i) {
    const int ni = topo.NodeIndex(c.nodes[i]);
    const numa::NumaNode& node = topo.nodes[ni];
    const int repeats = static_cast<int>(std::count(c.nodes.begin(), c.nodes.end(), node.id));
    std::vector<int> order = NodeCpuOrder(node);
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
                                  NodeCpuOrder(node).size(), " CPUs for them");
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

StatusOr<engine::CpuPlacement> ResolvePlacement(const PlacementFlags& f, int threads) {
  if (!f.Any()) return engine::CpuPlacement{};
  MOESPLIT_ASSIGN_OR_RETURN(numa::Topology topo, numa::LoadTopology(""));
  return ResolvePlacement(f, threads, topo);
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

}  // namespace moesplit::app
