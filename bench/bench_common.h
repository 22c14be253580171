// Small pieces shared by the bench programs: a large page-aligned buffer (the allocation used both
// for weights and for the bandwidth probe, so their read rates compare like with like), random
// inputs, the memory the OS can still give us, the ISA tiers to run, and the default run time.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "bench/bandwidth.h"
#include "core/base/dtype.h"
#include "core/base/random_values.h"
#include "cpu_kernels/cpu_features.h"
#include "cpu_kernels/gemv/gemv.h"

namespace moesplit::bench {

// An anonymous mmap of `bytes` (rounded up to 2 MiB), advised MADV_HUGEPAGE so a 1 GiB stream
// walks 512 TLB entries instead of 262144 (the kernel decides; THP "madvise" mode honours it).
// Pages are NOT touched here: whoever first writes a page places it (first-touch NUMA policy).
// Move-only; unmaps on destruction.
class LargeBuffer {
 public:
  LargeBuffer() = default;
  explicit LargeBuffer(size_t bytes);
  ~LargeBuffer();
  LargeBuffer(LargeBuffer&& other) noexcept;
  LargeBuffer& operator=(LargeBuffer&& other) noexcept;
  LargeBuffer(const LargeBuffer&) = delete;
  LargeBuffer& operator=(const LargeBuffer&) = delete;

  uint8_t* data() const { return data_; }
  size_t size() const { return size_; }  // the bytes asked for (the mapping may be larger)

 private:
  void Release();
  uint8_t* data_ = nullptr;
  size_t size_ = 0;
  size_t mapped_ = 0;  // size_ rounded up to 2 MiB
};

// MemAvailable from /proc/meminfo in bytes (0 if unreadable: callers then assume "enough").
int64_t MemAvailableBytes();

// Every tier this CPU runs, lowest first, capped by MOESPLIT_MAX_ISA (read here, in the bench's
// one place that touches the environment for it). Tiers above the cap or the CPU are reported on
// stderr as skipped.
std::vector<cpu::IsaTier> RunnableTiers();

// The decode read mode the kernels run in: MOESPLIT_DECODE_READ (prefetched | hardware; an
// invalid value is a CHECK failure naming it), else the mode measured faster on this CPU
// (gemv::EffectiveDecodeRead). bench_gemv / bench_moe_layer print it in their context.
gemv::DecodeRead BenchDecodeRead();

// The probe's options: the default 1 GiB buffer, or MOESPLIT_BENCH_PROBE_MIB MiB (smoke tests
// use 64; anything below ~8x the L3 measures the cache, not DRAM).
ReadBandwidthOptions ProbeOptionsFromEnv();

// Google Benchmark flags with a default MinTime: appends --benchmark_min_time=<seconds> unless
// the command line already sets it, so one flag still overrides it for all benchmarks.
// `storage` keeps the new strings alive; returns the new argv (argc updated).
std::vector<char*> WithDefaultMinTime(int* argc, char** argv, double seconds,
                                      std::vector<std::vector<char>>* storage);

// rows x cols weights of `type` at dst (rows x RowBytes(type, cols) bytes) from the floats x
// ([rows x cols]): the reference quantizer where `type` has one; for the lattice types that have
// kernels but no quantizer in this tree (IQ2_XXS, IQ1_S, IQ1_M), bytes drawn from x's bits with
// a finite f16 super-scale per block (every code pattern of those types decodes to grid values;
// kernel speed does not depend on them). Other types without a quantizer: a CHECK failure.
void QuantizeRowsForBench(GgmlType type, const float* x, int64_t rows, int64_t cols, uint8_t* dst);
// Whether QuantizeRowsForBench can build weights of `type`.
bool CanBuildBenchWeights(GgmlType type);

}  // namespace moesplit::bench
