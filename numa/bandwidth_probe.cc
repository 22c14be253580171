#include "numa/bandwidth_probe.h"

#include <algorithm>
#include <barrier>
#include <chrono>
#include <mutex>
#include <thread>

#include "numa/affinity.h"
#include "numa/node_memory.h"
#include "numa/topology.h"

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

namespace moesplit::numa {
namespace {

constexpr int64_t kLine = 64;     // bytes per cache line; slices are whole lines
constexpr int64_t kStride = 256;  // kStrided reads one line per 256 bytes; slices are whole strides

// Reads S streams once, stream k the lines at p + k * gap + i for i in [0, span) by `step`, the
// streams' line i in turn: 4 x 16-byte loads per 64-byte line into four independent 64-bit add
// chains (one vector add per load: the adds keep pace with the loads at any DRAM speed).
// `step` = bytes from one line to the next (64: every line; 256: the strided kernel).
// kAhead > 0: each line also prefetches the line kAhead bytes further on its stream (past the end
// it touches nothing: a prefetch never faults), with prefetcht0, or prefetchnta when kNta.
template <int S, int64_t kAhead = 0, bool kNta = false>
uint64_t ProbeRead(const uint8_t* p, int64_t span, int64_t step, int64_t gap = 0) {
#if defined(__SSE2__)
  __m128i acc[4] = {_mm_setzero_si128(), _mm_setzero_si128(), _mm_setzero_si128(),
                    _mm_setzero_si128()};
  for (int64_t i = 0; i < span; i += step) {
    for (int k = 0; k < S; ++k) {
      if constexpr (kAhead > 0) {
        const auto* ahead = reinterpret_cast<const char*>(p + k * gap + i + kAhead);
        if constexpr (kNta) {
          _mm_prefetch(ahead, _MM_HINT_NTA);
        } else {
          _mm_prefetch(ahead, _MM_HINT_T0);
        }
      }
      const auto* v = reinterpret_cast<const __m128i*>(p + k * gap + i);
      for (int j = 0; j < 4; ++j) acc[j] = _mm_add_epi64(acc[j], _mm_load_si128(v + j));
    }
  }
  const __m128i s = _mm_add_epi64(_mm_add_epi64(acc[0], acc[1]), _mm_add_epi64(acc[2], acc[3]));
  alignas(16) uint64_t lanes[2];
  _mm_store_si128(reinterpret_cast<__m128i*>(lanes), s);
  return lanes[0] + lanes[1];
#else
  uint64_t s[8] = {};
  for (int64_t i = 0; i < span; i += step) {
    for (int k = 0; k < S; ++k) {
      const auto* w = reinterpret_cast<const uint64_t*>(p + k * gap + i);
      for (int j = 0; j < 8; ++j) s[j] += w[j];
    }
  }
  return s[0] + s[1] + s[2] + s[3] + s[4] + s[5] + s[6] + s[7];
#endif
}

// The probe proper: [p, p + bytes) (a multiple of 64) read once as two sequential streams, the
// first and the second half, line i of each in turn (and the odd last line, if any, after).
// Why two: one core keeps more lines in flight on two streams than on one (the hardware
// prefetcher runs ahead on each), and the expert kernels read two (R16DecodeGroups). Measured on
// the Intel Xeon VM of docs/PERFORMANCE.md (2026-11-24, this loop over 2 GiB, 4 rounds, GB/s):
// 1 stream 17.5-18.4 per thread, 33.3-35.7 with both vCPUs; 2 streams 18.3-19.5 and
// 37.4-37.6; 4 streams 16.1-16.8 and 32.5-32.9. A fraction of bandwidth is taken against the
// faster pattern, never the slower.
template <int64_t kAhead, bool kNta = false>
uint64_t ProbeTwoStreams(const uint8_t* p, int64_t bytes) {
  const int64_t half = bytes / 128 * 64;  // bytes per stream, whole lines
  return ProbeRead<2, kAhead, kNta>(p, half, kLine, half) +
         ProbeRead<1>(p + 2 * half, bytes - 2 * half, kLine);
}
// kProbePrefetch's distance: 4 KiB, 64 lines ahead per stream (the pf.cc sweep of 2026-11-29 on
// the Zen 4 VM: 1 KiB and 4 KiB both ~1.5-2x the plain read, 4 KiB steadier).
// kProbePrefetchNta reads as far ahead (only that distance was measured with NTA: Zen 5 VM,
// 2026-12-03, 1 GiB, 2 rounds of median-of-7 passes, GB/s at 1 / 2 threads: probe 33.5-34.2 /
// 43.9-44.0, probe+prefetch (T0) 29.2-30.0 / 44.7-44.8, probe+prefetchnta 42.8-43.5 /
// 48.7-49.7, stream 26.8-29.5 / 39.1-41.1).
constexpr int64_t kProbeAhead = 4096;

// STREAM-style sum reduction over doubles: 8 partial sums (a single accumulator would be bound
// by the 3-4 cycle FP add latency, ~8 bytes / 3 cycles ~ 10 GB/s at 4 GHz, below one core's
// DRAM rate).
double SumReduction(const uint8_t* p, int64_t bytes) {
  const auto* a = reinterpret_cast<const double*>(p);
  double s[8] = {};
  for (int64_t i = 0; i < bytes / 8; i += 8) {
    for (int j = 0; j < 8; ++j) s[j] += a[i + j];
  }
  return ((s[0] + s[1]) + (s[2] + s[3])) + ((s[4] + s[5]) + (s[6] + s[7]));
}

// Warning when the sampled pages of the buffer are not (almost) all on `node`: a figure for
// "memory on node b" measured with the memory elsewhere would be silently wrong.
void CheckPlacement(const NodeBuffer& buf, int node, std::vector<std::string>* warnings) {
  StatusOr<PlacementReport> r = QueryPlacement(buf.data(), buf.size(), 256);
  if (!r.ok()) {
    warnings->push_back("memory placement not verified: " + r.status().message());
    return;
  }
  int64_t on_node = 0;
  for (size_t i = 0; i < r->node_ids.size(); ++i) {
    if (r->node_ids[i] == node) on_node = r->node_pages[i];
  }
  // 95%: a few pages of a huge buffer may sit elsewhere (e.g. the kernel's own fallback on a
  // full node) without moving the figure beyond noise.
  if (r->sampled > 0 && on_node * 100 < r->sampled * 95) {
    warnings->push_back(StrCat("memory: only ", on_node * 100 / r->sampled,
                               "% of sampled pages on node ", node, " (", r->Summary(), ")"));
  }
}

Status CheckOptions(const ReadOptions& options) {
  const int64_t n = static_cast<int64_t>(options.cpus.size());
  if (n < 1) return InvalidArgumentError("bandwidth probe: no CPU to run a reader on");
  if (options.passes < 1) {
    return InvalidArgumentError("bandwidth probe: passes must be >= 1, got ", options.passes);
  }
  if (options.kernels.empty()) return InvalidArgumentError("bandwidth probe: no read kernel");
  if (options.kernels.size() > 1 && std::find(options.kernels.begin(), options.kernels.end(),
                                              ReadKernel::kStrided) != options.kernels.end()) {
    return InvalidArgumentError(
        "bandwidth probe: the strided kernel counts a quarter of the bytes, so it is measured "
        "alone, not beside ",
        options.kernels.size() - 1, " other kernel(s)");
  }
  if (options.bytes / n / kStride <= 0) {
    return InvalidArgumentError("bandwidth probe: ", options.bytes, " bytes is less than ", kStride,
                                " per thread for ", n, " threads");
  }
  return Status::Ok();
}

// One kernel's figures from its timed passes: begin_s / end_s [total_passes x n] seconds, pass
// 0 the warm-up. A pass lasts from the first start to the last end, so a late or slow thread
// lengthens it (a conservative figure, never an optimistic one). GB/s = bytes_per_pass / pass
// time / 1e9; median, min and max over the timed passes.
ReadResult Summarize(ReadKernel kernel, const double* begin_s, const double* end_s,
                     int total_passes, int n, int64_t bytes_per_pass) {
  std::vector<double> gbps;  // [total_passes - 1]
  for (int pass = 1; pass < total_passes; ++pass) {
    const double* b = begin_s + pass * n;
    const double* e = end_s + pass * n;
    const double dt = *std::max_element(e, e + n) - *std::min_element(b, b + n);
    gbps.push_back(static_cast<double>(bytes_per_pass) / std::max(dt, 1e-9) * 1e-9);
  }
  std::sort(gbps.begin(), gbps.end());
  ReadResult r;
  r.threads = n;
  r.kernel = kernel;
  r.bytes_per_pass = bytes_per_pass;
  r.gbps = gbps[gbps.size() / 2];
  r.min_gbps = gbps.front();
  r.max_gbps = gbps.back();
  return r;
}

}  // namespace

double ReadOnce(ReadKernel kernel, const uint8_t* p, int64_t bytes) {
  switch (kernel) {
    case ReadKernel::kStream:
      return SumReduction(p, bytes);
    case ReadKernel::kStrided:
      return static_cast<double>(ProbeRead<1>(p, bytes, kStride));
    case ReadKernel::kProbePrefetch:
      return static_cast<double>(ProbeTwoStreams<kProbeAhead>(p, bytes));
    case ReadKernel::kProbePrefetchNta:
      return static_cast<double>(ProbeTwoStreams<kProbeAhead, true>(p, bytes));
    case ReadKernel::kProbe:
      break;
  }
  return static_cast<double>(ProbeTwoStreams<0>(p, bytes));
}

const char* ReadKernelName(ReadKernel kernel) {
  switch (kernel) {
    case ReadKernel::kStream:
      return "stream";
    case ReadKernel::kStrided:
      return "strided";
    case ReadKernel::kProbePrefetch:
      return "probe+prefetch";
    case ReadKernel::kProbePrefetchNta:
      return "probe+prefetchnta";
    case ReadKernel::kProbe:
      break;
  }
  return "probe";
}

StatusOr<ReadResult> MeasureRead(const ReadOptions& options) {
  MOESPLIT_RETURN_IF_ERROR(CheckOptions(options));
  const int n = static_cast<int>(options.cpus.size());
  const int n_kernels = static_cast<int>(options.kernels.size());
  // Slice = bytes / threads rounded down to whole 256-byte strides: [n x slice] bytes.
  const int64_t slice = options.bytes / n / kStride * kStride;
  MOESPLIT_ASSIGN_OR_RETURN(NodeBuffer buffer,
                            AllocateOnNodes(static_cast<size_t>(slice * n),
                                            NodeAllocOptions{.nodes = {options.mem_node}}));
  std::vector<std::string> warnings = buffer.warnings();
  const int total_passes = options.passes + 1;            // per kernel, pass 0: warm-up, untimed
  std::vector<double> sums(static_cast<size_t>(n), 0.0);  // [n] last pass
  // Per kernel, pass and thread: when its read began and ended, [n_kernels x total_passes x n]
  // seconds on one steady clock.
  using Clock = std::chrono::steady_clock;
  const Clock::time_point origin = Clock::now();
  const int64_t per_kernel = int64_t{total_passes} * n;
  std::vector<double> begin_s(static_cast<size_t>(n_kernels * per_kernel));
  std::vector<double> end_s(begin_s.size());
  std::mutex warn_mu;
  std::barrier sync(n);
  std::vector<std::thread> readers;
  readers.reserve(static_cast<size_t>(n));
  for (int t = 0; t < n; ++t) {
    readers.emplace_back([&, t] {
      const int cpu = options.cpus[static_cast<size_t>(t)];
      if (Status s = PinCurrentThread({cpu}); !s.ok()) {
        std::lock_guard<std::mutex> lock(warn_mu);
        warnings.push_back(StrCat("cpu ", cpu, ": reader ran unpinned (", s.message(), ")"));
      }
      uint8_t* mine = buffer.data() + t * slice;
      std::fill(reinterpret_cast<double*>(mine), reinterpret_cast<double*>(mine + slice), 1.0);
      for (int k = 0; k < n_kernels; ++k) {
        for (int pass = 0; pass < total_passes; ++pass) {
          sync.arrive_and_wait();  // everyone has finished the previous pass (or the fill)
          const size_t i = static_cast<size_t>(k * per_kernel + pass * n + t);
          begin_s[i] = std::chrono::duration<double>(Clock::now() - origin).count();
          sums[static_cast<size_t>(t)] = ReadOnce(options.kernels[k], mine, slice);
          end_s[i] = std::chrono::duration<double>(Clock::now() - origin).count();
        }
      }
    });
  }
  for (std::thread& r : readers) r.join();
  CheckPlacement(buffer, options.mem_node, &warnings);

  ReadResult best;
  for (int k = 0; k < n_kernels; ++k) {
    const ReadKernel kernel = options.kernels[static_cast<size_t>(k)];
    // Bytes counted per pass: every byte, or for kStrided the 64-byte lines read (1 per 256).
    const int64_t counted = kernel == ReadKernel::kStrided ? slice / kStride * kLine : slice;
    const ReadResult r = Summarize(kernel, begin_s.data() + k * per_kernel,
                                   end_s.data() + k * per_kernel, total_passes, n, counted * n);
    if (k == 0 || r.gbps > best.gbps) best = r;
  }
  best.warnings = std::move(warnings);
  for (double s : sums) best.checksum += s;
  return best;
}

StatusOr<ReadOptions> FirstCoresReadOptions(int threads) {
  if (threads < 1) {
    return InvalidArgumentError("bandwidth probe: threads must be >= 1, got ", threads);
  }
  MOESPLIT_ASSIGN_OR_RETURN(Topology topo, LoadTopology(""));
  if (topo.nodes.empty()) return InternalError("bandwidth probe: the topology has no NUMA node");
  ReadOptions o;
  o.mem_node = topo.nodes.front().id;
  // Every node's physical cores before any SMT sibling (NumaNode::CoresFirstCpus across the
  // machine, not node by node). Whether a sibling on the memory's node would read more than a
  // core of another node is not measured: every VM here has one node and one thread per core.
  std::vector<int> siblings;
  for (const NumaNode& node : topo.nodes) {
    const std::vector<int> primary = node.PrimaryCpus(), rest = node.SiblingCpus();
    o.cpus.insert(o.cpus.end(), primary.begin(), primary.end());
    siblings.insert(siblings.end(), rest.begin(), rest.end());
  }
  o.cpus.insert(o.cpus.end(), siblings.begin(), siblings.end());
  if (static_cast<int>(o.cpus.size()) < threads) {
    return InvalidArgumentError("bandwidth probe: ", threads,
                                " readers asked for, this machine has ", o.cpus.size(),
                                " CPUs; ask for at most that many threads");
  }
  o.cpus.resize(static_cast<size_t>(threads));
  return o;
}

}  // namespace moesplit::numa
