// Checks the read-bandwidth probe (bandwidth.h) against a STREAM-style sum reduction, for 1 to
// N threads, and prints both with their ratio and the pattern that gave the probe's figure (the
// probe is the fastest of the plain two-stream read, the prefetched ones (prefetcht0 and
// prefetchnta) and the sum reduction, so the ratio is >= ~1 up to noise; "probe",
// "probe+prefetch" or "probe+prefetchnta" there says the yardstick
// reads faster than a compiled sum reduction does).
//
// On a shared machine another process can steal a whole measurement, so the two kernels are
// measured alternately for `rounds` rounds and each shows its best round (each round itself is
// the median of `passes` passes): both then face the same disturbances.
//
//   bench_bandwidth [--threads=N] [--bytes=MiB] [--passes=P] [--rounds=R]
//     --threads  highest thread count (default: std::thread::hardware_concurrency())
//     --bytes    buffer size in MiB (default 1024; >= 32x the 32 MiB L3 of Zen 4)
//     --passes   timed passes per measurement (default 7; the median is taken)
//     --rounds   alternating probe / sum-reduction rounds (default 3; the best is shown)
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>

#include "bench/bandwidth.h"

namespace moesplit::bench {
namespace {

struct Args {
  int max_threads = static_cast<int>(std::thread::hardware_concurrency());
  int64_t mib = 1024;
  int passes = 7;
  int rounds = 3;
};

bool ParseArgs(int argc, char** argv, Args* args) {
  for (int i = 1; i < argc; ++i) {
    const char* a = argv[i];
    if (std::strncmp(a, "--threads=", 10) == 0) {
      args->max_threads = std::atoi(a + 10);
    } else if (std::strncmp(a, "--bytes=", 8) == 0) {
      args->mib = std::atoll(a + 8);
    } else if (std::strncmp(a, "--passes=", 9) == 0) {
      args->passes = std::atoi(a + 9);
    } else if (std::strncmp(a, "--rounds=", 9) == 0) {
      args->rounds = std::atoi(a + 9);
    } else {
      std::fprintf(
          stderr,
          "unknown flag %s\nusage: %s [--threads=N] [--bytes=MiB] [--passes=P] [--rounds=R]\n", a,
          argv[0]);
      return false;
    }
  }
  if (args->max_threads < 1) args->max_threads = 1;
  return args->mib > 0 && args->passes > 0 && args->rounds > 0;
}

// The best (highest-median) of `rounds` measurements of each kernel, taken alternately.
void BestOfRounds(int threads, const Args& args, numa::ReadResult* probe, numa::ReadResult* sum) {
  ReadBandwidthOptions o;
  o.bytes = args.mib << 20;
  o.passes = args.passes;
  for (int r = 0; r < args.rounds; ++r) {
    o.kernel = ReadKernel::kProbe;
    const numa::ReadResult p = MeasureReadBandwidth(threads, o);
    if (p.gbps > probe->gbps) *probe = p;
    o.kernel = ReadKernel::kSumReduction;
    const numa::ReadResult s = MeasureReadBandwidth(threads, o);
    if (s.gbps > sum->gbps) *sum = s;
  }
}

int Run(const Args& args) {
  std::printf(
      "read bandwidth, %lld MiB buffer, best of %d rounds of median-of-%d passes (GB = "
      "1e9 bytes)\n",
      static_cast<long long>(args.mib), args.rounds, args.passes);
  std::printf("%7s  %22s  %22s  %11s  %s\n", "threads", "probe GB/s [min-max]",
              "sum-red GB/s [min-max]", "probe/sum", "probe's pattern");
  for (int t = 1; t <= args.max_threads; ++t) {
    numa::ReadResult probe, sum;
    BestOfRounds(t, args, &probe, &sum);
    std::printf("%7d  %6.1f [%6.1f-%6.1f]  %6.1f [%6.1f-%6.1f]  %11.3f  %s\n", t, probe.gbps,
                probe.min_gbps, probe.max_gbps, sum.gbps, sum.min_gbps, sum.max_gbps,
                probe.gbps / sum.gbps, numa::ReadKernelName(probe.kernel));
  }
  return 0;
}

}  // namespace
}  // namespace moesplit::bench

int main(int argc, char** argv) {
  moesplit::bench::Args args;
  if (!moesplit::bench::ParseArgs(argc, argv, &args)) return 2;
  return moesplit::bench::Run(args);
}
