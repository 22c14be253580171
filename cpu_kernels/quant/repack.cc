#include "cpu_kernels/quant/repack.h"

#include <cstddef>
#include <cstring>
#include <type_traits>

#include "core/base/status.h"
#include "cpu_kernels/quant/blocks_iq.h"
#include "cpu_kernels/quant/quant_math.h"

namespace moesplit::quant {

using internal::PackScaleMinK4;
using internal::UnpackScaleMinK4;

namespace {

// {file type, its 16-row layout}.
constexpr GgmlType kLayouts[][2] = {
    {GgmlType::kQ4_K, GgmlType::kQ4_K_R16},       {GgmlType::kQ5_K, GgmlType::kQ5_K_R16},
    {GgmlType::kQ6_K, GgmlType::kQ6_K_R16},       {GgmlType::kQ8_0, GgmlType::kQ8_0_R16},
    {GgmlType::kQ5_0, GgmlType::kQ5_0_R16},       {GgmlType::kQ4_0, GgmlType::kQ4_0_R16},
    {GgmlType::kIQ4_NL, GgmlType::kIQ4_NL_R16},   {GgmlType::kIQ4_XS, GgmlType::kIQ4_XS_R16},
    {GgmlType::kQ2_K, GgmlType::kQ2_K_R16},       {GgmlType::kQ3_K, GgmlType::kQ3_K_R16},
    {GgmlType::kMXFP4, GgmlType::kMXFP4_R16},     {GgmlType::kIQ2_XXS, GgmlType::kIQ2_XXS_R16},
    {GgmlType::kIQ3_XXS, GgmlType::kIQ3_XXS_R16}, {GgmlType::kIQ1_S, GgmlType::kIQ1_S_R16},
    {GgmlType::kIQ1_M, GgmlType::kIQ1_M_R16},     {GgmlType::kQ5_1, GgmlType::kQ5_1_R16},
    {GgmlType::kIQ3_S, GgmlType::kIQ3_S_R16},     {GgmlType::kIQ2_XS, GgmlType::kIQ2_XS_R16},
    {GgmlType::kIQ2_S, GgmlType::kIQ2_S_R16},     {GgmlType::kQ4_1, GgmlType::kQ4_1_R16}};

// The other member of t's pair (side 0: t is a file type; 1: t is a layout), or t itself.
GgmlType Partner(GgmlType t, int side) {
  for (const auto& pair : kLayouts) {
    if (pair[side] == t) return pair[1 - side];
  }
  return t;
}

}  // namespace

GgmlType RepackedType(GgmlType t, int64_t rows) {
  return rows > 0 && rows % kR16Rows == 0 ? Partner(t, 0) : t;
}

GgmlType UnpackedType(GgmlType t) { return Partner(t, 1); }

namespace {

// The unpacked 6-bit scales and mins of row r of a K-quant group block (Q4_K_R16 / Q5_K_R16)
// from, and back to, the file's 12 packed bytes.
template <typename Block>
void SetScales(const uint8_t* packed, int r, Block* o) {
  for (int j = 0; j < 8; ++j) {
    int sc = 0, m = 0;
    UnpackScaleMinK4(j, packed, &sc, &m);
    o->sc[j][r] = static_cast<uint8_t>(sc);
    o->mn[j / 2][r][j % 2] = static_cast<uint8_t>(m);
  }
}
template <typename Block>
void GetScales(const Block& g, int r, uint8_t* packed) {
  uint8_t ls[8], lm[8];
  for (int j = 0; j < 8; ++j) {
    ls[j] = g.sc[j][r];
    lm[j] = g.mn[j / 2][r][j % 2];
  }
  PackScaleMinK4(ls, lm, packed);
}

// Q4_K / Q5_K rows <-> their 16-row groups (Block, Group: BlockQ4_K / BlockQ4_K_R16 or
// BlockQ5_K / BlockQ5_K_R16; Q5_K's qh dwords move like the qs dwords).
template <class Block, class Group>
void RepackK4K5(const void* src, size_t src_stride, int64_t n, void* dst) {
  MOESPLIT_CHECK(n % kQkK == 0, "K-quant row of ", n, " values");
  const auto* s = static_cast<const uint8_t*>(src);
  auto* out = static_cast<Group*>(dst);
  for (int64_t b = 0; b < n / kQkK; ++b) {
    Group& o = out[b];
    for (int r = 0; r < kR16Rows; ++r) {
      Block in;
      std::memcpy(&in, s + r * src_stride + b * sizeof(Block), sizeof(in));
      for (int i = 0; i < 32; ++i) std::memcpy(&o.q[i][r], in.qs + 4 * i, 4);
      if constexpr (std::is_same_v<Block, BlockQ5_K>) {
        for (int m = 0; m < 8; ++m) std::memcpy(&o.qh[m][r], in.qh + 4 * m, 4);
      }
      SetScales(in.scales, r, &o);
      o.d[r] = in.d;
      o.dmin[r] = in.dmin;
    }
  }
}

template <class Block, class Group>
void UnpackK4K5(const void* src, int64_t n, void* dst, size_t dst_stride) {
  MOESPLIT_CHECK(n % kQkK == 0, "K-quant row of ", n, " values");
  const auto* in = static_cast<const Group*>(src);
  auto* d = static_cast<uint8_t*>(dst);
  for (int64_t b = 0; b < n / kQkK; ++b) {
    const Group& g = in[b];
    for (int r = 0; r < kR16Rows; ++r) {
      Block o;
      for (int i = 0; i < 32; ++i) std::memcpy(o.qs + 4 * i, &g.q[i][r], 4);
      if constexpr (std::is_same_v<Block, BlockQ5_K>) {
        for (int m = 0; m < 8; ++m) std::memcpy(o.qh + 4 * m, &g.qh[m][r], 4);
      }
      GetScales(g, r, o.scales);
      o.d = g.d[r];
      o.dmin = g.dmin[r];
      std::memcpy(d + r * dst_stride + b * sizeof(Block), &o, sizeof(o));
    }
  }
}

}  // namespace

void RepackQ4KRows16(const void* src, size_t src_stride, int64_t n, void* dst) {
  RepackK4K5<BlockQ4_K, BlockQ4_K_R16>(src, src_stride, n, dst);
}

void UnpackQ4KRows16(const void* src, int64_t n, void* dst, size_t dst_stride) {
  UnpackK4K5<BlockQ4_K, BlockQ4_K_R16>(src, n, dst, dst_stride);
}

void RepackQ5KRows16(const void* src, size_t src_stride, int64_t n, void* dst) {
  RepackK4K5<BlockQ5_K, BlockQ5_K_R16>(src, src_stride, n, dst);
}

void UnpackQ5KRows16(const void* src, int64_t n, void* dst, size_t dst_stride) {
  UnpackK4K5<BlockQ5_K, BlockQ5_K_R16>(src, n, dst, dst_stride);
}

void RepackQ6KRows16(const void* src, size_t src_stride, int64_t n, void* dst) {
  MOESPLIT_CHECK(n % kQkK == 0, "Q6_K row of ", n, " values");
  const auto* s = static_cast<const uint8_t*>(src);
  auto* out = static_cast<BlockQ6_K_R16*>(dst);
  for (int64_t b = 0; b < n / kQkK; ++b) {
    BlockQ6_K_R16& o = out[b];
    for (int r = 0; r < kR16Rows; ++r) {
      BlockQ6_K in;
      std::memcpy(&in, s + r * src_stride + b * sizeof(BlockQ6_K), sizeof(in));
      uint8_t L[kQkK];
      internal::Q6KLevels(in, L);
      // Step i = 4Q + t, vector c < 3, 4 bytes j (one 32-bit word, masks per byte): the levels
      // of values 64Q + 16c + 4t + j, bits 6-7 = bits 4 - 2c, 5 - 2c of the levels of values
      // 64Q + 48 + 4t + j.
      for (int i = 0; i < 16; ++i) {
        const uint8_t* base = L + 64 * (i / 4) + 4 * (i % 4);
        uint32_t top;
        std::memcpy(&top, base + 48, 4);
        for (int c = 0; c < 3; ++c) {
          uint32_t lv;
          std::memcpy(&lv, base + 16 * c, 4);
          const uint32_t word = lv | (top >> (4 - 2 * c) & 0x03030303u) << 6;
          std::memcpy(&o.q[3 * i + c][r], &word, 4);
        }
      }
      for (int j = 0; j < 16; ++j) o.sc[j][r] = in.scales[j];
      o.d[r] = in.d;
    }
  }
}

void UnpackQ6KRows16(const void* src, int64_t n, void* dst, size_t dst_stride) {
  MOESPLIT_CHECK(n % kQkK == 0, "Q6_K row of ", n, " values");
  const auto* in = static_cast<const BlockQ6_K_R16*>(src);
  auto* d = static_cast<uint8_t*>(dst);
  for (int64_t b = 0; b < n / kQkK; ++b) {
    const BlockQ6_K_R16& g = in[b];
    for (int r = 0; r < kR16Rows; ++r) {
      uint8_t L[kQkK];
      for (int i = 0; i < 16; ++i) {  // the inverse of RepackQ6KRows16's words
        uint8_t* base = L + 64 * (i / 4) + 4 * (i % 4);
        uint32_t top = 0;
        for (int c = 0; c < 3; ++c) {
          uint32_t word;
          std::memcpy(&word, &g.q[3 * i + c][r], 4);
          const uint32_t lv = word & 0x3F3F3F3Fu;
          std::memcpy(base + 16 * c, &lv, 4);
          top |= (word >> 6 & 0x03030303u) << (4 - 2 * c);
        }
        std::memcpy(base + 48, &top, 4);
      }
      BlockQ6_K o;
      internal::PackQ6KLevels(L, &o);
      for (int j = 0; j < 16; ++j) o.scales[j] = g.sc[j][r];
      o.d = g.d[r];
      std::memcpy(d + r * dst_stride + b * sizeof(BlockQ6_K), &o, sizeof(o));
    }
  }
}

void RepackIQ4XSRows16(const void* src, size_t src_stride, int64_t n, void* dst) {
  MOESPLIT_CHECK(n % kQkK == 0, "IQ4_XS row of ", n, " values");
  const int64_t nb = n / kQkK;
  const auto* s = static_cast<const uint8_t*>(src);
  auto* d = static_cast<uint16_t*>(dst);  // [nb][16] f16
  auto* out = reinterpret_cast<BlockIQ4_XS_R16*>(static_cast<uint8_t*>(dst) + nb * kR16Rows * 2);
  for (int64_t b = 0; b < nb; ++b) {
    BlockIQ4_XS_R16& o = out[b];
    for (int r = 0; r < kR16Rows; ++r) {
      BlockIQ4_XS in;
      std::memcpy(&in, s + r * src_stride + b * sizeof(BlockIQ4_XS), sizeof(in));
      for (int i = 0; i < 32; ++i) std::memcpy(&o.Q(i)[r], in.qs + 4 * i, 4);
      for (int j = 0; j < 8; ++j) {
        const int ls = ((in.scales_l[j / 2] >> 4 * (j % 2)) & 0xF) | ((in.scales_h >> 2 * j) & 3)
                                                                         << 4;
        o.Sc(j)[r] = static_cast<int8_t>(ls - 32);
      }
      d[b * kR16Rows + r] = in.d;
    }
  }
}

void UnpackIQ4XSRows16(const void* src, int64_t n, void* dst, size_t dst_stride) {
  MOESPLIT_CHECK(n % kQkK == 0, "IQ4_XS row of ", n, " values");
  const int64_t nb = n / kQkK;
  const auto* d = static_cast<const uint16_t*>(src);  // [nb][16] f16
  const auto* in = reinterpret_cast<const BlockIQ4_XS_R16*>(static_cast<const uint8_t*>(src) +
                                                            nb * kR16Rows * 2);
  auto* o = static_cast<uint8_t*>(dst);
  for (int64_t b = 0; b < nb; ++b) {
    const BlockIQ4_XS_R16& g = in[b];
    for (int r = 0; r < kR16Rows; ++r) {
      BlockIQ4_XS blk;
      for (int i = 0; i < 32; ++i) std::memcpy(blk.qs + 4 * i, &g.Q(i)[r], 4);
      blk.scales_h = 0;
      std::memset(blk.scales_l, 0, sizeof(blk.scales_l));
      for (int j = 0; j < 8; ++j) {
        const int ls = g.Sc(j)[r] + 32;
        blk.scales_l[j / 2] |= static_cast<uint8_t>((ls & 0xF) << 4 * (j % 2));
        blk.scales_h |= static_cast<uint16_t>((ls >> 4) << 2 * j);
      }
      blk.d = d[b * kR16Rows + r];
      std::memcpy(o + r * dst_stride + b * sizeof(BlockIQ4_XS), &blk, sizeof(blk));
    }
  }
}

namespace {

// The legacy file blocks' fields at a block's bytes (each starts with its scale: the f16 d, or
// MXFP4's E8M0 byte).
struct LegacyFields {
  const uint8_t* qs;  // Q8_0: [32] quants; Q4_0 / Q4_1 / Q5_0 / Q5_1 / IQ4_NL / MXFP4: [16] nibble
                      // pairs
  uint32_t qh;        // Q5_0 / Q5_1: bit j = value j's 5th bit; 0 otherwise
};

// Where a legacy file block's quants start: after the f16 d (Q5_0: and its 4 qh bytes; Q4_1: d
// and m; Q5_1: d, m and qh), or after MXFP4's 1-byte exponent.
size_t LegacyQsOffset(GgmlType t) {
  return t == GgmlType::kQ5_0    ? offsetof(BlockQ5_0, qs)
         : t == GgmlType::kQ4_1  ? offsetof(BlockQ4_1, qs)
         : t == GgmlType::kQ5_1  ? offsetof(BlockQ5_1, qs)
         : t == GgmlType::kMXFP4 ? offsetof(BlockMXFP4, qs)
                                 : 2;
}

bool HasHighBits(GgmlType t) { return t == GgmlType::kQ5_0 || t == GgmlType::kQ5_1; }
size_t QhOffset(GgmlType t) {
  return t == GgmlType::kQ5_0 ? offsetof(BlockQ5_0, qh) : offsetof(BlockQ5_1, qh);
}

LegacyFields ReadLegacy(GgmlType t, const uint8_t* blk) {
  LegacyFields f{blk + LegacyQsOffset(t), 0};
  if (HasHighBits(t)) std::memcpy(&f.qh, blk + QhOffset(t), 4);
  return f;
}

// A group's head holds per block `parts` rows of 16 scales (repack.h): [nb][16] of one scale
// (sb bytes per row and block), Q4_1's / Q5_1's [nb][2][16] of d and m (sb = 4, 2 bytes each). Part
// i < parts is the block's file bytes [i * sb / parts, (i + 1) * sb / parts).
int64_t LegacyScaleParts(int64_t sb) { return sb == 4 ? 2 : 1; }
int64_t LegacyHeadOffset(int64_t b, int r, int64_t sb, int64_t i) {
  const int64_t parts = LegacyScaleParts(sb), bytes = sb / parts;
  return ((b * parts + i) * kR16Rows + r) * bytes;
}

}  // namespace

void RepackLegacyRows16(GgmlType from, const void* src, size_t src_stride, int64_t n, void* dst) {
  const GgmlType to = RepackedType(from, kR16Rows);
  const int64_t payload = LegacyR16Payload(to), bb = RowBytes(from, kQk), nb = n / kQk;
  MOESPLIT_CHECK(payload > 0 && n % kQk == 0, TypeName(from), " row of ", n, " values");
  const auto* s = static_cast<const uint8_t*>(src);
  const int64_t sb = LegacyR16ScaleBytes(to);
  const int64_t parts = LegacyScaleParts(sb);  // scale rows per block in the head
  // [nb][16] f16 d (MXFP4: u8 exponent; Q4_1 / Q5_1: [nb][2][16])
  auto* d = static_cast<uint8_t*>(dst);
  uint8_t* out = d + nb * kR16Rows * sb;  // payloads
  const int dwords = from == GgmlType::kQ8_0 ? 8 : 4;
  for (int64_t b = 0; b < nb; ++b) {
    uint8_t* p = out + b * payload;
    uint64_t h[8] = {};  // Q5_0 / Q5_1: the byte masks
    for (int r = 0; r < kR16Rows; ++r) {
      const uint8_t* blk = s + r * src_stride + b * bb;
      for (int64_t i = 0; i < parts; ++i) {
        std::memcpy(d + LegacyHeadOffset(b, r, sb, i), blk + i * sb / parts,
                    static_cast<size_t>(sb / parts));
      }
      const LegacyFields f = ReadLegacy(from, blk);
      for (int k = 0; k < dwords; ++k) {
        uint32_t q;
        std::memcpy(&q, f.qs + 4 * k, 4);
        if (from == GgmlType::kQ8_0) q ^= 0x80808080u;
        std::memcpy(p + 4 * (k * kR16Rows + r), &q, 4);
      }
      for (int g = 0; g < 8; ++g) h[g] |= static_cast<uint64_t>((f.qh >> (4 * g)) & 0xF) << (4 * r);
    }
    if (HasHighBits(from)) std::memcpy(p + 4 * 64, h, sizeof(h));
  }
}

void UnpackLegacyRows16(GgmlType r16, const void* src, int64_t n, void* dst, size_t dst_stride) {
  const GgmlType to = UnpackedType(r16);
  const int64_t payload = LegacyR16Payload(r16), bb = RowBytes(to, kQk), nb = n / kQk;
  MOESPLIT_CHECK(payload > 0 && n % kQk == 0, TypeName(r16), " row of ", n, " values");
  const int64_t sb = LegacyR16ScaleBytes(r16);
  const int64_t parts = LegacyScaleParts(sb);        // scale rows per block in the head
  const auto* d = static_cast<const uint8_t*>(src);  // the head, as RepackLegacyRows16's
  const uint8_t* in = d + nb * kR16Rows * sb;
  auto* o = static_cast<uint8_t*>(dst);
  const int dwords = to == GgmlType::kQ8_0 ? 8 : 4;
  for (int64_t b = 0; b < nb; ++b) {
    const uint8_t* p = in + b * payload;
    uint64_t h[8] = {};
    if (HasHighBits(to)) std::memcpy(h, p + 4 * 64, sizeof(h));
    for (int r = 0; r < kR16Rows; ++r) {
      uint8_t* blk = o + r * dst_stride + b * bb;
      for (int64_t i = 0; i < parts; ++i) {
        std::memcpy(blk + i * sb / parts, d + LegacyHeadOffset(b, r, sb, i),
                    static_cast<size_t>(sb / parts));
      }
      uint8_t* qs = blk + LegacyQsOffset(to);
      for (int k = 0; k < dwords; ++k) {
        uint32_t q;
        std::memcpy(&q, p + 4 * (k * kR16Rows + r), 4);
        if (to == GgmlType::kQ8_0) q ^= 0x80808080u;
        std::memcpy(qs + 4 * k, &q, 4);
      }
      if (HasHighBits(to)) {
        uint32_t qh = 0;
        for (int g = 0; g < 8; ++g) qh |= static_cast<uint32_t>((h[g] >> (4 * r)) & 0xF) << (4 * g);
        std::memcpy(blk + QhOffset(to), &qh, 4);
      }
    }
  }
}

void RepackRows(GgmlType from, const void* src, size_t src_stride, int64_t rows, int64_t n,
                void* dst) {
  const GgmlType to = RepackedType(from, rows);
  MOESPLIT_CHECK(to != from, TypeName(from), " x ", rows, " rows does not repack");
  const auto* s = static_cast<const uint8_t*>(src);
  auto* o = static_cast<uint8_t*>(dst);
  const size_t group_bytes = static_cast<size_t>(kR16Rows * RowBytes(to, n));
  for (int64_t g = 0; g < rows / kR16Rows; ++g) {
    const uint8_t* in = s + g * kR16Rows * src_stride;
    if (to == GgmlType::kQ4_K_R16) {
      RepackQ4KRows16(in, src_stride, n, o + g * group_bytes);
    } else if (to == GgmlType::kQ5_K_R16) {
      RepackQ5KRows16(in, src_stride, n, o + g * group_bytes);
    } else if (to == GgmlType::kQ6_K_R16) {
      RepackQ6KRows16(in, src_stride, n, o + g * group_bytes);
    } else if (to == GgmlType::kIQ4_XS_R16) {
      RepackIQ4XSRows16(in, src_stride, n, o + g * group_bytes);
    } else if (to == GgmlType::kQ2_K_R16) {
      RepackQ2KRows16(in, src_stride, n, o + g * group_bytes);
    } else if (to == GgmlType::kQ3_K_R16) {
      RepackQ3KRows16(in, src_stride, n, o + g * group_bytes);
    } else if (to == GgmlType::kIQ2_XXS_R16) {
      RepackIQ2XXSRows16(in, src_stride, n, o + g * group_bytes);
    } else if (to == GgmlType::kIQ3_XXS_R16) {
      RepackIQ3XXSRows16(in, src_stride, n, o + g * group_bytes);
    } else if (to == GgmlType::kIQ2_S_R16) {
      RepackIQ2SRows16(in, src_stride, n, o + g * group_bytes);
    } else if (to == GgmlType::kIQ2_XS_R16) {
      RepackIQ2XSRows16(in, src_stride, n, o + g * group_bytes);
    } else if (to == GgmlType::kIQ3_S_R16) {
      RepackIQ3SRows16(in, src_stride, n, o + g * group_bytes);
    } else if (to == GgmlType::kIQ1_S_R16) {
      RepackIQ1SRows16(in, src_stride, n, o + g * group_bytes);
    } else if (to == GgmlType::kIQ1_M_R16) {
      RepackIQ1MRows16(in, src_stride, n, o + g * group_bytes);
    } else {
      RepackLegacyRows16(from, in, src_stride, n, o + g * group_bytes);
    }
  }
}

void UnpackRows16(GgmlType r16, const void* src, int64_t n, void* dst, size_t dst_stride) {
  if (r16 == GgmlType::kQ4_K_R16) {
    UnpackQ4KRows16(src, n, dst, dst_stride);
  } else if (r16 == GgmlType::kQ5_K_R16) {
    UnpackQ5KRows16(src, n, dst, dst_stride);
  } else if (r16 == GgmlType::kQ6_K_R16) {
    UnpackQ6KRows16(src, n, dst, dst_stride);
  } else if (r16 == GgmlType::kIQ4_XS_R16) {
    UnpackIQ4XSRows16(src, n, dst, dst_stride);
  } else if (r16 == GgmlType::kQ2_K_R16) {
    UnpackQ2KRows16(src, n, dst, dst_stride);
  } else if (r16 == GgmlType::kQ3_K_R16) {
    UnpackQ3KRows16(src, n, dst, dst_stride);
  } else if (r16 == GgmlType::kIQ2_XXS_R16) {
    UnpackIQ2XXSRows16(src, n, dst, dst_stride);
  } else if (r16 == GgmlType::kIQ3_XXS_R16) {
    UnpackIQ3XXSRows16(src, n, dst, dst_stride);
  } else if (r16 == GgmlType::kIQ2_S_R16) {
    UnpackIQ2SRows16(src, n, dst, dst_stride);
  } else if (r16 == GgmlType::kIQ2_XS_R16) {
    UnpackIQ2XSRows16(src, n, dst, dst_stride);
  } else if (r16 == GgmlType::kIQ3_S_R16) {
    UnpackIQ3SRows16(src, n, dst, dst_stride);
  } else if (r16 == GgmlType::kIQ1_S_R16) {
    UnpackIQ1SRows16(src, n, dst, dst_stride);
  } else if (r16 == GgmlType::kIQ1_M_R16) {
    UnpackIQ1MRows16(src, n, dst, dst_stride);
  } else {
    UnpackLegacyRows16(r16, src, n, dst, dst_stride);
  }
}

}  // namespace moesplit::quant
