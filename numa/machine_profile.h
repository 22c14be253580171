// MachineProfile: what `moesplit topo --measure` measured on a machine and the planner's cost
// model reads — read bandwidth per node against thread count, cross-node bandwidth, and three
// kernel calibrations (how close the decode kernel streams to the probe, GEMM throughput per
// core for prefill, the cost of one parallel-for barrier). Saved as YAML next to the topology so
// a server measured once can be planned anywhere (configs/profiles/ holds examples made from
// published figures, marked measured: false).
//
// Units: GB/s = 1e9 bytes/s; GMAC/s = 1e9 multiply-adds/s.
#pragma once

#include <string>
#include <vector>

#include "core/base/status.h"

namespace moesplit::numa {

struct BandwidthPoint {
  int threads = 0;  // workers pinned to distinct physical cores of the node
  double gbps = 0;  // median sequential read, all threads together
};

struct NodeProfile {
  int node = 0;                       // OS node id
  std::vector<BandwidthPoint> read;   // local reads, ascending threads (at least one point)
  double stream_gbps = 0;             // STREAM-style sum reduction at the largest thread count
  double strided_gbps = 0;            // one 64 B line per 256 B stride, largest thread count
};

struct CrossProfile {
  int cpu_node = 0;  // where the reading threads run
  int mem_node = 0;  // where the memory is
  int threads = 0;
  double gbps = 0;
};

struct KernelProfile {
  std::string isa;                // kernel tier the calibration ran ("avx512vnni")
  double decode_fraction = 0;     // Q4_K decode GEMV weight bytes/s ÷ probe read GB/s, same threads
  double gemm_gmacs_per_core = 0; // Q4_K x Q8_K GEMM with many tokens, per core
  double barrier_us = 0;          // one empty parallel-for over one node's workers
};

struct MachineProfile {
  std::string source;      // the file it came from, or what it was derived from
  bool measured = false;   // true only when written by `topo --measure`
  std::string cpu_model;
  std::string topology;    // Topology::source it was measured on
  std::vector<NodeProfile> nodes;
  std::vector<CrossProfile> cross;
  KernelProfile kernels;

  const NodeProfile* FindNode(int node) const;
  // Local read GB/s of `node` with `threads` workers: linear between measured points, through
  // (0, 0) below the first, flat above the last. 0 when the node is not in the profile.
  double ReadGbps(int node, int threads) const;
  // Measured cross-node GB/s, or 0 when that pair was not measured.
  double CrossGbps(int cpu_node, int mem_node) const;
};

std::string MachineProfileToYaml(const MachineProfile& profile);
// `name` is used in errors ("profile.yaml: nodes[1].read[0].gbps: expected a number").
StatusOr<MachineProfile> MachineProfileFromYaml(const std::string& text, const std::string& name);
Status SaveMachineProfile(const MachineProfile& profile, const std::string& path);
StatusOr<MachineProfile> LoadMachineProfile(const std::string& path);

}  // namespace moesplit::numa
