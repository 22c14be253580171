// IQ2_XXS / IQ2_XS / IQ3_XXS sign indices as byte masks, at compile time: byte k of
// kIqSignMask.v[s] is 0xFF where value k of a group with 7-bit sign index s is negative
// (Iq2SignByte; the same bytes as IqTables::sign_mask). The AVX2 token tiles read it per
// 32 values, where a call to GetIqTables would cost more than the lookup.
#ifndef MOESPLIT_CPU_KERNELS_GEMV_IQ_SIGN_MASKS_H_
#define MOESPLIT_CPU_KERNELS_GEMV_IQ_SIGN_MASKS_H_

#include <cstdint>

#include "cpu_kernels/quant/iq_grids.h"

namespace moesplit::gemv::internal {

struct IqSignMaskTable {
  uint64_t v[128];  // [sign index] 8 byte masks
};

constexpr IqSignMaskTable MakeIqSignMasks() {
  IqSignMaskTable t{};
  for (int s = 0; s < 128; ++s) {
    for (int k = 0; k < 8; ++k) {
      if ((quant::internal::Iq2SignByte(s) >> k) & 1) t.v[s] |= uint64_t{0xFF} << (8 * k);
    }
  }
  return t;
}

alignas(64) inline constexpr IqSignMaskTable kIqSignMask = MakeIqSignMasks();

}  // namespace moesplit::gemv::internal

#endif  // MOESPLIT_CPU_KERNELS_GEMV_IQ_SIGN_MASKS_H_
