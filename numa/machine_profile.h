// MachineProfile: what `moesplit topo --measure` measured on a machine and the planner's cost
// model reads — read bandwidth per node against thread count, cross-node bandwidth, and three
// kernel calibrations (how close the decode kernel streams to the probe, GEMM throughput per
// core for prefill, the cost of one parallel-for barrier). Saved as YAML next to the topology so
// a server measured once can be planned anywhere (configs/profiles/ holds examples made from
// published figures, marked measured: false).
//
// Units: GB/s = 1e9 bytes/s; GMAC/s = 1e9 multiply-adds/s.
#pragma once

#include <map>
#include <utility>
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
  double decode_fraction = 0;     // MoE decode weight bytes/s ÷ probe read GB/s, same threads
  // The same for the non-expert weights (one-token GEMV over large dense matrices); 0 = not
  // measured: decode_fraction.
  double dense_decode_fraction = 0;
  double gemm_gmacs_per_core = 0; // dense prefill: a Q4_K projection over 512 tokens, per core
  // Routed experts in prefill: the MoE layer over 512 tokens (dispatch, SiLU, combine in the
  // time; ~48 tokens per expert), per core. 0 = not measured: gemm_gmacs_per_core x
  // kAssumedMoeShare (below).
  double moe_gmacs_per_core = 0;
  // The same at several batch sizes, keyed by tokens per expert (P x k / E: V2-Lite's 512-token
  // batch gives 48, DeepSeek-V3's 16): an expert's GEMM with few tokens reuses each weight row
  // less. Empty = moe_gmacs_per_core at every size.
  std::map<double, double> moe_gmacs_by_tokens_per_expert;
  // Dense SwiGLU FFN prefill (DeepSeek's leading dense layers, shared experts) per core, q4_K.
  // 0 = not measured: gemm_gmacs_per_core.
  double ffn_gmacs_per_core = 0;
  // Dense prefill GMAC/s per core by weight type ("q6_K": 120, ...), the same projection as
  // gemm_gmacs_per_core (which is q4_K's); a type absent here runs at gemm_gmacs_per_core.
  std::map<std::string, double> gemm_gmacs_by_type;
  // Routed-expert decode on one core by expert type ("iq2_xxs": 27, ...): GB/s of the file's
  // bytes, one thread, one token, top-8 of a V3-shape layer (7168 x 2048 experts) read from DRAM
  // in the layout the engine stores them in. What a core's kernel turns out when the memory is
  // not its limit: T threads compute at most T x this, and where that is below the memory's
  // rate decode is compute-bound (the 2-core development VM: IQ2_XXS / IQ1_S). Empty = not
  // measured: no cap.
  std::map<std::string, double> expert_decode_gbps_per_core;
  double barrier_us = 0;          // one empty parallel-for over one node's workers
};

// The MoE path's prefill rate as a share of the dense (q4_K) rate where a profile has no
// measurement, by tokens per expert: what `moesplit topo --measure` found on the development box
// (Zen 5, avx512vnni; dense 210 GMAC/s per core, MoE 40 / 61 / 100 at 6 / 16 / 48 tokens per
// expert). Interpolated like a measured curve.
inline constexpr std::pair<double, double> kAssumedMoeShare[] = {{6, 0.19}, {16, 0.29}, {48, 0.48}};

// Routed-expert prefill GMAC/s per core at `tokens_per_expert`: the measured curve
// interpolated in log(tokens per expert) and clamped at its ends, else moe_gmacs_per_core, else
// the assumed share of the dense rate.
double MoeGmacsPerCore(const KernelProfile& k, double tokens_per_expert);

// How much slower than Q4_K a mix of weight types multiplies: sum_t share_t x (rate(q4_K) /
// rate(t)), shares by elements; 1 for an empty mix or a profile without per-type rates.
// E.g. DeepSeek-V3 Q4_K_M's experts, ~2/3 q4_K and ~1/3 q6_K at half the rate: 1.33.
double TypeMixSlowdown(const KernelProfile& k, const std::map<std::string, uint64_t>& mix);

// Seconds per token for the routed experts' kernels alone on `threads` cores: routed_bytes (per
// token) split by the model's routed bytes per type, each share / (threads x its per-core rate).
// Types without a rate add nothing (they are taken as memory-bound); 0 when none has one.
// E.g. V3 UD-IQ1_S-like, 8 x 10.6 MB x 58 layers = 4.9 GB/token of iq1_s at 25 GB/s per core:
// 2 threads 98 ms (memory at 70 GB/s: 70 ms, so compute-bound), 16 threads 12 ms.
double ExpertDecodeComputeSeconds(const KernelProfile& k,
                                  const std::map<std::string, uint64_t>& bytes_by_type,
                                  double routed_bytes, int threads);

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
