// Topology: the machine as the planner and the node pools see it — packages (sockets) → NUMA
// nodes → L3 groups → cores → PUs (hardware threads), with real OS cpusets (on EPYC with SMT the
// two PUs of core c are c and c + cores_per_machine, so "node n owns CPUs [n*k, (n+1)*k)" is
// false), local memory per node and the ACPI SLIT distances between nodes.
//
// Built with hwloc from three sources, so that any server can be planned and tested on a laptop:
//   LoadTopology("")                                 the live machine
//   LoadTopology("configs/topologies/x.xml")         an hwloc XML export (lstopo x.xml)
//   LoadTopology("pack:2 numa:4 l3:8 core:8 pu:2")   an hwloc synthetic description
// Plain data after loading: copyable, comparable in tests, no hwloc handle kept.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/base/status.h"

namespace moesplit::numa {

struct Core {
  int id = 0;            // hwloc logical index of the core, machine-wide
  std::vector<int> pus;  // OS ids of its hardware threads, ascending; pus[0] is where a pool pins
};

struct L3Group {
  uint64_t l3_bytes = 0;    // size of the shared L3; 0 when the source has no cache objects
  std::vector<Core> cores;  // cores sharing this L3 (one group per node when there is no L3 info)
};

struct NumaNode {
  int id = 0;                      // OS index: what libnuma, numactl and move_pages call it
  int package = 0;                 // index into Topology::packages
  uint64_t memory_bytes = 0;       // local memory (0 when unknown)
  std::vector<L3Group> l3_groups;  // its cores, grouped by L3; empty for a memory-only node (CXL)

  int NumCores() const;
  std::vector<int> Cpus() const;         // every PU of the node, ascending OS ids
  std::vector<int> PrimaryCpus() const;  // pus[0] of every core (one worker per physical core)
  std::vector<int> SiblingCpus() const;  // the other PUs (SMT siblings), ascending OS ids
  // PrimaryCpus() then SiblingCpus(): the order to hand a node's CPUs to workers, so that n
  // workers get n physical cores before any shares one (bandwidth: two PUs of a core share its
  // L1 / L2 and its line fill buffers).
  std::vector<int> CoresFirstCpus() const;
};

struct Package {
  int id = 0;                 // OS index of the package (socket)
  std::vector<int> nodes;     // indices into Topology::nodes
};

struct Topology {
  std::string source;        // "live", "xml:PATH" or "synthetic:DESC"
  std::string cpu_model;     // hwloc's CPUModel info of the first package; may be empty
  std::vector<Package> packages;
  std::vector<NumaNode> nodes;  // ascending id; every PU of the machine is in exactly one node
  // [nodes x nodes] row-major, ACPI SLIT style relative latencies (10 = local), indexed like
  // `nodes`; empty when the source gives none (then Distance() is 10 local / 20 same package /
  // 32 other package — typical EPYC values).
  std::vector<int> distances;

  int NumCores() const;
  int NumPus() const;
  uint64_t MemoryBytes() const;
  int Distance(int node_index_a, int node_index_b) const;  // indices into `nodes`
  // Index into `nodes` of the node with OS id `id`, or -1.
  int NodeIndex(int id) const;
};

// Loads from `spec` as described above: "" = live; a path that exists = XML; anything else is
// tried as a synthetic description. Errors name the spec and what hwloc said (InvalidArgument
// for a bad synthetic string, NotFound / DataLoss for an XML file that is missing / broken).
StatusOr<Topology> LoadTopology(const std::string& spec);
// The same for the text of an hwloc XML export; `name` stands for it in errors and in
// Topology::source ("xml:NAME"). Any text gives a topology or an error (tests/fuzz).
StatusOr<Topology> LoadTopologyXml(std::string_view xml, const std::string& name);

// The tree `moesplit topo` prints: one line per package / node (memory, cores, cpuset as
// ranges, e.g. "0-15,64-79") / L3 group, then the distance matrix.
std::string FormatTopology(const Topology& topo);

// "0-3,8,10-11" for {0,1,2,3,8,10,11}; the inverse parses such lists (e.g. --nodes 0,1 and
// cpusets in plans). Parse errors name the text.
std::string FormatCpuList(const std::vector<int>& ids);
StatusOr<std::vector<int>> ParseCpuList(const std::string& text);

}  // namespace moesplit::numa
