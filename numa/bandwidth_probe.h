// Read-bandwidth probe for `moesplit topo --measure`: reader threads pinned to chosen CPUs
// (one per physical core) read a buffer placed on a chosen NUMA node. The yardstick for the
// planner's cost model and for every "fraction of bandwidth" figure.
//
// Method (bandwidth_probe.cc; bench/bandwidth.h and `moesplit bench --verbose` run it too):
//   - the buffer (`bytes`, default 1 GiB = 32x a 32 MiB L3, so no pass is served from cache) is
//     allocated with AllocateOnNodes({mem_node}) (mbind + THP) and cut into one 64-byte-aligned
//     slice per thread; each thread pins itself to its CPU, then writes its slice (first touch
//     under the node's policy); a sampled move_pages check confirms the pages sit on mem_node;
//   - per pass all threads start together at a barrier, read their slice once and stamp start
//     and end; a pass lasts from the first start to the last end (the slowest thread counts):
//     GB/s = bytes read by all threads / pass time / 1e9 (decimal GB);
//   - per read kernel one untimed warm-up pass, then `passes` timed ones: median, min and max;
//     of several kernels (ReadOptions::kernels) the fastest median is reported.
//
// Read kernels:
//   kProbe    SSE2 128-bit loads, four 64-bit integer add chains per 64-byte line (every byte
//             read once; 4 loads per line at 2 loads/cycle never limit a DRAM stream), each
//             thread's slice read as two sequential streams, its two halves in turn (one core
//             reads 5-10% more from two streams than from one; see ProbeTwoStreams);
//   kStream   the STREAM-style check: s += a[i] over doubles with 8 independent partial sums
//             (what a compiler makes of a sum reduction); probe and STREAM should agree within
//             10% — the evidence that the probe measures memory, not its own instructions;
//   kProbePrefetch  kProbe with a software prefetch (prefetcht0) 4 KiB ahead on each stream, as
//             the expert kernels do: on the Zen 4 VM of docs/PERFORMANCE.md (2026-11-29, third
//             session) the hardware prefetcher alone left the plain probe at ~0.7 of what the
//             kernels read, and this pattern read 1.5-2x the plain one; bench's yardstick takes
//             the faster of the two (bench/bandwidth.h);
//   kProbePrefetchNta  kProbePrefetch with prefetchnta, as the 16-row decode kernels since
//             2026-12-03: on Zen 4 and later a T0 / T1 line lands in L2 (T1) or is kept there on
//             eviction, an NTA line goes to L1 only; on the Zen 5 VM the kernels so read more
//             than kProbePrefetch did (V3 layer decode bw_frac 1.0-1.16 against it), so the
//             yardstick takes this pattern too (docs/PERFORMANCE.md, 2026-12-03);
//   kStrided  one whole 64-byte line out of every 256 bytes (a stride that defeats contiguous
//             streaming): GB/s counts the lines read, 64 B each, i.e. a quarter of the span.
//
// Failures the OS imposes (a CPU outside the allowed set, mbind refused, pages elsewhere) are
// warnings in the result — the figure is still measured, unpinned or misplaced — never a crash.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/base/status.h"

namespace moesplit::numa {

enum class ReadKernel { kProbe, kStream, kStrided, kProbePrefetch, kProbePrefetchNta };
// "probe", "stream", "strided", "probe+prefetch", "probe+prefetchnta"
const char* ReadKernelName(ReadKernel kernel);

// One pass of `kernel` over [p, p + bytes) on the calling thread (p 64-byte aligned, bytes a
// multiple of 64, of 256 for kStrided); the result only keeps the reads from being optimised
// away.
double ReadOnce(ReadKernel kernel, const uint8_t* p, int64_t bytes);

struct ReadOptions {
  std::vector<int> cpus;  // OS CPU ids, one reader thread per entry (one per physical core)
  int mem_node = 0;       // OS NUMA node id the buffer is bound to
  // The read kernels, each timed in turn over the same buffer (allocated and first-touched
  // once): a warm-up and `passes` timed passes per kernel. The result is the kernel with the
  // fastest median: "a fraction of bandwidth" is taken against the fastest read pattern, never a
  // slower one. kStrided counts other bytes, so it is measured alone.
  std::vector<ReadKernel> kernels = {ReadKernel::kProbe};
  int64_t bytes = int64_t{1} << 30;  // whole buffer, all threads together
  int passes = 5;                    // timed passes per kernel after one warm-up; median reported
};

// The probe's patterns the expert kernels' reads resemble: the plain two-stream read and the
// same with prefetcht0 / prefetchnta 4 KiB ahead. A yardstick for "fraction of bandwidth" takes
// the fastest of them (on the Zen 5 VM the prefetchnta one reads 1.09-1.11x the others with 2
// threads, 1.27-1.45x with 1; on the Zen 4 VM the prefetcht0 one 1.5-2x the plain read).
inline std::vector<ReadKernel> KernelLikeReads() {
  return {ReadKernel::kProbe, ReadKernel::kProbePrefetch, ReadKernel::kProbePrefetchNta};
}

struct ReadResult {
  int threads = 0;
  ReadKernel kernel = ReadKernel::kProbe;  // the fastest of options.kernels: what gbps is of
  int64_t bytes_per_pass = 0;  // bytes counted per pass, all threads (strided: lines read x 64)
  double gbps = 0;             // median over that kernel's passes, 1e9 bytes/s
  double min_gbps = 0;
  double max_gbps = 0;
  double checksum = 0;  // of the last pass of the last kernel (keeps the reads alive)
  // What was not honoured: "cpu 5: not pinned (...)", "memory: 40% of sampled pages on node 1,
  // not node 0", mbind / THP warnings of the allocation. Empty when everything was.
  std::vector<std::string> warnings;
};

// Measures with options.cpus.size() (>= 1) pinned threads. Errors: an empty cpu list, passes
// < 1, no kernel or kStrided beside others, a buffer smaller than one 256-byte stride per thread
// (InvalidArgument); a node this machine does not have or memory that cannot be mapped (from
// AllocateOnNodes).
StatusOr<ReadResult> MeasureRead(const ReadOptions& options);

// Options for `threads` readers on the live machine's first cores (one CPU per physical core,
// nodes in order; past the last core, the other hardware threads) with the buffer on the first
// node: the readers a program gets when it names no placement (bench's yardstick, `moesplit
// bench --verbose` without a plan). Errors: threads < 1 or more than the machine's CPUs
// (InvalidArgument), the topology (from LoadTopology).
StatusOr<ReadOptions> FirstCoresReadOptions(int threads);

}  // namespace moesplit::numa
