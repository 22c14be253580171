// Q2_K / Q3_K rows <-> their 16-row groups kQ2_K_R16 / kQ3_K_R16 (layouts in repack.h).
// Lossless both ways: UnpackQ*KRows16(RepackQ*KRows16(rows)) gives the file's bytes back.
#include <cstring>

#include "core/base/status.h"
#include "cpu_kernels/quant/quant_math.h"
#include "cpu_kernels/quant/repack.h"

namespace moesplit::quant {
namespace {

// Q2_K / Q3_K's low 2 bits of value v (0..255): byte v % 32 of half v / 128, bit pair
// (v % 128) / 32 (blocks.h).
int Low2(const uint8_t* qs, int v) {
  return (qs[32 * (v / 128) + v % 32] >> (2 * ((v % 128) / 32))) & 3;
}

// Vector dword w = 2P + h of one row (repack.h kQ2_K_R16: value 32P + 16s + 8h + 4t + b at bits
// 8b + 2(2t + s)) from the row's Q2_K qs: that value is crumb k = P % 4 of qs byte
// 32 (P / 4) + 16s + 8h + 4t + b, so each (s, t) is one u32 of 4 qs bytes shifted by 2k and
// masked (a byte's other crumbs, and the bits the shift brings in from the next byte, fall
// outside 0x03 per byte), then moved to bit 2(2t + s).
// Word-wise because the value-by-value form made repacking at load ~13 s of a ds-v2-lite
// UD-Q2_K_XL load (5.6 GB of experts) on 2 Zen 3 cores.
uint32_t Q2VectorDword(const uint8_t* qs, int w) {
  const int pp = w / 2, h = w % 2, k = pp % 4;
  uint32_t word = 0;
  for (int sb = 0; sb < 2; ++sb) {
    for (int t = 0; t < 2; ++t) {
      uint32_t x;
      std::memcpy(&x, qs + 32 * (pp / 4) + 16 * sb + 8 * h + 4 * t, 4);
      word |= ((x >> (2 * k)) & 0x03030303u) << (2 * (2 * t + sb));
    }
  }
  return word;
}
// The inverse per row: levels L (0..3, value order) from the 16 vector dwords.
void UnpackQ2Vectors(const BlockQ2_K_R16& g, int r, uint8_t* L) {
  for (int w = 0; w < 16; ++w) {
    const int pp = w / 2, h = w % 2;
    for (int sb = 0; sb < 2; ++sb) {
      for (int t = 0; t < 2; ++t) {
        for (int b = 0; b < 4; ++b) {
          L[32 * pp + 16 * sb + 8 * h + 4 * t + b] = (g.Q(w)[r] >> (8 * b + 2 * (2 * t + sb))) & 3;
        }
      }
    }
  }
}

// Where value v = 16 j + 4 t + b of a Q3_K block sits in BlockQ3_K_R16: pair j / 2, extraction
// 4 (j % 2) + t, byte b of the plane dwords.
struct Q3Place {
  int pair, e, byte;
};
Q3Place PlaceOf(int v) { return {v / 32, (v % 32) / 4, v % 4}; }

// Scale byte k (0..3) of dword p holds the file's scales[4p + kScaleOrder[k]].
constexpr int kScaleOrder[4] = {0, 2, 1, 3};

}  // namespace

void RepackQ2KRows16(const void* src, size_t src_stride, int64_t n, void* dst) {
  MOESPLIT_CHECK(n % kQkK == 0, "Q2_K row of ", n, " values");
  const auto* s = static_cast<const uint8_t*>(src);
  auto* out = static_cast<BlockQ2_K_R16*>(dst);
  for (int64_t b = 0; b < n / kQkK; ++b) {
    BlockQ2_K_R16& o = out[b];
    for (int r = 0; r < kR16Rows; ++r) {
      BlockQ2_K in;
      std::memcpy(&in, s + r * src_stride + b * sizeof(BlockQ2_K), sizeof(in));
      for (int w = 0; w < 16; ++w) o.Q(w)[r] = Q2VectorDword(in.qs, w);
      for (int p = 0; p < 4; ++p) {
        uint32_t word = 0;
        for (int k = 0; k < 4; ++k)
          word |= static_cast<uint32_t>(in.scales[4 * p + kScaleOrder[k]]) << (8 * k);
        o.Sm(p)[r] = word;
      }
      o.d[r] = in.d;
      o.dmin[r] = in.dmin;
    }
  }
}

void UnpackQ2KRows16(const void* src, int64_t n, void* dst, size_t dst_stride) {
  MOESPLIT_CHECK(n % kQkK == 0, "Q2_K row of ", n, " values");
  const auto* in = static_cast<const BlockQ2_K_R16*>(src);
  auto* d = static_cast<uint8_t*>(dst);
  for (int64_t b = 0; b < n / kQkK; ++b) {
    const BlockQ2_K_R16& g = in[b];
    for (int r = 0; r < kR16Rows; ++r) {
      uint8_t L[kQkK];
      UnpackQ2Vectors(g, r, L);
      BlockQ2_K o;
      internal::Pack2Bit(L, o.qs);
      for (int p = 0; p < 4; ++p) {
        for (int k = 0; k < 4; ++k)
          o.scales[4 * p + kScaleOrder[k]] = (g.Sm(p)[r] >> (8 * k)) & 0xFF;
      }
      o.d = g.d[r];
      o.dmin = g.dmin[r];
      std::memcpy(d + r * dst_stride + b * sizeof(BlockQ2_K), &o, sizeof(o));
    }
  }
}

void RepackQ3KRows16(const void* src, size_t src_stride, int64_t n, void* dst) {
  MOESPLIT_CHECK(n % kQkK == 0, "Q3_K row of ", n, " values");
  const int64_t nb = n / kQkK;
  const auto* s = static_cast<const uint8_t*>(src);
  auto* d = static_cast<uint16_t*>(dst);  // [nb][16] f16
  auto* out = reinterpret_cast<BlockQ3_K_R16*>(static_cast<uint8_t*>(dst) + nb * kR16Rows * 2);
  for (int64_t b = 0; b < nb; ++b) {
    BlockQ3_K_R16& o = out[b];
    std::memset(&o, 0, sizeof(o));  // the planes are OR-ed into; every scale is set below
    for (int r = 0; r < kR16Rows; ++r) {
      BlockQ3_K in;
      std::memcpy(&in, s + r * src_stride + b * sizeof(BlockQ3_K), sizeof(in));
      for (int v = 0; v < kQkK; ++v) {
        const int h = (in.hmask[v % 32] >> (v / 32)) & 1;
        const int q3 = Low2(in.qs, v) + 4 * h;
        const Q3Place p = PlaceOf(v);
        for (int i = 0; i < 3; ++i) {
          const int plane = kQ3R16Bits[p.e][i][0], bit = kQ3R16Bits[p.e][i][1];
          o.V(p.pair)[plane][r] |= static_cast<uint32_t>((q3 >> i) & 1) << (8 * p.byte + bit);
        }
      }
      for (int j = 0; j < 16; ++j) {
        o.Sc(j / 2)[r][j % 2] = static_cast<int8_t>(internal::UnpackScaleQ3K(j, in.scales) - 32);
      }
      d[b * kR16Rows + r] = in.d;
    }
  }
}

void UnpackQ3KRows16(const void* src, int64_t n, void* dst, size_t dst_stride) {
  MOESPLIT_CHECK(n % kQkK == 0, "Q3_K row of ", n, " values");
  const int64_t nb = n / kQkK;
  const auto* d = static_cast<const uint16_t*>(src);  // [nb][16] f16
  const auto* in =
      reinterpret_cast<const BlockQ3_K_R16*>(static_cast<const uint8_t*>(src) + nb * kR16Rows * 2);
  auto* o = static_cast<uint8_t*>(dst);
  for (int64_t b = 0; b < nb; ++b) {
    const BlockQ3_K_R16& g = in[b];
    for (int r = 0; r < kR16Rows; ++r) {
      uint8_t L[kQkK];  // [256] low 2 bits
      BlockQ3_K blk;
      std::memset(blk.hmask, 0, sizeof(blk.hmask));
      for (int v = 0; v < kQkK; ++v) {
        const Q3Place p = PlaceOf(v);
        int q3 = 0;
        for (int i = 0; i < 3; ++i) {
          const int plane = kQ3R16Bits[p.e][i][0], bit = kQ3R16Bits[p.e][i][1];
          q3 |= static_cast<int>((g.V(p.pair)[plane][r] >> (8 * p.byte + bit)) & 1) << i;
        }
        L[v] = static_cast<uint8_t>(q3 & 3);
        blk.hmask[v % 32] |= static_cast<uint8_t>((q3 >> 2) << (v / 32));
      }
      internal::Pack2Bit(L, blk.qs);
      std::memset(blk.scales, 0, sizeof(blk.scales));
      for (int j = 0; j < 16; ++j) {  // the inverse of UnpackScaleQ3K
        const int ls = g.Sc(j / 2)[r][j % 2] + 32;
        blk.scales[j % 8] |= static_cast<uint8_t>((ls & 0xF) << (4 * (j / 8)));
        blk.scales[8 + j % 4] |= static_cast<uint8_t>((ls >> 4) << (2 * (j / 4)));
      }
      blk.d = d[b * kR16Rows + r];
      std::memcpy(o + r * dst_stride + b * sizeof(BlockQ3_K), &blk, sizeof(blk));
    }
  }
}

}  // namespace moesplit::quant
