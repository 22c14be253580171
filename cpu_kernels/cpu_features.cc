#include "cpu_kernels/cpu_features.h"

#include <cstdint>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#define MOESPLIT_X86 1
#endif
#if defined(__linux__) && defined(__x86_64__)
#include <sys/syscall.h>
#include <unistd.h>
#endif

namespace moesplit::cpu {
namespace {

constexpr std::string_view kTierNames[kNumIsaTiers] = {"scalar", "avx2", "avx512", "avx512vnni",
                                                       "amx"};

#ifdef MOESPLIT_X86
struct Regs {
  uint32_t eax = 0, ebx = 0, ecx = 0, edx = 0;
};

// Regs of CPUID(leaf, subleaf); all zero if the leaf is beyond the CPU's maximum.
Regs Cpuid(uint32_t leaf, uint32_t subleaf) {
  Regs r;
  if (!__get_cpuid_count(leaf, subleaf, &r.eax, &r.ebx, &r.ecx, &r.edx)) return Regs{};
  return r;
}

// XCR0: which register states the OS saves on context switch. Only valid with OSXSAVE.
uint64_t Xgetbv0() {
  uint32_t lo = 0, hi = 0;
  __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
  return (static_cast<uint64_t>(hi) << 32) | lo;
}

bool Bit(uint32_t reg, int bit) { return (reg >> bit) & 1u; }

// Linux hands out the 8 KiB AMX tile state per process on request (kernel 5.16+); without it
// the first tile instruction faults. Idempotent: asking again after a grant succeeds.
bool RequestAmxPermission() {
#if defined(__linux__) && defined(__x86_64__)
  constexpr int kArchReqXcompPerm = 0x1023, kXfeatureXtiledata = 18;
  return syscall(SYS_arch_prctl, kArchReqXcompPerm, kXfeatureXtiledata) == 0;
#else
  return false;
#endif
}
#endif

}  // namespace

std::string_view IsaTierName(IsaTier tier) {
  const int i = static_cast<int>(tier);
  MOESPLIT_CHECK(i >= 0 && i < kNumIsaTiers);
  return kTierNames[i];
}

CpuFeatures DetectCpuFeatures() {
  CpuFeatures f;
#ifdef MOESPLIT_X86
  const Regs l0 = Cpuid(0, 0);
  const Regs l1 = Cpuid(1, 0);
  const Regs l7 = Cpuid(7, 0);
  // "AuthenticAMD" in ebx, edx, ecx order.
  f.amd = l0.ebx == 0x68747541 && l0.edx == 0x69746e65 && l0.ecx == 0x444d4163;
  const int base_family = static_cast<int>((l1.eax >> 8) & 0xF);
  f.family =
      base_family == 0xF ? base_family + static_cast<int>((l1.eax >> 20) & 0xFF) : base_family;
  const Regs l7s1 = Cpuid(7, 1);
  const bool osxsave = Bit(l1.ecx, 27);
  const uint64_t xcr0 = osxsave ? Xgetbv0() : 0;
  // XCR0 bits: 1 SSE, 2 AVX (YMM upper), 5 opmask, 6 ZMM_Hi256, 7 Hi16_ZMM, 17 TILECFG,
  // 18 TILEDATA.
  const bool os_avx = (xcr0 & 0x6) == 0x6;
  const bool os_avx512 = os_avx && (xcr0 & 0xE0) == 0xE0;
  const bool os_amx = (xcr0 & 0x60000) == 0x60000;
  const bool avx = Bit(l1.ecx, 28) && os_avx;
  f.fma = avx && Bit(l1.ecx, 12);
  f.f16c = avx && Bit(l1.ecx, 29);
  f.avx2 = avx && Bit(l7.ebx, 5);
  f.avx512f = os_avx512 && Bit(l7.ebx, 16);
  f.avx512dq = f.avx512f && Bit(l7.ebx, 17);
  f.avx512bw = f.avx512f && Bit(l7.ebx, 30);
  f.avx512vl = f.avx512f && Bit(l7.ebx, 31);
  f.avx512vnni = f.avx512f && Bit(l7.ecx, 11);
  f.avx512vbmi = f.avx512f && Bit(l7.ecx, 1);
  f.gfni = f.avx512f && Bit(l7.ecx, 8);
  f.avx512bf16 = f.avx512f && Bit(l7s1.eax, 5);
  const bool amx_tile = os_amx && Bit(l7.edx, 24);
  f.amx_bf16 = amx_tile && Bit(l7.edx, 22);
  f.amx_int8 = amx_tile && Bit(l7.edx, 25) && RequestAmxPermission();
#endif
  return f;
}

IsaTier BestTier(const CpuFeatures& f) {
  if (!(f.avx2 && f.fma && f.f16c)) return IsaTier::kScalar;
  if (!(f.avx512f && f.avx512bw && f.avx512vl && f.avx512dq)) return IsaTier::kAvx2;
  if (!f.avx512vnni) return IsaTier::kAvx512;
  // The AMX tier runs AMX-INT8 (quantized prefill) and AMX-BF16 + AVX-512 BF16 (F32 products):
  // every AMX CPU so far (Sapphire Rapids on) has all three.
  if (!f.amx_int8 || !f.amx_bf16 || !f.avx512bf16) return IsaTier::kAvx512Vnni;
  return IsaTier::kAmx;
}

StatusOr<IsaTier> ParseIsaCap(std::string_view value) {
  for (int i = 0; i < kNumIsaTiers; ++i) {
    if (value == kTierNames[i]) return static_cast<IsaTier>(i);
  }
  return InvalidArgumentError("MOESPLIT_MAX_ISA=\"", value,
                              "\" is not an ISA tier; use one of scalar, avx2, avx512, "
                              "avx512vnni, amx (or unset it for the best the CPU has)");
}

IsaTier CapTier(IsaTier detected, IsaTier cap) {
  return static_cast<int>(cap) < static_cast<int>(detected) ? cap : detected;
}

StatusOr<IsaTier> EffectiveIsaTier(const CpuFeatures& features, const char* max_isa_env) {
  const IsaTier detected = BestTier(features);
  if (max_isa_env == nullptr || *max_isa_env == '\0') return detected;
  MOESPLIT_ASSIGN_OR_RETURN(IsaTier cap, ParseIsaCap(max_isa_env));
  return CapTier(detected, cap);
}

}  // namespace moesplit::cpu
