#include "bench/bandwidth.h"

#include <algorithm>
#include <barrier>
#include <chrono>
#include <span>
#include <thread>
#include <vector>

#include "bench/bench_common.h"
#include "core/base/status.h"
#include "numa/bandwidth_probe.h"

namespace moesplit::bench {
namespace {

constexpr int64_t kLine = 64;  // bytes per cache line; slices are whole lines

// The result of one kernel's timed passes. begin_s / end_s: [total_passes x n_threads] seconds,
// pass 0 the untimed warm-up. A pass lasts from the first start to the last end, so a
// late-starting or slow thread lengthens it (a conservative figure, never an optimistic one).
ReadBandwidth Summarize(numa::ReadKernel kernel, const double* begin_s, const double* end_s,
                        int total_passes, int n_threads, int64_t bytes_per_pass) {
  std::vector<double> gbps;  // [passes], GB/s = bytes of all slices / pass time / 1e9
  for (int pass = 1; pass < total_passes; ++pass) {
    const double* b = begin_s + pass * n_threads;
    const double* e = end_s + pass * n_threads;
    const double dt = *std::max_element(e, e + n_threads) - *std::min_element(b, b + n_threads);
    gbps.push_back(static_cast<double>(bytes_per_pass) / dt * 1e-9);
  }
  std::sort(gbps.begin(), gbps.end());
  ReadBandwidth result;
  result.threads = n_threads;
  result.bytes_per_pass = bytes_per_pass;
  result.gbps = gbps[gbps.size() / 2];
  result.min_gbps = gbps.front();
  result.max_gbps = gbps.back();
  result.pattern = numa::ReadKernelName(kernel);
  return result;
}

// Each of `kernels` (numa/bandwidth_probe.h's read kernels, the same code `moesplit topo
// --measure` runs) in turn over one buffer, first-touched once: a warm-up and options.passes
// timed passes each. Returns the kernel with the fastest median.
ReadBandwidth MeasureFastest(std::span<const numa::ReadKernel> kernels, int n_threads,
                             const ReadBandwidthOptions& options) {
  MOESPLIT_CHECK(n_threads >= 1 && options.passes >= 1 && !kernels.empty());
  // Slice = bytes / n_threads rounded down to whole lines: [n_threads x slice] bytes.
  const int64_t slice = options.bytes / n_threads / kLine * kLine;
  MOESPLIT_CHECK(slice > 0, "buffer of ", options.bytes, " bytes too small");
  LargeBuffer buffer(static_cast<size_t>(slice * n_threads));
  const int total_passes = options.passes + 1;  // pass 0 of each kernel: warm-up, untimed
  const int n_kernels = static_cast<int>(kernels.size());
  std::vector<double> sums(static_cast<size_t>(n_threads), 0.0);  // [n_threads] last pass
  // When each thread's read began and ended: [n_kernels x total_passes x n_threads] seconds on
  // one steady clock.
  using Clock = std::chrono::steady_clock;
  const Clock::time_point origin = Clock::now();
  const int64_t per_kernel = int64_t{total_passes} * n_threads;
  std::vector<double> begin_s(static_cast<size_t>(n_kernels * per_kernel));
  std::vector<double> end_s(begin_s.size());
  std::barrier sync(n_threads);
  std::vector<std::thread> readers;
  readers.reserve(static_cast<size_t>(n_threads));
  for (int t = 0; t < n_threads; ++t) {
    readers.emplace_back([&, t] {
      uint8_t* mine = buffer.data() + t * slice;
      std::fill(reinterpret_cast<double*>(mine), reinterpret_cast<double*>(mine + slice), 1.0);
      for (int k = 0; k < n_kernels; ++k) {
        for (int pass = 0; pass < total_passes; ++pass) {
          sync.arrive_and_wait();  // everyone has finished the previous pass (or the first touch)
          const size_t i = static_cast<size_t>(k * per_kernel + pass * n_threads + t);
          begin_s[i] = std::chrono::duration<double>(Clock::now() - origin).count();
          sums[static_cast<size_t>(t)] = numa::ReadOnce(kernels[k], mine, slice);
          end_s[i] = std::chrono::duration<double>(Clock::now() - origin).count();
        }
      }
    });
  }
  for (std::thread& r : readers) r.join();

  ReadBandwidth best;
  for (int k = 0; k < n_kernels; ++k) {
    const ReadBandwidth r =
        Summarize(kernels[k], begin_s.data() + k * per_kernel, end_s.data() + k * per_kernel,
                  total_passes, n_threads, slice * n_threads);
    if (k == 0 || r.gbps > best.gbps) best = r;
  }
  for (double s : sums) best.checksum += s;
  return best;
}

}  // namespace

ReadBandwidth MeasureReadBandwidth(int n_threads, const ReadBandwidthOptions& options) {
  if (options.kernel == ReadKernel::kSumReduction) {
    constexpr numa::ReadKernel kStream[] = {numa::ReadKernel::kStream};
    return MeasureFastest(kStream, n_threads, options);
  }
  constexpr numa::ReadKernel kPatterns[] = {
      numa::ReadKernel::kProbe, numa::ReadKernel::kProbePrefetch,
      numa::ReadKernel::kProbePrefetchNta, numa::ReadKernel::kStream};
  return MeasureFastest(kPatterns, n_threads, options);
}

}  // namespace moesplit::bench
