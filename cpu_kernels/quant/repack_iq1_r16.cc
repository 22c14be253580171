// IQ1_S / IQ1_M rows <-> their 16-row groups kIQ1_S_R16 / kIQ1_M_R16 (layouts in repack.h):
// the grid entry of each group of 8 values stored as its base-3 digits. Lossless both ways:
// every kIq1SGrid entry (both types' grid) is a distinct pattern of 8 values in {-1, 0, 1}
// (CHECKed when the inverse is built), so Unpack(Repack(rows)) gives the file's bytes back.
#include <array>
#include <cstring>

#include "core/base/status.h"
#include "cpu_kernels/quant/blocks_iq.h"
#include "cpu_kernels/quant/iq_grids.h"
#include "cpu_kernels/quant/repack.h"

namespace moesplit::quant {
namespace {

using internal::kIq1SGrid;
using internal::kIq1SGridSize;

constexpr int kPatterns = 6561;  // 3^8 digit patterns of a group

// The base-3 number of every grid entry e, sum_k (t_k + 1) 3^k over its 8 values t_k in
// {-1, 0, 1}, and the inverse (pattern -> grid index, -1: no entry). Built once: the repack
// looks one up per 8 weights (a V3 IQ1_S file has ~80 G groups).
struct GridPatterns {
  std::array<int16_t, kIq1SGridSize> pattern;
  std::array<int16_t, kPatterns> inverse;
};
const GridPatterns& Patterns() {
  static const GridPatterns patterns = [] {
    GridPatterns g;
    g.inverse.fill(-1);
    for (int e = 0; e < kIq1SGridSize; ++e) {
      int p = 0;
      for (int k = 7; k >= 0; --k) {
        const int t = static_cast<int8_t>(kIq1SGrid[e] >> (8 * k));
        MOESPLIT_CHECK(t >= -1 && t <= 1, "iq1s grid value ", t);
        p = 3 * p + t + 1;
      }
      MOESPLIT_CHECK(g.inverse[p] < 0, "iq1s grid entries ", g.inverse[p], " and ", e,
                     " are equal");
      g.pattern[e] = static_cast<int16_t>(p);
      g.inverse[p] = static_cast<int16_t>(e);
    }
    return g;
  }();
  return patterns;
}

// Grid index of the digits of a group: its stored byte a (values 0-4) and field f (values 5-7).
int GridIndex(const std::array<int16_t, kPatterns>& inverse, int a, int f, const char* type) {
  const int p = Iq1DigitByteNumber(a) + 243 * Iq1DigitFieldNumber(f);
  const int e = p < kPatterns ? inverse[p] : -1;
  MOESPLIT_CHECK(e >= 0, type, " digits ", p, " are no grid entry");
  return e;
}

// IQ1_M's 3-bit scale of half h (16 values).
int Iq1mScale(const uint16_t* sc, int h) { return (sc[h / 4] >> (3 * (h % 4))) & 7; }

}  // namespace

void RepackIQ1SRows16(const void* src, size_t src_stride, int64_t n, void* dst) {
  MOESPLIT_CHECK(n % kQkK == 0, "IQ1_S row of ", n, " values");
  const int64_t nb = n / kQkK;
  const auto* s = static_cast<const uint8_t*>(src);
  auto* d = static_cast<uint16_t*>(dst);  // [nb][16] f16, then the payloads
  auto* out = reinterpret_cast<BlockIQ1_S_R16*>(static_cast<uint8_t*>(dst) + nb * kR16Rows * 2);
  const auto& pattern = Patterns().pattern;
  for (int64_t b = 0; b < nb; ++b) {
    BlockIQ1_S_R16& o = out[b];
    for (int r = 0; r < kR16Rows; ++r) {
      BlockIQ1_S in;
      std::memcpy(&in, s + r * src_stride + b * sizeof(in), sizeof(in));
      d[b * kR16Rows + r] = in.d;
      for (int j = 0; j < 8; ++j) {
        const uint32_t qh = in.qh[j];
        uint32_t word = ((qh >> 12) & 7) << kIq1R16ScaleShift | (qh >> 15) << kIq1R16SignBit;
        for (int g = 0; g < 4; ++g) {
          const int p = pattern[in.qs[4 * j + g] | ((qh >> (3 * g)) & 7) << 8];
          o.A(j)[4 * r + g] = static_cast<uint8_t>(Iq1DigitByte(p % 243));   // values 0-4
          word |= static_cast<uint32_t>(Iq1DigitField(p / 243)) << (5 * g);  // values 5-7
        }
        for (int i = 0; i < 3; ++i) o.F(j)[3 * r + i] = static_cast<uint8_t>(word >> (8 * i));
      }
    }
  }
}

void UnpackIQ1SRows16(const void* src, int64_t n, void* dst, size_t dst_stride) {
  MOESPLIT_CHECK(n % kQkK == 0, "IQ1_S row of ", n, " values");
  const int64_t nb = n / kQkK;
  const auto& inverse = Patterns().inverse;
  const auto* d = static_cast<const uint16_t*>(src);
  const auto* in =
      reinterpret_cast<const BlockIQ1_S_R16*>(static_cast<const uint8_t*>(src) + nb * kR16Rows * 2);
  auto* o = static_cast<uint8_t*>(dst);
  for (int64_t b = 0; b < nb; ++b) {
    for (int r = 0; r < kR16Rows; ++r) {
      BlockIQ1_S out;
      out.d = d[b * kR16Rows + r];
      for (int j = 0; j < 8; ++j) {
        uint32_t word = 0;
        for (int i = 0; i < 3; ++i) word |= static_cast<uint32_t>(in[b].F(j)[3 * r + i]) << (8 * i);
        uint32_t qh = ((word >> kIq1R16ScaleShift) & 7) << 12 | (word >> kIq1R16SignBit) << 15;
        for (int g = 0; g < 4; ++g) {
          const int e = GridIndex(inverse, in[b].A(j)[4 * r + g],
                                  static_cast<int>((word >> (5 * g)) & 31), "iq1_s_r16");
          out.qs[4 * j + g] = static_cast<uint8_t>(e & 255);
          qh |= static_cast<uint32_t>(e >> 8) << (3 * g);
        }
        out.qh[j] = static_cast<uint16_t>(qh);
      }
      std::memcpy(o + r * dst_stride + b * sizeof(out), &out, sizeof(out));
    }
  }
}

void RepackIQ1MRows16(const void* src, size_t src_stride, int64_t n, void* dst) {
  MOESPLIT_CHECK(n % kQkK == 0, "IQ1_M row of ", n, " values");
  const int64_t nb = n / kQkK;
  const auto* s = static_cast<const uint8_t*>(src);
  auto* d = static_cast<uint16_t*>(dst);  // [nb][16] f16, then the payloads
  auto* out = reinterpret_cast<BlockIQ1_M_R16*>(static_cast<uint8_t*>(dst) + nb * kR16Rows * 2);
  const auto& pattern = Patterns().pattern;
  for (int64_t b = 0; b < nb; ++b) {
    BlockIQ1_M_R16& o = out[b];
    for (int r = 0; r < kR16Rows; ++r) {
      BlockIQ1_M in;
      std::memcpy(&in, s + r * src_stride + b * sizeof(in), sizeof(in));
      uint16_t sc[4];
      std::memcpy(sc, in.scales, sizeof(sc));
      d[b * kR16Rows + r] = Iq1mD(sc);
      for (int j = 0; j < 8; ++j) {
        uint32_t word = 0;
        for (int g = 0; g < 4; ++g) {
          const int G = 4 * j + g;  // the block's group
          const int nibble = (in.qh[G / 2] >> (4 * (G % 2))) & 15;
          const int p = pattern[in.qs[G] | (nibble & 7) << 8];
          o.A(j)[4 * r + g] = static_cast<uint8_t>(Iq1DigitByte(p % 243));
          word |= static_cast<uint32_t>(Iq1DigitField(p / 243)) << (5 * g);
          word |= static_cast<uint32_t>(nibble >> 3) << (kIq1mR16HalfShift[g / 2] + 3 + g % 2);
        }
        for (int h = 0; h < 2; ++h) {
          word |= static_cast<uint32_t>(Iq1mScale(sc, 2 * j + h)) << kIq1mR16HalfShift[h];
        }
        o.W(j)[r] = word;
      }
    }
  }
}

void UnpackIQ1MRows16(const void* src, int64_t n, void* dst, size_t dst_stride) {
  MOESPLIT_CHECK(n % kQkK == 0, "IQ1_M row of ", n, " values");
  const int64_t nb = n / kQkK;
  const auto& inverse = Patterns().inverse;
  const auto* d = static_cast<const uint16_t*>(src);
  const auto* in =
      reinterpret_cast<const BlockIQ1_M_R16*>(static_cast<const uint8_t*>(src) + nb * kR16Rows * 2);
  auto* o = static_cast<uint8_t*>(dst);
  for (int64_t b = 0; b < nb; ++b) {
    for (int r = 0; r < kR16Rows; ++r) {
      BlockIQ1_M out{};
      const uint16_t dd = d[b * kR16Rows + r];
      uint16_t sc[4];
      for (int k = 0; k < 4; ++k) sc[k] = static_cast<uint16_t>(((dd >> (4 * k)) & 15) << 12);
      for (int j = 0; j < 8; ++j) {
        const uint32_t word = in[b].W(j)[r];
        for (int g = 0; g < 4; ++g) {
          const int G = 4 * j + g;
          const int e = GridIndex(inverse, in[b].A(j)[4 * r + g],
                                  static_cast<int>((word >> (5 * g)) & 31), "iq1_m_r16");
          const int sign = (word >> (kIq1mR16HalfShift[g / 2] + 3 + g % 2)) & 1;
          out.qs[G] = static_cast<uint8_t>(e & 255);
          out.qh[G / 2] |= static_cast<uint8_t>(((e >> 8) | sign << 3) << (4 * (G % 2)));
        }
        for (int h = 0; h < 2; ++h) {
          const int H = 2 * j + h;  // the block's half
          sc[H / 4] |= static_cast<uint16_t>(((word >> kIq1mR16HalfShift[h]) & 7) << (3 * (H % 4)));
        }
      }
      std::memcpy(out.scales, sc, sizeof(sc));
      std::memcpy(o + r * dst_stride + b * sizeof(out), &out, sizeof(out));
    }
  }
}

}  // namespace moesplit::quant
