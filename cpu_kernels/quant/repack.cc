#include "cpu_kernels/quant/repack.h"

#include <cstring>

#include "core/base/status.h"
#include "cpu_kernels/quant/quant_math.h"

namespace moesplit::quant {

using internal::PackScaleMinK4;
using internal::UnpackScaleMinK4;

GgmlType RepackedType(GgmlType t, int64_t rows) {
  if (t == GgmlType::kQ4_K && rows > 0 && rows % kR16Rows == 0) return GgmlType::kQ4_K_R16;
  return t;
}

void RepackQ4KRows16(const void* src, size_t src_stride, int64_t n, void* dst) {
  MOESPLIT_CHECK(n % kQkK == 0, "Q4_K row of ", n, " values");
  const auto* s = static_cast<const uint8_t*>(src);
  auto* out = static_cast<BlockQ4_K_R16*>(dst);
  for (int64_t b = 0; b < n / kQkK; ++b) {
    BlockQ4_K_R16& o = out[b];
    for (int r = 0; r < kR16Rows; ++r) {
      BlockQ4_K in;
      std::memcpy(&in, s + r * src_stride + b * sizeof(BlockQ4_K), sizeof(in));
      for (int i = 0; i < 32; ++i) std::memcpy(&o.q[i][r], in.qs + 4 * i, 4);
      for (int j = 0; j < 8; ++j) {
        int sc = 0, m = 0;
        UnpackScaleMinK4(j, in.scales, &sc, &m);
        o.sc[j][r] = static_cast<uint8_t>(sc);
        o.mn[j / 2][r][j % 2] = static_cast<uint8_t>(m);
      }
      o.d[r] = in.d;
      o.dmin[r] = in.dmin;
    }
  }
}

void UnpackQ4KRows16(const void* src, int64_t n, void* dst, size_t dst_stride) {
  MOESPLIT_CHECK(n % kQkK == 0, "Q4_K row of ", n, " values");
  const auto* in = static_cast<const BlockQ4_K_R16*>(src);
  auto* d = static_cast<uint8_t*>(dst);
  for (int64_t b = 0; b < n / kQkK; ++b) {
    const BlockQ4_K_R16& g = in[b];
    for (int r = 0; r < kR16Rows; ++r) {
      BlockQ4_K o;
      for (int i = 0; i < 32; ++i) std::memcpy(o.qs + 4 * i, &g.q[i][r], 4);
      uint8_t ls[8], lm[8];
      for (int j = 0; j < 8; ++j) {
        ls[j] = g.sc[j][r];
        lm[j] = g.mn[j / 2][r][j % 2];
      }
      PackScaleMinK4(ls, lm, o.scales);
      o.d = g.d[r];
      o.dmin = g.dmin[r];
      std::memcpy(d + r * dst_stride + b * sizeof(BlockQ4_K), &o, sizeof(o));
    }
  }
}

void RepackRows(GgmlType from, const void* src, size_t src_stride, int64_t rows, int64_t n,
                void* dst) {
  const GgmlType to = RepackedType(from, rows);
  MOESPLIT_CHECK(to == GgmlType::kQ4_K_R16, TypeName(from), " x ", rows, " rows does not repack");
  const auto* s = static_cast<const uint8_t*>(src);
  auto* o = static_cast<uint8_t*>(dst);
  const size_t group_bytes = static_cast<size_t>(kR16Rows * RowBytes(to, n));
  for (int64_t g = 0; g < rows / kR16Rows; ++g) {
    RepackQ4KRows16(s + g * kR16Rows * src_stride, src_stride, n, o + g * group_bytes);
  }
}

}  // namespace moesplit::quant
