#include "bench/bench_common.h"

#include <sys/mman.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <utility>

#include "core/base/float16.h"
#include "cpu_kernels/quant/blocks_iq.h"
#include "core/base/status.h"
#include "cpu_kernels/quant/quant.h"

namespace moesplit::bench {

namespace {
constexpr size_t kHugePage = size_t{2} << 20;  // 2 MiB
}  // namespace

LargeBuffer::LargeBuffer(size_t bytes) : size_(bytes) {
  if (bytes == 0) return;
  mapped_ = (bytes + kHugePage - 1) / kHugePage * kHugePage;
  void* p = mmap(nullptr, mapped_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  MOESPLIT_CHECK(p != MAP_FAILED, "mmap of ", mapped_, " bytes failed: ", std::strerror(errno));
#if defined(MADV_HUGEPAGE)
  madvise(p, mapped_, MADV_HUGEPAGE);  // a hint: failure only costs TLB misses
#endif
  data_ = static_cast<uint8_t*>(p);
}

LargeBuffer::~LargeBuffer() { Release(); }

LargeBuffer::LargeBuffer(LargeBuffer&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)),
      size_(std::exchange(other.size_, 0)),
      mapped_(std::exchange(other.mapped_, 0)) {}

LargeBuffer& LargeBuffer::operator=(LargeBuffer&& other) noexcept {
  if (this != &other) {
    Release();
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
    mapped_ = std::exchange(other.mapped_, 0);
  }
  return *this;
}

void LargeBuffer::Release() {
  if (data_ != nullptr) munmap(data_, mapped_);
  data_ = nullptr;
  size_ = mapped_ = 0;
}

int64_t MemAvailableBytes() {
  std::ifstream in("/proc/meminfo");
  std::string key;
  int64_t kib = 0;
  std::string unit;
  while (in >> key >> kib >> unit) {
    if (key == "MemAvailable:") return kib * 1024;
  }
  return 0;
}

gemv::DecodeRead BenchDecodeRead() {
  const StatusOr<gemv::DecodeRead> read =
      gemv::EffectiveDecodeRead(cpu::DetectCpuFeatures(), std::getenv("MOESPLIT_DECODE_READ"));
  MOESPLIT_CHECK(read.ok(), read.status().ToString());
  return *read;
}

std::vector<cpu::IsaTier> RunnableTiers() {
  const cpu::CpuFeatures f = cpu::DetectCpuFeatures();
  const StatusOr<cpu::IsaTier> cap = cpu::EffectiveIsaTier(f, std::getenv("MOESPLIT_MAX_ISA"));
  MOESPLIT_CHECK(cap.ok(), cap.status().ToString());
  const int best = static_cast<int>(cpu::BestTier(f));
  std::vector<cpu::IsaTier> tiers;
  for (int t = 0; t < cpu::kNumIsaTiers; ++t) {
    const auto tier = static_cast<cpu::IsaTier>(t);
    if (t <= static_cast<int>(*cap)) {
      tiers.push_back(tier);
    } else {
      std::fprintf(stderr, "skipping ISA tier %s: %s\n",
                   std::string(cpu::IsaTierName(tier)).c_str(),
                   t > best ? "this CPU lacks it" : "above MOESPLIT_MAX_ISA");
    }
  }
  return tiers;
}

ReadBandwidthOptions ProbeOptionsFromEnv() {
  ReadBandwidthOptions o;
  if (const char* env = std::getenv("MOESPLIT_BENCH_PROBE_MIB"); env != nullptr && *env != '\0') {
    const int64_t mib = std::atoll(env);
    MOESPLIT_CHECK(mib > 0, "MOESPLIT_BENCH_PROBE_MIB=", env, " is not a positive size in MiB");
    o.bytes = mib << 20;
  }
  return o;
}

std::vector<char*> WithDefaultMinTime(int* argc, char** argv, double seconds,
                                      std::vector<std::vector<char>>* storage) {
  std::vector<char*> args(argv, argv + *argc);
  bool given = false;
  for (int i = 1; i < *argc; ++i) {
    given |= std::strncmp(argv[i], "--benchmark_min_time", 20) == 0;
  }
  if (!given) {
    const std::string flag = "--benchmark_min_time=" + std::to_string(seconds);
    storage->emplace_back(flag.begin(), flag.end());
    storage->back().push_back('\0');
    args.push_back(storage->back().data());
  }
  *argc = static_cast<int>(args.size());
  args.push_back(nullptr);  // argv[argc] == nullptr, as main's argv
  return args;
}

bool CanBuildBenchWeights(GgmlType type) {
  // The lattice types: random bytes with a finite f16 scale are valid blocks (every code
  // pattern decodes to grid values).
  switch (type) {
    case GgmlType::kIQ2_XXS:
    case GgmlType::kIQ2_XS:
    case GgmlType::kIQ2_S:
    case GgmlType::kIQ3_XXS:
    case GgmlType::kIQ3_S:
    case GgmlType::kIQ1_S:
    case GgmlType::kIQ1_M:
      return true;
    default:
      return quant::CanQuantize(type);
  }
}

void QuantizeRowsForBench(GgmlType type, const float* x, int64_t rows, int64_t cols, uint8_t* dst) {
  const int64_t row_bytes = RowBytes(type, cols);
  if (quant::CanQuantize(type)) {
    for (int64_t r = 0; r < rows; ++r) {
      quant::QuantizeRow(type, x + r * cols, dst + r * row_bytes, cols);
    }
    return;
  }
  MOESPLIT_CHECK(CanBuildBenchWeights(type), "no quantizer and no byte pattern for ",
                 TypeName(type));
  const int64_t block_bytes = RowBytes(type, 256), n = rows * row_bytes;
  for (int64_t i = 0; i < n; ++i) {  // bytes from the floats' mantissas: cheap and varied
    uint32_t bits;
    std::memcpy(&bits, &x[i % (rows * cols)], 4);
    dst[i] = static_cast<uint8_t>(bits ^ (bits >> 11) ^ static_cast<uint32_t>(i));
  }
  const uint16_t d = Fp32ToFp16(0.02f / 8);
  for (int64_t b = 0; b < n / block_bytes; ++b) {
    uint8_t* blk = dst + b * block_bytes;
    quant::SetLatticeBlockScale(type == GgmlType::kIQ1_M, blk, d);
  }
}

}  // namespace moesplit::bench
