// `moesplit topo --measure`: the measurements behind a machine profile (numa/machine_profile.h)
// on the live machine —
//   per node      probe read GB/s at 1, 2, 4, ... threads up to the node's cores (one pinned
//                 reader per physical core, memory bound to the node), strided reads and the
//                 STREAM-style sum at the largest count (probe vs STREAM must agree within 10%);
//   cross-node    every ordered pair (a, b) of nodes with CPUs: all cores of a reading memory
//                 bound to b;
//   kernels       on the first node with CPUs, through the engine's MoE path
//                 (apps/moe_calibration.h): decode weight GB/s over the probe at the same threads
//                 (decode_fraction), prefill GMAC/s on one core (gemm_gmacs_per_core; the bare
//                 Q4_K x Q8_K GEMM kernel is reported beside it), the median cost of an empty
//                 parallel-for over the node's workers.
// Every figure is measured here; what the OS did not honour (pinning, placement) is listed as
// warnings in the report, never a crash.
#pragma once

#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include "core/base/status.h"
#include "cpu_kernels/cpu_features.h"
#include "cpu_kernels/gemv/gemv.h"
#include "numa/machine_profile.h"
#include "numa/topology.h"

namespace moesplit::app {

struct MeasureOptions {
  std::vector<int> threads;          // per-node thread counts; empty: 1, 2, 4, ... and all cores
  int64_t bytes = int64_t{1} << 30;  // probe buffer and decode weight set, bytes
  int passes = 5;                    // timed passes per bandwidth figure (median reported)
  bool quick = false;                // small GEMM shape and few barrier repetitions (tests)
  cpu::IsaTier tier = cpu::IsaTier::kScalar;  // kernel tier of the calibrations
  gemv::DecodeRead decode_read = gemv::DecodeRead::kPrefetched;  // their decode read mode
};

// Thread counts measured on a node of `cores` physical cores: `requested` clipped to
// [1, cores] (empty: the powers of two below cores), always ending with `cores`; ascending.
std::vector<int> ThreadCounts(const std::vector<int>& requested, int cores);

// The bare Q4_K x Q8_K GEMM kernel (the peak the MoE path is compared with), 256 tokens, one thread
// pinned to `cpu`: 1e9 multiply-adds / s.
StatusOr<double> MeasureGemmGmacs(int cpu, const MeasureOptions& options,
                                  std::vector<std::string>* warnings);

// Median wall time of an empty ParallelFor (one task per worker) over a numa::ThreadPool of
// cpus.size() workers pinned to `cpus`, microseconds.
double MeasureBarrierUs(const std::vector<int>& cpus, const MeasureOptions& options,
                        std::vector<std::string>* warnings);

// Runs everything above on the live machine `topo` and returns the profile (measured = true).
// Tables and the STREAM check go to `report`, one progress line per step to `progress`.
StatusOr<numa::MachineProfile> MeasureMachine(const numa::Topology& topo,
                                              const MeasureOptions& options, std::ostream& report,
                                              std::ostream& progress);

}  // namespace moesplit::app
