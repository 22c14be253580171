#include "apps/cpu_tier.h"

#include <cstdlib>

namespace moesplit::app {

StatusOr<cpu::IsaTier> KernelTierFromEnv() {
  const cpu::CpuFeatures features = cpu::DetectCpuFeatures();
  MOESPLIT_RETURN_IF_ERROR(
      gemv::EffectiveDecodeRead(features, std::getenv("MOESPLIT_DECODE_READ")).status());
  return cpu::EffectiveIsaTier(features, std::getenv("MOESPLIT_MAX_ISA"));
}

gemv::DecodeRead DecodeReadFromEnv() {
  const cpu::CpuFeatures features = cpu::DetectCpuFeatures();
  const StatusOr<gemv::DecodeRead> read =
      gemv::EffectiveDecodeRead(features, std::getenv("MOESPLIT_DECODE_READ"));
  return read.ok() ? *read : gemv::PreferredDecodeRead(features);
}

std::string TierDescription(cpu::IsaTier tier) {
  const char* what = "portable C++";
  switch (tier) {
    case cpu::IsaTier::kScalar:
      break;
    case cpu::IsaTier::kAvx2:
      what = "AVX2 + FMA";
      break;
    case cpu::IsaTier::kAvx512:
      what = "AVX-512";
      break;
    case cpu::IsaTier::kAvx512Vnni:
      what = "AVX-512 VNNI";
      break;
    case cpu::IsaTier::kAmx:
      what = "AMX INT8 + AVX-512 VNNI";
      break;
  }
  return StrCat(cpu::IsaTierName(tier), " (", what, ")");
}

void LogKernels(std::ostream& err, cpu::IsaTier tier, const std::string& threads,
                std::span<const GgmlType> fallback_types, const cpu::CpuFeatures& cpu,
                gemv::DecodeRead read) {
  err << "cpu kernels: " << TierDescription(tier) << ", " << threads
      << (threads == "1" ? " thread" : " threads") << "\n";
  if (read == gemv::DecodeRead::kHardware && tier == cpu::IsaTier::kAvx512Vnni) {
    err << "cpu kernels: decode reads Q4_K / Q6_K experts as one stream per core with no "
           "software prefetch, Q4_0 / Q4_1 / Q5_0 / Q5_1 / Q8_0 / IQ4_NL / MXFP4 as one "
           "prefetched stream (MOESPLIT_DECODE_READ=hardware"
        << (gemv::PreferredDecodeRead(cpu) == read ? ", this CPU's default" : "") << ")\n";
  }
  for (GgmlType t : fallback_types) {
    err << "cpu kernels: no fast kernel for " << TypeName(t) << " weights at "
        << cpu::IsaTierName(tier) << ": reference matmul (slow)\n";
  }
  if ((cpu.amx_int8 || cpu.amx_bf16) && tier != cpu::IsaTier::kAmx) {
    err << "cpu kernels: this CPU has AMX ("
        << (cpu.amx_int8 && cpu.amx_bf16 ? "INT8, BF16"
            : cpu.amx_int8               ? "INT8"
                                         : "BF16")
        << "), not used at this tier"
        << (cpu.amx_int8 ? "" : " (moesplit's AMX tier needs AMX-INT8)") << "\n";
  }
}

void LogKernels(std::ostream& err, const engine::Session& session) {
  LogKernels(err, session.isa_tier(), std::to_string(session.n_threads()), session.FallbackTypes(),
             cpu::DetectCpuFeatures(), session.decode_read());
}

}  // namespace moesplit::app
