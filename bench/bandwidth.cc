#include "bench/bandwidth.h"

#include <algorithm>
#include <barrier>
#include <chrono>
#include <thread>
#include <vector>

#include "bench/bench_common.h"
#include "core/base/status.h"
#include "numa/bandwidth_probe.h"

namespace moesplit::bench {
namespace {

constexpr int64_t kLine = 64;  // bytes per cache line; slices are whole lines

// One measurement with one of numa/bandwidth_probe.h's read kernels (the same code `moesplit
// topo --measure` runs).
ReadBandwidth MeasureWith(numa::ReadKernel kernel, int n_threads,
                          const ReadBandwidthOptions& options) {
  MOESPLIT_CHECK(n_threads >= 1 && options.passes >= 1);
  // Slice = bytes / n_threads rounded down to whole lines: [n_threads x slice] bytes.
  const int64_t slice = options.bytes / n_threads / kLine * kLine;
  MOESPLIT_CHECK(slice > 0, "buffer of ", options.bytes, " bytes too small");
  LargeBuffer buffer(static_cast<size_t>(slice * n_threads));
  const int total_passes = options.passes + 1;                    // pass 0: warm-up, untimed
  std::vector<double> sums(static_cast<size_t>(n_threads), 0.0);  // [n_threads] last pass
  // Per pass and thread: when its read began and ended, [total_passes x n_threads] seconds on
  // one steady clock. A pass lasts from the first start to the last end, so a late-starting or
  // slow thread lengthens it (a conservative figure, never an optimistic one).
  using Clock = std::chrono::steady_clock;
  const Clock::time_point origin = Clock::now();
  std::vector<double> begin_s(static_cast<size_t>(total_passes * n_threads));
  std::vector<double> end_s(begin_s.size());
  std::barrier sync(n_threads);
  std::vector<std::thread> readers;
  readers.reserve(static_cast<size_t>(n_threads));
  for (int t = 0; t < n_threads; ++t) {
    readers.emplace_back([&, t] {
      uint8_t* mine = buffer.data() + t * slice;
      std::fill(reinterpret_cast<double*>(mine), reinterpret_cast<double*>(mine + slice), 1.0);
      for (int pass = 0; pass < total_passes; ++pass) {
        sync.arrive_and_wait();  // everyone has finished the previous pass (or the first touch)
        const size_t i = static_cast<size_t>(pass * n_threads + t);
        begin_s[i] = std::chrono::duration<double>(Clock::now() - origin).count();
        sums[static_cast<size_t>(t)] = numa::ReadOnce(kernel, mine, slice);
        end_s[i] = std::chrono::duration<double>(Clock::now() - origin).count();
      }
    });
  }
  for (std::thread& r : readers) r.join();

  std::vector<double> gbps;  // [passes], GB/s = bytes of all slices / pass time / 1e9
  for (int pass = 1; pass < total_passes; ++pass) {
    const auto b = begin_s.begin() + pass * n_threads;
    const auto e = end_s.begin() + pass * n_threads;
    const double dt = *std::max_element(e, e + n_threads) - *std::min_element(b, b + n_threads);
    gbps.push_back(static_cast<double>(slice * n_threads) / dt * 1e-9);
  }
  std::sort(gbps.begin(), gbps.end());
  ReadBandwidth result;
  result.threads = n_threads;
  result.bytes_per_pass = slice * n_threads;
  result.gbps = gbps[gbps.size() / 2];
  result.min_gbps = gbps.front();
  result.max_gbps = gbps.back();
  for (double s : sums) result.checksum += s;
  result.pattern = numa::ReadKernelName(kernel);
  return result;
}

}  // namespace

ReadBandwidth MeasureReadBandwidth(int n_threads, const ReadBandwidthOptions& options) {
  if (options.kernel == ReadKernel::kSumReduction) {
    return MeasureWith(numa::ReadKernel::kStream, n_threads, options);
  }
  ReadBandwidth best = MeasureWith(numa::ReadKernel::kProbe, n_threads, options);
  for (numa::ReadKernel k : {numa::ReadKernel::kProbePrefetch, numa::ReadKernel::kStream}) {
    const ReadBandwidth r = MeasureWith(k, n_threads, options);
    if (r.gbps > best.gbps) best = r;
  }
  return best;
}

}  // namespace moesplit::bench
