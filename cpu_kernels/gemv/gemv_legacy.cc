// Registration of the legacy-block kernels (weights Q8_0 / Q4_0 / Q4_1 / Q5_0 / Q5_1 / IQ4_NL /
// MXFP4, activations Q8_0) per tier. Scalar gemms are one dot per (row, token); the SIMD tiers have
// tiled gemms that unpack each weight block once for several tokens (gemv_legacy_avx2.cc,
// gemv_legacy_avx512_impl.inc).
#include "cpu_kernels/gemv/gemv_internal.h"

namespace moesplit::gemv::internal {

void AddLegacyKernels(cpu::IsaTier tier, GemvKernels* k) {
  auto set = [&](GgmlType t, DotFn dot, GemmFn gemm) {
    k->by_type[static_cast<size_t>(t)] = {GgmlType::kQ8_0, dot, gemm};
  };
  // The repacked layouts (no dot: a row-interleaved layout has no row on its own).
  auto set_r16 = [&](GgmlType t, GemmFn gemm, bool native) {
    k->by_type[static_cast<size_t>(t)] = {GgmlType::kQ8_0, nullptr, gemm};
    k->native_layout[static_cast<size_t>(t)] = native;
  };
  using T = GgmlType;
  switch (tier) {
    case cpu::IsaTier::kScalar:
      set(GgmlType::kQ8_0, DotQ8_0_Q8_0_Scalar, GemmByDots<DotQ8_0_Q8_0_Scalar>);
      set(GgmlType::kQ4_0, DotQ4_0_Q8_0_Scalar, GemmByDots<DotQ4_0_Q8_0_Scalar>);
      set(GgmlType::kQ5_0, DotQ5_0_Q8_0_Scalar, GemmByDots<DotQ5_0_Q8_0_Scalar>);
      set(GgmlType::kQ5_1, DotQ5_1_Q8_0_Scalar, GemmByDots<DotQ5_1_Q8_0_Scalar>);
      set_r16(T::kQ5_1_R16, GemmR16ByUnpack<T::kQ5_1_R16, GemmByDots<DotQ5_1_Q8_0_Scalar>>, false);
      set(GgmlType::kQ4_1, DotQ4_1_Q8_0_Scalar, GemmByDots<DotQ4_1_Q8_0_Scalar>);
      set_r16(T::kQ4_1_R16, GemmR16ByUnpack<T::kQ4_1_R16, GemmByDots<DotQ4_1_Q8_0_Scalar>>, false);
      set_r16(T::kQ8_0_R16, GemmR16ByUnpack<T::kQ8_0_R16, GemmByDots<DotQ8_0_Q8_0_Scalar>>, false);
      set_r16(T::kQ5_0_R16, GemmR16ByUnpack<T::kQ5_0_R16, GemmByDots<DotQ5_0_Q8_0_Scalar>>, false);
      set_r16(T::kQ4_0_R16, GemmR16ByUnpack<T::kQ4_0_R16, GemmByDots<DotQ4_0_Q8_0_Scalar>>, false);
      set(T::kIQ4_NL, DotIQ4NL_Q8_0_Scalar, GemmByDots<DotIQ4NL_Q8_0_Scalar>);
      set(T::kMXFP4, DotMXFP4_Q8_0_Scalar, GemmByDots<DotMXFP4_Q8_0_Scalar>);
      set_r16(T::kMXFP4_R16, GemmR16ByUnpack<T::kMXFP4_R16, GemmByDots<DotMXFP4_Q8_0_Scalar>>,
              false);
      set_r16(T::kIQ4_NL_R16, GemmR16ByUnpack<T::kIQ4_NL_R16, GemmByDots<DotIQ4NL_Q8_0_Scalar>>,
              false);
      return;
#if defined(MOESPLIT_GEMV_X86)
    case cpu::IsaTier::kAvx2:
      set(GgmlType::kQ8_0, DotQ8_0_Q8_0_Avx2, GemmQ8_0_Q8_0_Avx2);
      set(GgmlType::kQ4_0, DotQ4_0_Q8_0_Avx2, GemmQ4_0_Q8_0_Avx2);
      set(GgmlType::kQ5_0, DotQ5_0_Q8_0_Avx2, GemmQ5_0_Q8_0_Avx2);
      set(GgmlType::kQ5_1, DotQ5_1_Q8_0_Avx2, GemmQ5_1_Q8_0_Avx2);
      set_r16(T::kQ5_1_R16, GemmQ5_1R16_Q8_0_Avx2, true);
      set(GgmlType::kQ4_1, DotQ4_1_Q8_0_Avx2, GemmQ4_1_Q8_0_Avx2);
      set_r16(T::kQ4_1_R16, GemmQ4_1R16_Q8_0_Avx2, true);
      set_r16(T::kQ8_0_R16, GemmR16ByUnpack<T::kQ8_0_R16, GemmQ8_0_Q8_0_Avx2>, false);
      set_r16(T::kQ5_0_R16, GemmQ5_0R16_Q8_0_Avx2, true);
      set_r16(T::kQ4_0_R16, GemmQ4_0R16_Q8_0_Avx2, true);
      set(T::kIQ4_NL, DotIQ4NL_Q8_0_Avx2, GemmIQ4NL_Q8_0_Avx2);
      set(T::kMXFP4, DotMXFP4_Q8_0_Avx2, GemmMXFP4_Q8_0_Avx2);
      set_r16(T::kMXFP4_R16, GemmR16ByUnpack<T::kMXFP4_R16, GemmMXFP4_Q8_0_Avx2>, false);
      // IQ4_NL: the 16-row kernel (repacked at load; gemv_iq4nl_r16_avx2.inc), a token pair
      // per pass over the weights, for any number of tokens: at 64 tokens 0.68x the tile's time.
      set_r16(T::kIQ4_NL_R16, GemmIQ4NLR16_Q8_0_Avx2, true);
      return;
    case cpu::IsaTier::kAvx512:
      // The AVX2 tier's kernels, with this tier's own where they are faster: the Q8_0 / Q4_0 /
      // Q5_0 / IQ4_NL file layouts (Q8_0_R16 unpacked to them). The AVX2 16-row kernels against
      // this tier's file-layout tiles, bench_gemv on Zen 4 (seventeenth session), 2048 x 7168
      // cold / 256 x 2048 x 64 tokens: Q4_0 1.47x / 1.74x, Q5_0 1.08x / 1.92x, IQ4_NL 1.50x /
      // 1.18x; MXFP4's AVX2 tiles 1.15x / 1.96x.
      AddLegacyKernels(cpu::IsaTier::kAvx2, k);
      set(GgmlType::kQ8_0, DotQ8_0_Q8_0_Avx512, GemmQ8_0_Q8_0_Avx512);
      set(GgmlType::kQ4_0, DotQ4_0_Q8_0_Avx512, GemmQ4_0_Q8_0_Avx512);
      set(GgmlType::kQ5_0, DotQ5_0_Q8_0_Avx512, GemmQ5_0_Q8_0_Avx512);
      set_r16(T::kQ8_0_R16, GemmR16ByUnpack<T::kQ8_0_R16, GemmQ8_0_Q8_0_Avx512>, false);
      set(T::kIQ4_NL, DotIQ4NL_Q8_0_Avx512, GemmIQ4NL_Q8_0_Avx512);
      return;
    case cpu::IsaTier::kAvx512Vnni:
      set(GgmlType::kQ8_0, DotQ8_0_Q8_0_Avx512Vnni, GemmQ8_0_Q8_0_Avx512Vnni);
      set(GgmlType::kQ4_0, DotQ4_0_Q8_0_Avx512Vnni, GemmQ4_0_Q8_0_Avx512Vnni);
      set(GgmlType::kQ5_0, DotQ5_0_Q8_0_Avx512Vnni, GemmQ5_0_Q8_0_Avx512Vnni);
      set(GgmlType::kQ5_1, DotQ5_1_Q8_0_Avx2, GemmQ5_1_Q8_0_Avx512Vnni);
      set_r16(T::kQ5_1_R16, GemmQ5_1R16_Q8_0_Avx512Vnni, true);
      set(GgmlType::kQ4_1, DotQ4_1_Q8_0_Avx2, GemmQ4_1_Q8_0_Avx512Vnni);
      set_r16(T::kQ4_1_R16, GemmQ4_1R16_Q8_0_Avx512Vnni, true);
      set_r16(T::kQ8_0_R16, GemmQ8_0R16_Q8_0_Avx512Vnni, true);
      set_r16(T::kQ5_0_R16, GemmQ5_0R16_Q8_0_Avx512Vnni, true);
      set_r16(T::kQ4_0_R16, GemmQ4_0R16_Q8_0_Avx512Vnni, true);
      set(T::kIQ4_NL, DotIQ4NL_Q8_0_Avx512Vnni, GemmIQ4NL_Q8_0_Avx512Vnni);
      set(T::kMXFP4, DotMXFP4_Q8_0_Avx512Vnni, GemmMXFP4_Q8_0_Avx512Vnni);
      set_r16(T::kMXFP4_R16, GemmMXFP4R16_Q8_0_Avx512Vnni, true);
      set_r16(T::kIQ4_NL_R16, GemmIQ4NLR16_Q8_0_Avx512Vnni, true);
      return;
#endif
    default:
      return;
  }
}

}  // namespace moesplit::gemv::internal
