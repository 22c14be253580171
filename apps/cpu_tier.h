// The CPU kernel tier of the process, chosen once at start-up by every command that runs the
// engine: the best tier CPUID reports, capped by the MOESPLIT_MAX_ISA environment variable
// (scalar | avx2 | avx512 | avx512vnni). This is the one place that reads the variable; the
// library gets the tier through SessionOptions::isa_tier.
#pragma once

#include <ostream>
#include <span>
#include <string>

#include "core/base/status.h"
#include "core/engine/engine.h"
#include "cpu_kernels/cpu_features.h"

namespace moesplit::app {

// The tier to run at. An invalid MOESPLIT_MAX_ISA is an InvalidArgument error naming the
// variable and the accepted values; so is an invalid MOESPLIT_DECODE_READ (checked here, where
// every command starts, for DecodeReadFromEnv).
StatusOr<cpu::IsaTier> KernelTierFromEnv();

// The decode read mode to run in (SessionOptions::decode_read): the one MOESPLIT_DECODE_READ
// names (prefetched | hardware; gemv::DecodeRead), else the mode measured faster on this CPU
// (gemv::EffectiveDecodeRead; KernelTierFromEnv has rejected an invalid value by then).
gemv::DecodeRead DecodeReadFromEnv();

// "avx512vnni (AVX-512 VNNI)".
std::string TierDescription(cpu::IsaTier tier);

// The start-up line "cpu kernels: avx512vnni (AVX-512 VNNI), 2 threads" (threads as given,
// e.g. "2" or "1,2"), then one warning line per weight type of the model that has no fast
// kernel at the session's tier (those products run the slow reference matmul), and a line saying
// that AMX goes unused where `cpu` (default: this CPU) has it: moesplit has no AMX kernels.
// With `read` kHardware at the VNNI tier, a line saying so (the kernels that differ run there).
void LogKernels(std::ostream& err, cpu::IsaTier tier, const std::string& threads,
                std::span<const GgmlType> fallback_types,
                const cpu::CpuFeatures& cpu = cpu::DetectCpuFeatures(),
                gemv::DecodeRead read = gemv::DecodeRead::kPrefetched);
void LogKernels(std::ostream& err, const engine::Session& session);

}  // namespace moesplit::app
