#include "apps/cmd_topo.h"

#include <CLI/CLI.hpp>
#include <cctype>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <vector>

#include "apps/cpu_tier.h"
#include "apps/topo_measure.h"
#include "numa/machine_profile.h"
#include "numa/topology.h"

namespace moesplit::app {
namespace {

using nlohmann::json;

json TopologyJson(const numa::Topology& t) {
  json j;
  j["source"] = t.source;
  j["cpu_model"] = t.cpu_model;
  j["cores"] = t.NumCores();
  j["pus"] = t.NumPus();
  j["memory_bytes"] = t.MemoryBytes();
  j["packages"] = json::array();
  for (const numa::Package& p : t.packages) {
    json ids = json::array();
    for (int i : p.nodes) ids.push_back(t.nodes[i].id);
    j["packages"].push_back({{"id", p.id}, {"nodes", ids}});
  }
  j["nodes"] = json::array();
  for (const numa::NumaNode& n : t.nodes) {
    json groups = json::array();
    for (const numa::L3Group& g : n.l3_groups) {
      json cores = json::array();
      for (const numa::Core& c : g.cores) cores.push_back({{"id", c.id}, {"pus", c.pus}});
      groups.push_back({{"l3_bytes", g.l3_bytes}, {"cores", cores}});
    }
    j["nodes"].push_back({{"id", n.id},
                          {"package", t.packages[n.package].id},
                          {"memory_bytes", n.memory_bytes},
                          {"cores", n.NumCores()},
                          {"cpus", numa::FormatCpuList(n.Cpus())},
                          {"primary_cpus", numa::FormatCpuList(n.PrimaryCpus())},
                          {"l3_groups", groups}});
  }
  // [nodes][nodes], indexed like "nodes"; defaults filled in when the source has none.
  json d = json::array();
  for (size_t a = 0; a < t.nodes.size(); ++a) {
    json row = json::array();
    for (size_t b = 0; b < t.nodes.size(); ++b) {
      row.push_back(t.Distance(static_cast<int>(a), static_cast<int>(b)));
    }
    d.push_back(row);
  }
  j["distances"] = d;
  j["distances_from_source"] = !t.distances.empty();
  return j;
}

void PrintTopology(const numa::Topology& t, const std::string& format, std::ostream& os) {
  if (format == "json") {
    // An XML file's CPU model need not be UTF-8: replace, do not throw.
    os << TopologyJson(t).dump(2, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
  } else {
    os << numa::FormatTopology(t);
  }
}

// Same nodes with the same CPUs: an XML exported on this machine names this machine.
bool SameMachine(const numa::Topology& a, const numa::Topology& b) {
  if (a.nodes.size() != b.nodes.size()) return false;
  for (size_t i = 0; i < a.nodes.size(); ++i) {
    if (a.nodes[i].id != b.nodes[i].id || a.nodes[i].Cpus() != b.nodes[i].Cpus()) return false;
  }
  return true;
}

std::string Shape(const numa::Topology& t) {
  return StrCat(t.nodes.size(), " node(s), ", t.NumCores(), " cores, ", t.NumPus(), " PUs");
}

StatusOr<MeasureOptions> MeasureOptionsFrom(const TopoArgs& args) {
  MeasureOptions o;
  o.quick = args.quick;
  o.passes = args.quick ? 3 : 5;
  const std::string bytes = args.bytes.empty() ? (args.quick ? "64M" : "1G") : args.bytes;
  MOESPLIT_ASSIGN_OR_RETURN(o.bytes, ParseByteSize(bytes));
  if (!args.threads.empty()) {
    StatusOr<std::vector<int>> t = numa::ParseCpuList(args.threads);
    if (!t.ok() || t->empty() || t->front() < 1) {
      return InvalidArgumentError("--threads ", args.threads,
                                  ": expected thread counts >= 1 like 1,2,4");
    }
    o.threads = *t;
  }
  MOESPLIT_ASSIGN_OR_RETURN(o.tier, KernelTierFromEnv());
  o.decode_read = DecodeReadFromEnv();
  return o;
}

int Measure(const TopoArgs& args, const numa::Topology& topo, std::ostream& out,
            std::ostream& err) {
  if (!args.topology.empty()) {
    StatusOr<numa::Topology> live = numa::LoadTopology("");
    if (!live.ok()) {
      err << "error: " << live.status().ToString() << "\n";
      return 1;
    }
    if (!SameMachine(topo, *live)) {
      err << "error: --measure measures the machine it runs on, but --topology " << args.topology
          << " describes another one (" << Shape(topo) << "; this machine: " << Shape(*live)
          << "). Drop --topology, or pass an XML exported here (lstopo FILE.xml).\n";
      return 1;
    }
  }
  StatusOr<MeasureOptions> options = MeasureOptionsFrom(args);
  if (!options.ok()) {
    err << "error: " << options.status().ToString() << "\n";
    return 1;
  }
  // With --save the report is the command's output; without, stdout carries only the YAML.
  std::ostream& report = args.save.empty() ? err : out;
  PrintTopology(topo, args.format, report);
  err << "measuring (" << TierDescription(options->tier) << " kernels); this takes a while\n";
  StatusOr<numa::MachineProfile> profile = MeasureMachine(topo, *options, report, err);
  if (!profile.ok()) {
    err << "error: " << profile.status().ToString() << "\n";
    return 1;
  }
  if (args.save.empty()) {
    out << numa::MachineProfileToYaml(*profile);
    return 0;
  }
  if (Status s = numa::SaveMachineProfile(*profile, args.save); !s.ok()) {
    err << "error: " << s.ToString() << "\n";
    return 1;
  }
  report << "machine profile saved to " << args.save << "\n";
  return 0;
}

}  // namespace

StatusOr<int64_t> ParseByteSize(const std::string& text) {
  size_t digits = 0;
  while (digits < text.size() && std::isdigit(static_cast<unsigned char>(text[digits]))) {
    ++digits;
  }
  std::string unit = text.substr(digits);
  for (char& c : unit) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  if (unit.size() == 3 && unit.substr(1) == "IB") unit = unit.substr(0, 1);
  if (unit.size() == 2 && unit[1] == 'B') unit = unit.substr(0, 1);
  int shift = -1;
  if (unit.empty() || unit == "B") shift = 0;
  if (unit == "K") shift = 10;
  if (unit == "M") shift = 20;
  if (unit == "G") shift = 30;
  if (unit == "T") shift = 40;
  if (digits == 0 || digits > 6 || shift < 0) {
    return InvalidArgumentError("size \"", text, "\": expected a number with an optional unit ",
                                "K, M, G or T (binary), e.g. 1G or 512M");
  }
  const int64_t n = std::stoll(text.substr(0, digits));
  if (n == 0) return InvalidArgumentError("size \"", text, "\": must be positive");
  return n << shift;
}

int RunTopo(const TopoArgs& args, std::ostream& out, std::ostream& err) {
  StatusOr<numa::Topology> topo = numa::LoadTopology(args.topology);
  if (!topo.ok()) {
    err << "error: " << topo.status().ToString() << "\n";
    return 1;
  }
  if (args.measure) return Measure(args, *topo, out, err);
  if (!args.save.empty() || !args.threads.empty() || !args.bytes.empty() || args.quick) {
    err << "error: --save, --threads, --bytes and --quick only apply with --measure\n";
    return 1;
  }
  PrintTopology(*topo, args.format, out);
  return 0;
}

void RegisterTopo(CLI::App& app, std::function<int()>* action) {
  auto args = std::make_shared<TopoArgs>();
  CLI::App* cmd = app.add_subcommand(
      "topo",
      "Show the machine as the planner sees it (packages, NUMA nodes, L3 groups, cores, CPU "
      "ids, memory, node distances); --measure probes read bandwidth and calibrates kernels "
      "into a machine profile");
  cmd->add_option("--topology", args->topology,
                  "Another machine: an hwloc XML file (lstopo FILE.xml) or a synthetic "
                  "description like \"pack:2 numa:4 l3:2 core:8 pu:2\" (default: this one)");
  cmd->add_option("--format", args->format, "Output format: text or json")
      ->check(CLI::IsMember({"text", "json"}));
  cmd->add_flag("--measure", args->measure,
                "Measure this machine: per-node and cross-node read bandwidth, strided reads, "
                "STREAM check, kernel calibrations; prints or saves a machine profile (YAML)");
  cmd->add_option("--save", args->save, "With --measure: write the profile to this file");
  cmd->add_option("--threads", args->threads,
                  "With --measure: thread counts per node, e.g. 1,2,4 (default 1,2,4,... and "
                  "all cores of the node)");
  cmd->add_option("--bytes", args->bytes,
                  "With --measure: probe buffer size, e.g. 1G (default; 64M with --quick)");
  cmd->add_flag("--quick", args->quick,
                "With --measure: 64 MiB buffers, 3 passes, small GEMM (a smoke test, not a "
                "profile to plan with)");
  cmd->callback(
      [args, action] { *action = [args] { return RunTopo(*args, std::cout, std::cerr); }; });
}

}  // namespace moesplit::app
