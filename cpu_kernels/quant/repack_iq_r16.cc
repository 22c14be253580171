// IQ2_XXS / IQ2_XS / IQ2_S / IQ3_XXS / IQ3_S rows <-> their 16-row groups kIQ2_XXS_R16 /
// kIQ2_XS_R16 / kIQ2_S_R16 / kIQ3_XXS_R16 / kIQ3_S_R16 (layouts in repack.h). Lossless both ways:
// Unpack(Repack(rows)) gives the file's bytes back (a group's 7-bit sign index is the low 7 bits of
// its sign byte, Iq2SignByte; IQ3_S moves bits only).
#include <cstring>
#include <utility>

#include "core/base/status.h"
#include "cpu_kernels/quant/blocks_iq.h"
#include "cpu_kernels/quant/iq_grids.h"
#include "cpu_kernels/quant/repack.h"

namespace moesplit::quant {
namespace {

using internal::Iq2SignByte;

// Where index i of a sub-block's row r goes among its index bytes (and, IQ3_S, its index-bit
// masks): vector i / 4, lane group i % 4.
int IndexLane(int r, int i) { return 64 * (i / 4) + 4 * r + i % 4; }
// The IQ3 layouts' sign place of value v = 16 h + 4 g + k < 32 of row r: byte 4 r + g of the
// sub-block's sign bytes, bit order[4 h + k] (kIq3R16SignBit, kIq3SR16SignBit).
std::pair<int, int> Iq3SignBit(const int (&order)[8], int r, int v) {
  return {4 * r + (v % 16) / 4, order[4 * (v / 16) + v % 4]};
}

// What differs between the two types, per sub-block j (32 values) of a file block:
//   kIdx grid indices (IQ2_XXS 4 of 8 values, IQ3_XXS 8 of 4), at IdxBytes(block, j);
//   the u32 of four 7-bit sign indices (values 8 G .. 8 G + 7 for G < 4) and the scale << 28,
//     at AuxBytes(block, j);
//   where value v < 32 of row r keeps its sign: SignBit(r, v), a byte of the group block's
//     Sgn(j) and a bit. Index i < kIdx goes to vector i / 4, lane group i % 4.
struct Iq2Traits {
  using Block = BlockIQ2_XXS;
  using Group = BlockIQ2_XXS_R16;
  static constexpr int kIdx = 4;
  static uint8_t* IdxBytes(Block& b, int j) { return reinterpret_cast<uint8_t*>(b.qs) + 8 * j; }
  static uint8_t* AuxBytes(Block& b, int j) { return IdxBytes(b, j) + 4; }
  // v = 8 g + k: byte 4 r + g of Sgn(j), bit kIq2R16SignBit[k].
  static std::pair<int, int> SignBit(int r, int v) {
    return {4 * r + v / 8, kIq2R16SignBit[v % 8]};
  }
};
struct Iq3Traits {
  using Block = BlockIQ3_XXS;
  using Group = BlockIQ3_XXS_R16;
  static constexpr int kIdx = 8;
  static uint8_t* IdxBytes(Block& b, int j) { return b.qs + 8 * j; }
  static uint8_t* AuxBytes(Block& b, int j) { return b.qs + kQkK / 4 + 4 * j; }
  static std::pair<int, int> SignBit(int r, int v) { return Iq3SignBit(kIq3R16SignBit, r, v); }
};

// The walk every layout here shares: 16 rows of nb = n / 256 file blocks (Block, opening with
// its f16 d) <-> one group (the [nb][16] d's, then nb Group payloads). Repack calls
// fill(in, r, group) per row r and block (in: the walk's copy of the file block); Unpack calls take(group, r, out) with out zeroed and
// its d set.
template <class Block, class Group, class Fill>
void RepackGroup(const void* src, size_t src_stride, int64_t n, void* dst, Fill fill) {
  MOESPLIT_CHECK(n % kQkK == 0, "IQ row of ", n, " values");
  const int64_t nb = n / kQkK;
  const auto* s = static_cast<const uint8_t*>(src);
  auto* d = static_cast<uint16_t*>(dst);  // [nb][16] f16, then the payloads
  auto* out = reinterpret_cast<Group*>(static_cast<uint8_t*>(dst) + nb * kR16Rows * 2);
  for (int64_t b = 0; b < nb; ++b) {
    std::memset(&out[b], 0, sizeof(Group));
    for (int r = 0; r < kR16Rows; ++r) {
      Block in;
      std::memcpy(&in, s + r * src_stride + b * sizeof(Block), sizeof(in));
      d[b * kR16Rows + r] = in.d;
      fill(in, r, out[b]);
    }
  }
}
template <class Block, class Group, class Take>
void UnpackGroup(const void* src, int64_t n, void* dst, size_t dst_stride, Take take) {
  MOESPLIT_CHECK(n % kQkK == 0, "IQ row of ", n, " values");
  const int64_t nb = n / kQkK;
  const auto* d = static_cast<const uint16_t*>(src);
  const auto* in =
      reinterpret_cast<const Group*>(static_cast<const uint8_t*>(src) + nb * kR16Rows * 2);
  auto* o = static_cast<uint8_t*>(dst);
  for (int64_t b = 0; b < nb; ++b) {
    for (int r = 0; r < kR16Rows; ++r) {
      Block out;
      std::memset(&out, 0, sizeof(out));
      out.d = d[b * kR16Rows + r];
      take(in[b], r, out);
      std::memcpy(o + r * dst_stride + b * sizeof(Block), &out, sizeof(out));
    }
  }
}

template <class Tr>
void Repack(const void* src, size_t src_stride, int64_t n, void* dst) {
  using Block = typename Tr::Block;
  using Group = typename Tr::Group;
  RepackGroup<Block, Group>(src, src_stride, n, dst, [](Block& in, int r, Group& o) {
    for (int j = 0; j < 8; ++j) {
      const uint8_t* idx = Tr::IdxBytes(in, j);
      for (int i = 0; i < Tr::kIdx; ++i) o.Q(j)[IndexLane(r, i)] = idx[i];
      uint32_t aux;
      std::memcpy(&aux, Tr::AuxBytes(in, j), 4);
      for (int v = 0; v < 32; ++v) {
        const int neg =
            (Iq2SignByte(static_cast<int>((aux >> (7 * (v / 8))) & 127)) >> (v % 8)) & 1;
        const auto [byte, bit] = Tr::SignBit(r, v);
        o.Sgn(j)[byte] |= static_cast<uint8_t>(neg << bit);
      }
      o.sc[j / 2][r] |= static_cast<uint8_t>((aux >> 28) << (4 * (j % 2)));
    }
  });
}

template <class Tr>
void Unpack(const void* src, int64_t n, void* dst, size_t dst_stride) {
  using Block = typename Tr::Block;
  using Group = typename Tr::Group;
  UnpackGroup<Block, Group>(src, n, dst, dst_stride, [](const Group& g, int r, Block& out) {
    for (int j = 0; j < 8; ++j) {
      uint8_t* idx = Tr::IdxBytes(out, j);
      for (int i = 0; i < Tr::kIdx; ++i) idx[i] = g.Q(j)[IndexLane(r, i)];
      auto aux = static_cast<uint32_t>((g.sc[j / 2][r] >> (4 * (j % 2))) & 15) << 28;
      for (int v = 0; v < 32; ++v) {
        if (v % 8 == 7) continue;  // the parity bit: not stored in the file
        const auto [byte, bit] = Tr::SignBit(r, v);
        const int neg = (g.Sgn(j)[byte] >> bit) & 1;
        aux |= static_cast<uint32_t>(neg) << (7 * (v / 8) + v % 8);
      }
      std::memcpy(Tr::AuxBytes(out, j), &aux, 4);
    }
  });
}

// A sign byte (bit k: value k negative) in kIq2R16SignBit's order, and back.
uint8_t ToR16Signs(unsigned signs) {
  uint8_t byte = 0;
  for (int k = 0; k < 8; ++k) byte |= static_cast<uint8_t>(((signs >> k) & 1) << kIq2R16SignBit[k]);
  return byte;
}
uint8_t FromR16Signs(unsigned byte) {
  uint8_t signs = 0;
  for (int k = 0; k < 8; ++k) signs |= static_cast<uint8_t>(((byte >> kIq2R16SignBit[k]) & 1) << k);
  return signs;
}

bool GetBit(const uint64_t* m, int bit) { return (m[bit / 64] >> (bit % 64)) & 1; }
void SetBit(uint64_t* m, int bit, bool on) {
  if (on) m[bit / 64] |= uint64_t{1} << (bit % 64);
}

}  // namespace

// Index i < 8 of IQ3_S's sub-block j goes to half i / 4, lane byte 4 r + i % 4.
void RepackIQ3SRows16(const void* src, size_t src_stride, int64_t n, void* dst) {
  RepackGroup<BlockIQ3_S, BlockIQ3_S_R16>(
      src, src_stride, n, dst, [](const BlockIQ3_S& in, int r, BlockIQ3_S_R16& o) {
        for (int j = 0; j < 8; ++j) {
          for (int i = 0; i < 8; ++i) {
            o.Q(j)[IndexLane(r, i)] = in.qs[8 * j + i];
            SetBit(o.qh[j], IndexLane(r, i), (in.qh[j] >> i) & 1);
          }
          for (int v = 0; v < 32; ++v) {
            const int neg = (in.signs[4 * j + v / 8] >> (v % 8)) & 1;
            const auto [byte, bit] = Iq3SignBit(kIq3SR16SignBit, r, v);
            o.Sgn(j)[byte] |= static_cast<uint8_t>(neg << bit);
          }
          o.sc[j / 2][r] |= static_cast<uint8_t>(in.scales[j / 2] & (15 << (4 * (j % 2))));
        }
      });
}
void UnpackIQ3SRows16(const void* src, int64_t n, void* dst, size_t dst_stride) {
  UnpackGroup<BlockIQ3_S, BlockIQ3_S_R16>(
      src, n, dst, dst_stride, [](const BlockIQ3_S_R16& g, int r, BlockIQ3_S& out) {
        for (int j = 0; j < 8; ++j) {
          for (int i = 0; i < 8; ++i) {
            out.qs[8 * j + i] = g.Q(j)[IndexLane(r, i)];
            out.qh[j] |= static_cast<uint8_t>(GetBit(g.qh[j], IndexLane(r, i)) << i);
          }
          for (int v = 0; v < 32; ++v) {
            const auto [byte, bit] = Iq3SignBit(kIq3SR16SignBit, r, v);
            out.signs[4 * j + v / 8] |=
                static_cast<uint8_t>(((g.Sgn(j)[byte] >> bit) & 1) << (v % 8));
          }
          out.scales[j / 2] |= static_cast<uint8_t>(g.sc[j / 2][r] & (15 << (4 * (j % 2))));
        }
      });
}

// IQ2_XS: group g of sub-block j holds qs[4 j + g] = 9-bit grid index | 7-bit sign index << 9.
void RepackIQ2XSRows16(const void* src, size_t src_stride, int64_t n, void* dst) {
  RepackGroup<BlockIQ2_XS, BlockIQ2_XS_R16>(
      src, src_stride, n, dst, [](const BlockIQ2_XS& in, int r, BlockIQ2_XS_R16& o) {
        for (int j = 0; j < 8; ++j) {
          for (int g = 0; g < 4; ++g) {
            const unsigned q = in.qs[4 * j + g];
            o.Q(j)[4 * r + g] = static_cast<uint8_t>(q);
            SetBit(&o.qh[j], 4 * r + g, (q >> 8) & 1);
            o.Sgn(j)[4 * r + g] = ToR16Signs(Iq2SignByte(static_cast<int>(q >> 9)));
          }
          o.sc[j][r] = in.scales[j];
        }
      });
}
void UnpackIQ2XSRows16(const void* src, int64_t n, void* dst, size_t dst_stride) {
  UnpackGroup<BlockIQ2_XS, BlockIQ2_XS_R16>(
      src, n, dst, dst_stride, [](const BlockIQ2_XS_R16& g, int r, BlockIQ2_XS& out) {
        for (int j = 0; j < 8; ++j) {
          for (int k = 0; k < 4; ++k) {
            // Values 0-6 (value 7's sign is their parity).
            const unsigned sign_index = FromR16Signs(g.Sgn(j)[4 * r + k]) & 127u;
            const unsigned q = g.Q(j)[4 * r + k] | (GetBit(&g.qh[j], 4 * r + k) ? 256u : 0u);
            out.qs[4 * j + k] = static_cast<uint16_t>(q | sign_index << 9);
          }
          out.scales[j] = g.sc[j][r];
        }
      });
}

// IQ2_S: group g of sub-block j has index qs[4 j + g] | (qh[j] >> 2 g & 3) << 8 and the sign
// byte qs[32 + 4 j + g].
void RepackIQ2SRows16(const void* src, size_t src_stride, int64_t n, void* dst) {
  RepackGroup<BlockIQ2_S, BlockIQ2_S_R16>(
      src, src_stride, n, dst, [](const BlockIQ2_S& in, int r, BlockIQ2_S_R16& o) {
        for (int j = 0; j < 8; ++j) {
          for (int g = 0; g < 4; ++g) {
            o.Q(j)[4 * r + g] = in.qs[4 * j + g];
            o.Sgn(j)[4 * r + g] = ToR16Signs(in.qs[32 + 4 * j + g]);
            for (int bit = 0; bit < 2; ++bit) {
              SetBit(&o.qh[j][bit], 4 * r + g, (in.qh[j] >> (2 * g + bit)) & 1);
            }
          }
          o.sc[j][r] = in.scales[j];
        }
      });
}
void UnpackIQ2SRows16(const void* src, int64_t n, void* dst, size_t dst_stride) {
  UnpackGroup<BlockIQ2_S, BlockIQ2_S_R16>(
      src, n, dst, dst_stride, [](const BlockIQ2_S_R16& g, int r, BlockIQ2_S& out) {
        for (int j = 0; j < 8; ++j) {
          for (int k = 0; k < 4; ++k) {
            out.qs[4 * j + k] = g.Q(j)[4 * r + k];
            out.qs[32 + 4 * j + k] = FromR16Signs(g.Sgn(j)[4 * r + k]);
            for (int bit = 0; bit < 2; ++bit) {
              out.qh[j] |=
                  static_cast<uint8_t>(GetBit(&g.qh[j][bit], 4 * r + k) << (2 * k + bit));
            }
          }
          out.scales[j] = g.sc[j][r];
        }
      });
}

void RepackIQ2XXSRows16(const void* src, size_t src_stride, int64_t n, void* dst) {
  Repack<Iq2Traits>(src, src_stride, n, dst);
}
void UnpackIQ2XXSRows16(const void* src, int64_t n, void* dst, size_t dst_stride) {
  Unpack<Iq2Traits>(src, n, dst, dst_stride);
}
void RepackIQ3XXSRows16(const void* src, size_t src_stride, int64_t n, void* dst) {
  Repack<Iq3Traits>(src, src_stride, n, dst);
}
void UnpackIQ3XXSRows16(const void* src, int64_t n, void* dst, size_t dst_stride) {
  Unpack<Iq3Traits>(src, n, dst, dst_stride);
}

}  // namespace moesplit::quant
