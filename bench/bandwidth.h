// In-program DRAM read-bandwidth probe, the yardstick for every "fraction of bandwidth" counter:
// a decode kernel is as good as the share of this number it streams weights at.
//
// Method: numa::MeasureRead (numa/bandwidth_probe.h, the code `moesplit topo --measure` and
// `moesplit bench --verbose` run) with n_threads readers pinned to the machine's first cores
// (numa::FirstCoresReadOptions) over one buffer of `bytes` (default 1 GiB = 32x Zen 4's 32 MiB
// L3, so no pass is served from cache) bound to the first node and first-touched by its readers;
// per read pattern a warm-up and `passes` timed passes, each lasting from the first reader's
// start to the last one's end (GB/s = bytes / time / 1e9, decimal GB); the median is reported
// with min / max.
//
// Two read kernels:
//   kProbe         the fastest median of four patterns (ReadResult::kernel names it): the
//                  two-stream read plainly, with a software prefetch 4 KiB ahead on each stream
//                  (prefetcht0, and prefetchnta as the decode kernels since 2026-12-03: on the Zen
//                  5 VM 1.27-1.45x / 1.09-1.11x the T0 pattern at 1 / 2 threads), and the sum
//                  reduction below. Why: a fraction of bandwidth is taken against the fastest read
//                  pattern, never a slower one, and the expert kernels prefetch; on the Zen 4 VM
//                  (2026-11-29, third session, quiet, GB/s at 1 / 2 threads) the plain read gave 21
//                  (2 threads) where the prefetched one gave 34-38, and the sum reduction 33.8
//                  / 37.1 against the better probe's 27.0 / 35.6;
//   kSumReduction  the STREAM-style check alone: s += a[i] over doubles in plain C++ with 8
//                  independent partial sums (what a compiler makes of a sum reduction).
// bench_bandwidth prints both; they agree within a few % on Zen 4 (README.md), which is the
// evidence that the probe measures memory, not its own instruction stream.
#pragma once

#include <cstdint>

#include "numa/bandwidth_probe.h"

namespace moesplit::bench {

enum class ReadKernel { kProbe, kSumReduction };

struct ReadBandwidthOptions {
  int64_t bytes = int64_t{1} << 30;  // total buffer (all threads together)
  int passes = 7;                    // timed passes; the median is reported
  ReadKernel kernel = ReadKernel::kProbe;
};

// Runs the probe with n_threads (>= 1, at most the machine's CPUs: CHECKed) pinned readers.
// Allocates and frees its buffer (so call it before building large benchmark inputs). Takes ~0.3
// s per GiB of buffer at 30 GB/s per pattern (kProbe runs four). The result is the fastest
// pattern's (ReadResult::kernel names it).
numa::ReadResult MeasureReadBandwidth(int n_threads, const ReadBandwidthOptions& options = {});

}  // namespace moesplit::bench
