// Registration of the K-quant kernels (weights Q2_K/Q3_K/Q4_K/Q5_K/Q6_K/IQ4_XS, and the lattice
// types IQ2_XXS/IQ1_S/IQ1_M/IQ3_XXS/IQ3_S/IQ2_XS/IQ2_S; activations Q8_K) per tier.
// The scalar tier keeps GemmByDots (it is the reference); the SIMD tiers have tiled gemms.
#include <utility>

#include "cpu_kernels/gemv/gemv_internal.h"

namespace moesplit::gemv::internal {

void AddKQuantKernels(cpu::IsaTier tier, GemvKernels* k) {
  auto set = [&](GgmlType t, DotFn dot, GemmFn gemm) {
    k->by_type[static_cast<size_t>(t)] = {GgmlType::kQ8_K, dot, gemm};
  };
  auto set_r16 = [&](GemmFn gemm, bool native, GgmlType r16 = GgmlType::kQ4_K_R16) {
    k->by_type[static_cast<size_t>(r16)] = {GgmlType::kQ8_K, nullptr, gemm};
    k->native_layout[static_cast<size_t>(r16)] = native;
  };
  constexpr GgmlType kQ6R16 = GgmlType::kQ6_K_R16, kQ5R16 = GgmlType::kQ5_K_R16,
                     kXsR16 = GgmlType::kIQ4_XS_R16, kQ2R16 = GgmlType::kQ2_K_R16,
                     kQ3R16 = GgmlType::kQ3_K_R16;
  // Q2_K / Q3_K: the tier's dot per (row, token) on the file layout; the R16 layouts unpack to
  // it except on the VNNI tier, which has their tiles.
  auto set_q23 = [&](DotFn q2, DotFn q3, GemmFn q2_gemm, GemmFn q3_gemm, GemmFn q2_r16,
                     GemmFn q3_r16, bool native) {
    set(GgmlType::kQ2_K, q2, q2_gemm);
    set(GgmlType::kQ3_K, q3, q3_gemm);
    set_r16(q2_r16, native, kQ2R16);
    set_r16(q3_r16, native, kQ3R16);
  };
#define MOESPLIT_Q23_BY_DOTS(Tier)                                                          \
  set_q23(DotQ2K_Q8K_##Tier, DotQ3K_Q8K_##Tier, GemmByDots<DotQ2K_Q8K_##Tier>,             \
          GemmByDots<DotQ3K_Q8K_##Tier>,                                                    \
          GemmR16ByUnpack<kQ2R16, GemmByDots<DotQ2K_Q8K_##Tier>>,                           \
          GemmR16ByUnpack<kQ3R16, GemmByDots<DotQ3K_Q8K_##Tier>>, false)
  // IQ2_XXS / IQ1_S / IQ1_M: the file layouts, and their 16-row layouts (their
  // own kernels on the VNNI tier with VBMI and GFNI; elsewhere unpacked to the file layout's
  // gemm).
  constexpr GgmlType kIq2R16 = GgmlType::kIQ2_XXS_R16, kIq1R16 = GgmlType::kIQ1_S_R16,
                     kIq1mR16 = GgmlType::kIQ1_M_R16;
  auto set_iq = [&](DotFn iq2xxs, DotFn iq1s, DotFn iq1m, GemmFn g2, GemmFn g1s, GemmFn g1m,
                    GemmFn g2_r16, GemmFn g1s_r16, GemmFn g1m_r16, bool native) {
    set(GgmlType::kIQ2_XXS, iq2xxs, g2);
    set(GgmlType::kIQ1_S, iq1s, g1s);
    set(GgmlType::kIQ1_M, iq1m, g1m);
    set_r16(g2_r16, native, kIq2R16);
    set_r16(g1s_r16, native, kIq1R16);
    set_r16(g1m_r16, native, kIq1mR16);
  };
#define MOESPLIT_IQ_BY_DOTS(Tier)                                          \
  set_iq(DotIQ2XXS_Q8K_##Tier, DotIQ1S_Q8K_##Tier, DotIQ1M_Q8K_##Tier,     \
         GemmByDots<DotIQ2XXS_Q8K_##Tier>, GemmByDots<DotIQ1S_Q8K_##Tier>, \
         GemmByDots<DotIQ1M_Q8K_##Tier>,                                   \
         GemmR16ByUnpack<kIq2R16, GemmByDots<DotIQ2XXS_Q8K_##Tier>>,       \
         GemmR16ByUnpack<kIq1R16, GemmByDots<DotIQ1S_Q8K_##Tier>>,         \
         GemmR16ByUnpack<kIq1mR16, GemmByDots<DotIQ1M_Q8K_##Tier>>, false)
  // ... and the AVX2 kernels: the token tiles; the 16-row layouts repacked at load for their own
  // kernels (gemv_iq_r16_avx2.cc, gemv_iq1_r16_avx2.cc).
#define MOESPLIT_IQ_AVX2                                                                     \
  set_iq(DotIQ2XXS_Q8K_Avx2, DotIQ1S_Q8K_Avx2, DotIQ1M_Q8K_Avx2, GemmIQ2XXS_Q8K_Avx2,        \
         GemmIQ1S_Q8K_Avx2, GemmIQ1M_Q8K_Avx2, GemmIQ2XXSR16_Q8K_Avx2, GemmIQ1SR16_Q8K_Avx2, \
         GemmIQ1MR16_Q8K_Avx2, true)
  // IQ3_XXS / IQ3_S / IQ2_XS / IQ2_S: one dot per (row, token) (the scalar or AVX2 dots),
  // except on the VNNI tier with VBMI: 1-4 tokens per decoded block; IQ3_XXS's, IQ3_S's,
  // IQ2_XS's and IQ2_S's 16-row layouts run their own kernel with VBMI and GFNI, elsewhere unpack
  // to those.
  constexpr GgmlType kIq3R16 = GgmlType::kIQ3_XXS_R16, kIq3sR16 = GgmlType::kIQ3_S_R16,
                     kIq2xsR16 = GgmlType::kIQ2_XS_R16, kIq2sR16 = GgmlType::kIQ2_S_R16;
#define MOESPLIT_IQ23_BY_DOTS(Tier)                                                       \
  set(GgmlType::kIQ3_XXS, DotIQ3XXS_Q8K_##Tier, GemmByDots<DotIQ3XXS_Q8K_##Tier>);        \
  set_r16(GemmR16ByUnpack<kIq3R16, GemmByDots<DotIQ3XXS_Q8K_##Tier>>, false, kIq3R16);    \
  set(GgmlType::kIQ3_S, DotIQ3S_Q8K_##Tier, GemmByDots<DotIQ3S_Q8K_##Tier>);              \
  set_r16(GemmR16ByUnpack<kIq3sR16, GemmByDots<DotIQ3S_Q8K_##Tier>>, false, kIq3sR16);    \
  set(GgmlType::kIQ2_XS, DotIQ2XS_Q8K_##Tier, GemmByDots<DotIQ2XS_Q8K_##Tier>);           \
  set_r16(GemmR16ByUnpack<kIq2xsR16, GemmByDots<DotIQ2XS_Q8K_##Tier>>, false, kIq2xsR16); \
  set(GgmlType::kIQ2_S, DotIQ2S_Q8K_##Tier, GemmByDots<DotIQ2S_Q8K_##Tier>);              \
  set_r16(GemmR16ByUnpack<kIq2sR16, GemmByDots<DotIQ2S_Q8K_##Tier>>, false, kIq2sR16)
  // ... and the AVX2 token tiles.
#define MOESPLIT_IQ23_AVX2                                                   \
  set(GgmlType::kIQ3_XXS, DotIQ3XXS_Q8K_Avx2, GemmIQ3XXS_Q8K_Avx2);          \
  set_r16(GemmR16ByUnpack<kIq3R16, GemmIQ3XXS_Q8K_Avx2>, false, kIq3R16);    \
  set(GgmlType::kIQ3_S, DotIQ3S_Q8K_Avx2, GemmIQ3S_Q8K_Avx2);                \
  set_r16(GemmR16ByUnpack<kIq3sR16, GemmIQ3S_Q8K_Avx2>, false, kIq3sR16);    \
  set(GgmlType::kIQ2_XS, DotIQ2XS_Q8K_Avx2, GemmIQ2XS_Q8K_Avx2);             \
  set_r16(GemmR16ByUnpack<kIq2xsR16, GemmIQ2XS_Q8K_Avx2>, false, kIq2xsR16); \
  set(GgmlType::kIQ2_S, DotIQ2S_Q8K_Avx2, GemmIQ2S_Q8K_Avx2);                \
  set_r16(GemmR16ByUnpack<kIq2sR16, GemmIQ2S_Q8K_Avx2>, false, kIq2sR16)
  switch (tier) {
    case cpu::IsaTier::kScalar:
      MOESPLIT_IQ_BY_DOTS(Scalar);
      MOESPLIT_IQ23_BY_DOTS(Scalar);
      set(GgmlType::kQ4_K, DotQ4K_Q8K_Scalar, GemmByDots<DotQ4K_Q8K_Scalar>);
      set(GgmlType::kQ5_K, DotQ5K_Q8K_Scalar, GemmByDots<DotQ5K_Q8K_Scalar>);
      set(GgmlType::kQ6_K, DotQ6K_Q8K_Scalar, GemmByDots<DotQ6K_Q8K_Scalar>);
      set_r16(GemmR16ByUnpack<GgmlType::kQ4_K_R16, GemmByDots<DotQ4K_Q8K_Scalar>>, false);
      set_r16(GemmR16ByUnpack<kQ6R16, GemmByDots<DotQ6K_Q8K_Scalar>>, false, kQ6R16);
      set_r16(GemmR16ByUnpack<kQ5R16, GemmByDots<DotQ5K_Q8K_Scalar>>, false, kQ5R16);
      set(GgmlType::kIQ4_XS, DotIQ4XS_Q8K_Scalar, GemmByDots<DotIQ4XS_Q8K_Scalar>);
      set_r16(GemmR16ByUnpack<kXsR16, GemmByDots<DotIQ4XS_Q8K_Scalar>>, false, kXsR16);
      MOESPLIT_Q23_BY_DOTS(Scalar);
      return;
#if defined(MOESPLIT_GEMV_X86)
    case cpu::IsaTier::kAvx2:
      set(GgmlType::kQ4_K, DotQ4K_Q8K_Avx2, GemmQ4K_Q8K_Avx2);
      set(GgmlType::kQ5_K, DotQ5K_Q8K_Avx2, GemmQ5K_Q8K_Avx2);
      set(GgmlType::kQ6_K, DotQ6K_Q8K_Avx2, GemmQ6K_Q8K_Avx2);
      set_r16(GemmR16ByUnpack<GgmlType::kQ4_K_R16, GemmQ4K_Q8K_Avx2>, false);
      set_r16(GemmR16ByUnpack<kQ6R16, GemmQ6K_Q8K_Avx2>, false, kQ6R16);
      set_r16(GemmR16ByUnpack<kQ5R16, GemmQ5K_Q8K_Avx2>, false, kQ5R16);
      set(GgmlType::kIQ4_XS, DotIQ4XS_Q8K_Avx2, GemmIQ4XS_Q8K_Avx2);
      // IQ4_XS: the 16-row kernel (repacked at load; gemv_iq4xs_r16_avx2.inc), a token pair
      // per pass over the weights, for any number of tokens: at 64 tokens 0.77x the tile's time.
      set_r16(GemmIQ4XSR16_Q8K_Avx2, true, kXsR16);
      set_q23(DotQ2K_Q8K_Avx2, DotQ3K_Q8K_Avx2, GemmQ2K_Q8K_Avx2, GemmQ3K_Q8K_Avx2,
              GemmQ2KR16_Q8K_Avx2, GemmQ3KR16_Q8K_Avx2, true);  // repacked at load
      // (gemv_q2k_r16_avx2.inc, gemv_q3k_r16_avx2.inc)
      MOESPLIT_IQ_AVX2;
      MOESPLIT_IQ23_AVX2;
      return;
    case cpu::IsaTier::kAvx512:
      // AVX-512 without VNNI (Skylake-SP): the AVX2 tier's kernels and 16-row layouts, with the
      // AVX-512 ones where they are faster (Q4_K, Q6_K; their 16-row layouts unpacked to them).
      // bench_gemv on Zen 4 (seventeenth session), AVX2 / AVX-512 at 2048 x 7168 cold and 256 x
      // 2048 x 64 tokens: Q5_K 1.45x / 1.18x; Q2_K 1.8x / 2.7x and Q3_K 3.1x / 7.3x (AVX-512 had
      // one dot per (row, token)); IQ4_XS 1.6x / 1.2x (16-row layout against the tiles); the
      // lattice types' decode needs VBMI's byte permutes.
      AddKQuantKernels(cpu::IsaTier::kAvx2, k);
      set(GgmlType::kQ4_K, DotQ4K_Q8K_Avx512, GemmQ4K_Q8K_Avx512);
      set(GgmlType::kQ6_K, DotQ6K_Q8K_Avx512, GemmQ6K_Q8K_Avx512);
      set_r16(GemmR16ByUnpack<GgmlType::kQ4_K_R16, GemmQ4K_Q8K_Avx512>, false);
      set_r16(GemmR16ByUnpack<kQ6R16, GemmQ6K_Q8K_Avx512>, false, kQ6R16);
      return;
    case cpu::IsaTier::kAvx512Vnni:
      set(GgmlType::kQ4_K, DotQ4K_Q8K_Avx512Vnni, GemmQ4K_Q8K_Avx512Vnni);
      set(GgmlType::kQ5_K, DotQ5K_Q8K_Avx512Vnni, GemmQ5K_Q8K_Avx512Vnni);
      set(GgmlType::kQ6_K, DotQ6K_Q8K_Avx512Vnni, GemmQ6K_Q8K_Avx512Vnni);
      set_r16(GemmQ4KR16_Q8K_Avx512Vnni, true);
      // Q6_K: the group tile for any number of tokens; Q5_K: the group kernel for one or two
      // tokens, the row-lane tile filled from the groups for more.
      set_r16(GemmQ6KR16_Q8K_Avx512Vnni, true, kQ6R16);
      set_r16(GemmQ5KR16_Q8K_Avx512Vnni, true, kQ5R16);
      // IQ4_XS: the 16-row layout's kernels (decode and several tokens); the file layout, left
      // to tensors whose rows are not a multiple of 16, one dot per (row, token).
      // With VBMI, vpermb lookups (3 ops per 128 indices instead of 5).
      if (cpu::DetectCpuFeatures().avx512vbmi) {
        set(GgmlType::kIQ4_XS, DotIQ4XS_Q8K_Avx512Vbmi, GemmByDots<DotIQ4XS_Q8K_Avx512Vbmi>);
        set_r16(GemmIQ4XSR16_Q8K_Avx512Vbmi, true, kXsR16);
      } else {
        set(GgmlType::kIQ4_XS, DotIQ4XS_Q8K_Avx512Vnni, GemmByDots<DotIQ4XS_Q8K_Avx512Vnni>);
        set_r16(GemmIQ4XSR16_Q8K_Avx512Vnni, true, kXsR16);
      }
      // Q2_K / Q3_K: the 16-row layouts' tiles (decode and several tokens); the file layout,
      // left to tensors whose rows are not a multiple of 16, one dot per (row, token).
      // With GFNI the Q3_K R16 kernel picks bits with vgf2p8affineqb (one op where shift + AND
      // are two, for its E = 1, 3, 5 extractions) where that pays (Q3KUsesGfni).
      {
        const bool q3_gfni = Q3KUsesGfni(cpu::DetectCpuFeatures());
        set_q23(DotQ2K_Q8K_Avx512Vnni, DotQ3K_Q8K_Avx512Vnni, GemmByDots<DotQ2K_Q8K_Avx512Vnni>,
                GemmByDots<DotQ3K_Q8K_Avx512Vnni>, GemmQ2KR16_Q8K_Avx512Vnni,
                q3_gfni ? GemmQ3KR16_Q8K_Avx512Gfni : GemmQ3KR16_Q8K_Avx512Vnni, true);
      }
      // IQ2_XXS / IQ1_S / IQ1_M: with VBMI and GFNI the block-decode tiles (1-8 tokens per
      // decode); without them the AVX2 dots.
      if (cpu::DetectCpuFeatures().avx512vbmi && cpu::DetectCpuFeatures().gfni) {
        set_iq(DotIQ2XXS_Q8K_Avx512Vbmi, DotIQ1S_Q8K_Avx512Vbmi, DotIQ1M_Q8K_Avx512Vbmi,
               GemmIQ2XXS_Q8K_Avx512Vbmi, GemmIQ1S_Q8K_Avx512Vbmi, GemmIQ1M_Q8K_Avx512Vbmi,
               GemmIQ2XXSR16_Q8K_Avx512Vbmi, GemmIQ1SR16_Q8K_Avx512Vbmi, GemmIQ1MR16_Q8K_Avx512Vbmi,
               true);
      } else {
        MOESPLIT_IQ_AVX2;
      }
      if (cpu::DetectCpuFeatures().avx512vbmi) {
        set(GgmlType::kIQ3_XXS, DotIQ3XXS_Q8K_Avx512Vbmi, GemmIQ3XXS_Q8K_Avx512Vbmi);
        // IQ3_XXS's 16-row layout: its own kernel (in the IQ2_XXS R16 file, which needs GFNI),
        // else unpacked to the file layout's VBMI gemm.
        if (cpu::DetectCpuFeatures().gfni) {
          set_r16(GemmIQ3XXSR16_Q8K_Avx512Vbmi, true, kIq3R16);
          set_r16(GemmIQ3SR16_Q8K_Avx512Vbmi, true, kIq3sR16);
          set_r16(GemmIQ2XSR16_Q8K_Avx512Vbmi, true, kIq2xsR16);
          set_r16(GemmIQ2SR16_Q8K_Avx512Vbmi, true, kIq2sR16);
        } else {
          set_r16(GemmR16ByUnpack<kIq3R16, GemmIQ3XXS_Q8K_Avx512Vbmi>, false, kIq3R16);
          set_r16(GemmR16ByUnpack<kIq3sR16, GemmIQ3S_Q8K_Avx512Vbmi>, false, kIq3sR16);
          set_r16(GemmR16ByUnpack<kIq2xsR16, GemmIQ2XS_Q8K_Avx512Vbmi>, false, kIq2xsR16);
          set_r16(GemmR16ByUnpack<kIq2sR16, GemmIQ2S_Q8K_Avx512Vbmi>, false, kIq2sR16);
        }
        set(GgmlType::kIQ3_S, DotIQ3S_Q8K_Avx512Vbmi, GemmIQ3S_Q8K_Avx512Vbmi);
        set(GgmlType::kIQ2_XS, DotIQ2XS_Q8K_Avx512Vbmi, GemmIQ2XS_Q8K_Avx512Vbmi);
        set(GgmlType::kIQ2_S, DotIQ2S_Q8K_Avx512Vbmi, GemmIQ2S_Q8K_Avx512Vbmi);
      } else {
        MOESPLIT_IQ23_AVX2;
      }
      return;
#endif
    default:
      return;
  }
#undef MOESPLIT_Q23_BY_DOTS
#undef MOESPLIT_IQ_BY_DOTS
#undef MOESPLIT_IQ_AVX2
#undef MOESPLIT_IQ23_BY_DOTS
#undef MOESPLIT_IQ23_AVX2
}

#if defined(MOESPLIT_GEMV_X86)
// The bit picks came with Q3_K's whole-level layout on the Zen 5 VM (2026-11-29) and were not
// measured alone against shifts there or on Intel, which keep them. AMD family 0x19 (Zen 4;
// Zen 3 has no AVX-512): the bit pick shares vpdpbusd's pipes while shifts go beside them
// (bench/probes/instruction_throughput.cc: gf2p8+dpbusd 0.545 ns, srlw+dpbusd 0.334, vpdpbusd
// alone 0.273), and the plain kernel ran bench_gemv q3_K_r16 1.04-1.06x decode (cold and hot)
// and 1.14-1.21x at 2-16 tokens (2026-12-01, nineteenth session).
bool Q3KUsesGfni(const cpu::CpuFeatures& f) { return f.gfni && !cpu::AmdFamily19h(f); }

void UseHardwareDecodeReads(GemvKernels* k) {
  MOESPLIT_CHECK(k->tier == cpu::IsaTier::kAvx512Vnni, "DecodeRead::kHardware kernels are the ",
                 "VNNI tier's, not ", cpu::IsaTierName(k->tier), "'s");
  k->by_type[static_cast<size_t>(GgmlType::kQ4_K_R16)].gemm = GemmQ4KR16_Q8K_Avx512VnniHw;
  k->by_type[static_cast<size_t>(GgmlType::kQ6_K_R16)].gemm = GemmQ6KR16_Q8K_Avx512VnniHw;
  // The legacy 16-row layouts: one group at a time in decode (their prefetch kept).
  const std::pair<GgmlType, GemmFn> legacy[] = {
      {GgmlType::kQ8_0_R16, GemmQ8_0R16_Q8_0_Avx512VnniHw},
      {GgmlType::kQ5_0_R16, GemmQ5_0R16_Q8_0_Avx512VnniHw},
      {GgmlType::kQ4_0_R16, GemmQ4_0R16_Q8_0_Avx512VnniHw},
      {GgmlType::kQ5_1_R16, GemmQ5_1R16_Q8_0_Avx512VnniHw},
      {GgmlType::kQ4_1_R16, GemmQ4_1R16_Q8_0_Avx512VnniHw},
      {GgmlType::kIQ4_NL_R16, GemmIQ4NLR16_Q8_0_Avx512VnniHw},
      {GgmlType::kMXFP4_R16, GemmMXFP4R16_Q8_0_Avx512VnniHw}};
  for (const auto& [type, gemm] : legacy) k->by_type[static_cast<size_t>(type)].gemm = gemm;
}
#endif

}  // namespace moesplit::gemv::internal
