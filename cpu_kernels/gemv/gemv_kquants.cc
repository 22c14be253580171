// Registration of the K-quant kernels (weights Q4_K/Q5_K/Q6_K, activations Q8_K) per tier.
// The scalar tier keeps GemmByDots (it is the reference); the SIMD tiers have tiled gemms.
#include <vector>

#include "cpu_kernels/gemv/gemv_internal.h"
#include "cpu_kernels/quant/repack.h"

namespace moesplit::gemv::internal {

// kQ4_K_R16 on tiers without its own tiles: each 16-row group unpacked back to Q4_K rows
// (std::vector: this is the reference / fallback path, not a hot one) and the tier's Q4_K gemm.
template <GemmFn kQ4KGemm>
void GemmQ4KR16ByUnpack(const void* w, size_t w_stride, int64_t n_rows, const void* a,
                        size_t a_stride, int64_t n_tok, int64_t n, float* y, int64_t ldy) {
  const size_t row_bytes = static_cast<size_t>(RowBytes(GgmlType::kQ4_K, n));
  std::vector<uint8_t> rows(quant::kR16Rows * row_bytes);  // [16 rows x row_bytes] Q4_K
  for (int64_t r0 = 0; r0 < n_rows; r0 += quant::kR16Rows) {
    quant::UnpackQ4KRows16(static_cast<const uint8_t*>(w) + static_cast<size_t>(r0) * w_stride, n,
                           rows.data(), row_bytes);
    kQ4KGemm(rows.data(), row_bytes, quant::kR16Rows, a, a_stride, n_tok, n, y + r0, ldy);
  }
}

void AddKQuantKernels(cpu::IsaTier tier, GemvKernels* k) {
  auto set = [&](GgmlType t, DotFn dot, GemmFn gemm) {
    k->by_type[static_cast<size_t>(t)] = {GgmlType::kQ8_K, dot, gemm};
  };
  auto set_r16 = [&](GemmFn gemm, bool native) {
    k->by_type[static_cast<size_t>(GgmlType::kQ4_K_R16)] = {GgmlType::kQ8_K, nullptr, gemm};
    k->native_q4k_r16 = native;
  };
  switch (tier) {
    case cpu::IsaTier::kScalar:
      set(GgmlType::kQ4_K, DotQ4K_Q8K_Scalar, GemmByDots<DotQ4K_Q8K_Scalar>);
      set(GgmlType::kQ5_K, DotQ5K_Q8K_Scalar, GemmByDots<DotQ5K_Q8K_Scalar>);
      set(GgmlType::kQ6_K, DotQ6K_Q8K_Scalar, GemmByDots<DotQ6K_Q8K_Scalar>);
      set_r16(GemmQ4KR16ByUnpack<GemmByDots<DotQ4K_Q8K_Scalar>>, false);
      return;
#if defined(MOESPLIT_GEMV_X86)
    case cpu::IsaTier::kAvx2:
      set(GgmlType::kQ4_K, DotQ4K_Q8K_Avx2, GemmQ4K_Q8K_Avx2);
      set(GgmlType::kQ5_K, DotQ5K_Q8K_Avx2, GemmQ5K_Q8K_Avx2);
      set(GgmlType::kQ6_K, DotQ6K_Q8K_Avx2, GemmQ6K_Q8K_Avx2);
      set_r16(GemmQ4KR16ByUnpack<GemmQ4K_Q8K_Avx2>, false);
      return;
    case cpu::IsaTier::kAvx512:
      set(GgmlType::kQ4_K, DotQ4K_Q8K_Avx512, GemmQ4K_Q8K_Avx512);
      set(GgmlType::kQ5_K, DotQ5K_Q8K_Avx512, GemmQ5K_Q8K_Avx512);
      set(GgmlType::kQ6_K, DotQ6K_Q8K_Avx512, GemmQ6K_Q8K_Avx512);
      set_r16(GemmQ4KR16ByUnpack<GemmQ4K_Q8K_Avx512>, false);
      return;
    case cpu::IsaTier::kAvx512Vnni:
      set(GgmlType::kQ4_K, DotQ4K_Q8K_Avx512Vnni, GemmQ4K_Q8K_Avx512Vnni);
      set(GgmlType::kQ5_K, DotQ5K_Q8K_Avx512Vnni, GemmQ5K_Q8K_Avx512Vnni);
      set(GgmlType::kQ6_K, DotQ6K_Q8K_Avx512Vnni, GemmQ6K_Q8K_Avx512Vnni);
      set_r16(GemmQ4KR16_Q8K_Avx512Vnni, true);
      return;
#endif
    default:
      return;
  }
}

}  // namespace moesplit::gemv::internal
