// CPU feature detection (CPUID + XGETBV) and the ISA tier the kernels run at.
//
// No global state: DetectCpuFeatures() queries the CPU each call (cheap; call it once at start-up
// and keep the result in your context object). The tier cap comes from the caller, who reads
// MOESPLIT_MAX_ISA from the environment in one place and passes the value to EffectiveIsaTier.
#pragma once

#include <string_view>

#include "core/base/status.h"

namespace moesplit::cpu {

// What the CPU and the OS both support. An AVX/AVX-512/AMX flag is only true when XCR0 says the
// OS saves the matching register state (otherwise using it would fault).
struct CpuFeatures {
  bool avx2 = false;        // AVX2 + OS AVX state
  bool fma = false;         // FMA3
  bool f16c = false;        // F16C
  bool avx512f = false;     // AVX-512 F + OS opmask/ZMM state
  bool avx512bw = false;    // AVX-512 BW
  bool avx512vl = false;    // AVX-512 VL
  bool avx512dq = false;    // AVX-512 DQ
  bool avx512vnni = false;  // AVX-512 VNNI (vpdpbusd)
  // AVX-512 VBMI (vpermb): not a tier of its own; kernels of the VNNI tier pick a variant by it.
  bool avx512vbmi = false;
  // GFNI with AVX-512 state (the EVEX vgf2p8affineqb): likewise a variant within the VNNI tier
  // (Ice Lake / Zen 4 and later have it; Cascade Lake has VNNI without it).
  bool gfni = false;
  bool avx512bf16 = false;  // AVX-512 BF16 (detection only)
  // AMX-TILE + AMX-INT8 + OS tile state + the process's permission to use it (Linux grants it on
  // request: arch_prctl(ARCH_REQ_XCOMP_PERM, XTILEDATA), made by DetectCpuFeatures).
  bool amx_int8 = false;
  bool amx_bf16 = false;  // AMX-TILE + AMX-BF16 + OS tile state (detection only)
  // CPUID's vendor string and display family (leaf 0; leaf 1's base + extended family): the
  // decode kernels' way of reading weights is chosen by them (gemv::PreferredDecodeRead).
  bool amd = false;  // "AuthenticAMD"
  int family = 0;    // 6: Intel Core / Xeon; 0x19: AMD Zen 3 / Zen 4; 0x1A: Zen 5
};

// AMD family 0x19: Zen 3 (no AVX-512) and Zen 4, whose 512-bit ops run as two halves on its
// 256-bit units, so every zmm op takes both and bit picks share vpdpbusd's pipes. The kernel
// choices measured on the Zen 4 VM key on it (gemv::PreferredDecodeRead, Q3_K's bit picks).
inline bool AmdFamily19h(const CpuFeatures& f) { return f.amd && f.family == 0x19; }

// Ordered: each tier implies every lower one.
enum class IsaTier : int {
  kScalar = 0,
  kAvx2 = 1,        // AVX2 + FMA + F16C
  kAvx512 = 2,      // + AVX-512 F/BW/VL/DQ
  kAvx512Vnni = 3,  // + AVX-512 VNNI
  kAmx = 4,         // + AMX-TILE / AMX-INT8 with the OS's permission (Sapphire Rapids+)
};
inline constexpr int kNumIsaTiers = 5;

// "scalar", "avx2", "avx512", "avx512vnni", "amx" (the MOESPLIT_MAX_ISA spellings).
std::string_view IsaTierName(IsaTier tier);

// Queries CPUID/XGETBV now. On non-x86 builds every flag is false.
CpuFeatures DetectCpuFeatures();

// Highest tier whose every required feature is present.
IsaTier BestTier(const CpuFeatures& features);

// Parses a MOESPLIT_MAX_ISA value (case-sensitive, one of IsaTierName's spellings).
StatusOr<IsaTier> ParseIsaCap(std::string_view value);

// min(detected, cap).
IsaTier CapTier(IsaTier detected, IsaTier cap);

// The tier to run at: BestTier(features) capped by `max_isa_env`, the raw value of the
// MOESPLIT_MAX_ISA environment variable (nullptr or "" = no cap). Invalid values are an
// InvalidArgument error naming the variable and the accepted spellings.
StatusOr<IsaTier> EffectiveIsaTier(const CpuFeatures& features, const char* max_isa_env);

}  // namespace moesplit::cpu
