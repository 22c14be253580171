// IQ2_XXS rows <-> their 16-row groups kIQ2_XXS_R16 (layout in repack.h). Lossless both ways:
// UnpackIQ2XXSRows16(RepackIQ2XXSRows16(rows)) gives the file's bytes back (a group's 7-bit
// sign index is the low 7 bits of its sign byte).
#include <cstring>
#include <type_traits>

#include "core/base/status.h"
#include "cpu_kernels/quant/blocks_iq.h"
#include "cpu_kernels/quant/iq_grids.h"
#include "cpu_kernels/quant/repack.h"

namespace moesplit::quant {
namespace {

using internal::Iq2SignByte;

// Sub-block j of an IQ2_XXS block (blocks_iq.h): its 4 grid indices and the word with the four
// 7-bit sign indices and the scale, as little-endian u32s of bytes 8 j .. 8 j + 7.
struct SubBlock {
  uint32_t idx, aux;
};
SubBlock ReadSubBlock(const BlockIQ2_XXS& in, int j) {
  SubBlock s;
  std::memcpy(&s.idx, &in.qs[4 * j], 4);
  std::memcpy(&s.aux, &in.qs[4 * j + 2], 4);
  return s;
}

// A group of nb blocks at g: its [nb][16] f16 d's, then the payloads (Byte: uint8_t or const
// uint8_t, the constness carried to the results).
template <class Byte>
auto* GroupD(Byte* g) {
  using D = std::conditional_t<std::is_const_v<Byte>, const uint16_t, uint16_t>;
  return reinterpret_cast<D*>(g);
}
template <class Byte>
auto* GroupBlocks(Byte* g, int64_t nb) {
  using B = std::conditional_t<std::is_const_v<Byte>, const BlockIQ2_XXS_R16, BlockIQ2_XXS_R16>;
  return reinterpret_cast<B*>(g + nb * kR16Rows * 2);
}

}  // namespace

void RepackIQ2XXSRows16(const void* src, size_t src_stride, int64_t n, void* dst) {
  MOESPLIT_CHECK(n % kQkK == 0, "IQ2_XXS row of ", n, " values");
  const int64_t nb = n / kQkK;
  const auto* s = static_cast<const uint8_t*>(src);
  auto* g = static_cast<uint8_t*>(dst);
  uint16_t* d = GroupD(g);
  BlockIQ2_XXS_R16* out = GroupBlocks(g, nb);
  for (int64_t b = 0; b < nb; ++b) {
    BlockIQ2_XXS_R16& o = out[b];
    std::memset(&o, 0, sizeof(o));
    for (int r = 0; r < kR16Rows; ++r) {
      BlockIQ2_XXS in;
      std::memcpy(&in, s + r * src_stride + b * sizeof(BlockIQ2_XXS), sizeof(in));
      d[b * kR16Rows + r] = in.d;
      for (int j = 0; j < 8; ++j) {
        const SubBlock sb = ReadSubBlock(in, j);
        for (int gi = 0; gi < 4; ++gi) {
          const int lane = 4 * r + gi;
          o.q[j][lane] = static_cast<uint8_t>(sb.idx >> (8 * gi));
          const uint8_t sign = Iq2SignByte(static_cast<int>((sb.aux >> (7 * gi)) & 127));
          for (int k = 0; k < 8; ++k) o.sgn[j][k] |= static_cast<uint64_t>((sign >> k) & 1) << lane;
        }
        o.sc[j / 2][r] |= static_cast<uint8_t>((sb.aux >> 28) << (4 * (j % 2)));
      }
    }
  }
}

void UnpackIQ2XXSRows16(const void* src, int64_t n, void* dst, size_t dst_stride) {
  MOESPLIT_CHECK(n % kQkK == 0, "IQ2_XXS row of ", n, " values");
  const int64_t nb = n / kQkK;
  const auto* g = static_cast<const uint8_t*>(src);
  const uint16_t* d = GroupD(g);
  const BlockIQ2_XXS_R16* in = GroupBlocks(g, nb);
  auto* o = static_cast<uint8_t*>(dst);
  for (int64_t b = 0; b < nb; ++b) {
    const BlockIQ2_XXS_R16& blk = in[b];
    for (int r = 0; r < kR16Rows; ++r) {
      BlockIQ2_XXS out;
      out.d = d[b * kR16Rows + r];
      for (int j = 0; j < 8; ++j) {
        uint32_t idx = 0, aux = static_cast<uint32_t>((blk.sc[j / 2][r] >> (4 * (j % 2))) & 15)
                                << 28;
        for (int gi = 0; gi < 4; ++gi) {
          const int lane = 4 * r + gi;
          idx |= static_cast<uint32_t>(blk.q[j][lane]) << (8 * gi);
          uint32_t sign7 = 0;
          for (int k = 0; k < 7; ++k)
            sign7 |= static_cast<uint32_t>((blk.sgn[j][k] >> lane) & 1) << k;
          aux |= sign7 << (7 * gi);
        }
        std::memcpy(&out.qs[4 * j], &idx, 4);
        std::memcpy(&out.qs[4 * j + 2], &aux, 4);
      }
      std::memcpy(o + r * dst_stride + b * sizeof(BlockIQ2_XXS), &out, sizeof(out));
    }
  }
}

}  // namespace moesplit::quant
