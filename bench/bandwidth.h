// In-program DRAM read-bandwidth probe, the yardstick for every "fraction of bandwidth" counter:
// a decode kernel is as good as the share of this number it streams weights at.
//
// Method (bandwidth.cc):
//   - one LargeBuffer of `bytes` (default 1 GiB = 32x Zen 4's 32 MiB L3, so no pass is served
//     from cache), cut into n_threads private slices of bytes / n_threads (64-byte aligned);
//   - n_threads std::threads, each first-touches (writes) its own slice, so pages sit on its node;
//   - per pass: all threads start together at a barrier, each reads every byte of its slice
//     once and stamps its start and end; the pass lasts from the first start to the last end
//     (the slowest thread counts): GB/s = bytes read by all threads / time / 1e9 (decimal GB);
//   - one untimed warm-up pass, then `passes` timed ones; the median is reported with min/max.
//
// Two read kernels:
//   kProbe         SSE2 128-bit loads, four 64-bit integer add chains per 64-byte line (every
//                  byte read once; the adds are never the bottleneck: ~4 loads/line at 2/cycle),
//                  each thread's slice as two sequential streams (numa/bandwidth_probe.h),
//                  measured four times: plainly, with a software prefetch 4 KiB ahead on each
//                  stream (prefetcht0, and prefetchnta as the decode kernels since 2026-12-03:
//                  on the Zen 5 VM 1.27-1.45x / 1.09-1.11x the T0 pattern at 1 / 2 threads),
//                  and as the sum reduction below; the fastest median is the result
//                  (`pattern` says which). Why: a fraction of bandwidth is taken against the
//                  fastest read pattern, never a slower one, and the expert kernels prefetch; on
//                  the Zen 4 VM (2026-11-29, third session, quiet, GB/s at 1 / 2 threads) the
//                  plain read gave 21 (2 threads) where the prefetched one gave 34-38, and the
//                  sum reduction 33.8 / 37.1 against the better probe's 27.0 / 35.6;
//   kSumReduction  the STREAM-style check: s += a[i] over doubles in plain C++ with 8
//                  independent partial sums (what a compiler makes of a sum reduction).
// bench_bandwidth prints both; they agree within a few % on Zen 4 (README.md), which is the
// evidence that the probe measures memory, not its own instruction stream.
#pragma once

#include <cstdint>

namespace moesplit::bench {

enum class ReadKernel { kProbe, kSumReduction };

struct ReadBandwidthOptions {
  int64_t bytes = int64_t{1} << 30;  // total buffer (all threads together)
  int passes = 7;                    // timed passes; the median is reported
  ReadKernel kernel = ReadKernel::kProbe;
};

struct ReadBandwidth {
  int threads = 0;
  int64_t bytes_per_pass = 0;  // bytes read per pass by all threads together
  double gbps = 0;             // median over passes, 1e9 bytes/s
  double min_gbps = 0;
  double max_gbps = 0;
  double checksum = 0;       // of the last pass of the last pattern (keeps the reads alive)
  const char* pattern = "";  // the read kernel measured: "probe", "probe+prefetch", "stream"
};

// Runs the probe with n_threads (>= 1) threads. Allocates and frees its buffer (so call it
// before building large benchmark inputs). Takes ~0.3 s per GiB of buffer at 30 GB/s per
// pattern (kProbe runs three).
ReadBandwidth MeasureReadBandwidth(int n_threads, const ReadBandwidthOptions& options = {});

}  // namespace moesplit::bench
