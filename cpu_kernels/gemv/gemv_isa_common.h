// Helpers shared by the per-ISA kernel files. Internal to cpu_kernels/gemv/.
//
// Everything here is `static`: each kernel file gets its own copy compiled with its own -m flags,
// so the linker can never substitute an AVX-512 build of a helper into the scalar path (see
// gemv_internal.h). Do not include from files outside cpu_kernels/gemv/.
#pragma once

#include <cstdint>
#include <cstring>

namespace moesplit::gemv::internal {

// The little-endian u32 at p (any alignment): the lattice blocks' packed index / sign words.
static inline uint32_t LoadU32(const void* p) {
  uint32_t v;
  std::memcpy(&v, p, sizeof(v));
  return v;
}

// sum_k grid_k sign_k q8_k over the n values of one lattice grid entry (magnitude k = byte k of
// entry; bit k of signs set: value k negative): the scalar reference dots' inner step.
template <int n>
static inline int32_t SignedGroup(uint64_t entry, unsigned signs, const int8_t* q8) {
  int32_t s = 0;
  for (int k = 0; k < n; ++k) {
    const int m = static_cast<uint8_t>(entry >> (8 * k));
    s += ((signs >> k) & 1 ? -m : m) * q8[k];
  }
  return s;
}

// The end (as an address) of a decode call's weights, n_rows rows w_stride bytes apart: the
// decode kernels' software prefetches, running a fixed distance ahead of the loads, stop there.
// Why: an expert layer's decode is ~80 GEMV calls of 0.25-4 MB each (V2-Lite: 18 gate/up slices
// of 663 KB x 2, 8 down tasks x 6 experts of 248 KB), and without the stop each call fetches its
// prefetch distance (16-19 KB) of rows it never reads: up to ~1.4 MB of a 32 MB layer. Measured
// (bench_moe_layer decode, 3 alternating rounds): no difference beyond this VM's noise (+-8%);
// kept because it cannot cost anything but a compare per block. Rows are contiguous (w_stride =
// row bytes) in every decode call.
static inline uintptr_t PrefetchEnd(const void* w, int64_t n_rows, size_t w_stride) {
  return reinterpret_cast<uintptr_t>(w) + static_cast<uintptr_t>(n_rows) * w_stride;
}

// The 8 (scale, min) pairs of a Q4_K block, 6 bits each, unpacked from 12 bytes:
//   j < 4:  s_j = q[j] & 63,                          m_j = q[j + 4] & 63
//   j >= 4: s_j = q[j + 4] & 15 | (q[j - 4] >> 6) << 4, m_j = q[j + 4] >> 4 | (q[j] >> 6) << 4
struct Q4KScales {
  uint8_t scale[8];  // [8] s_j in [0, 63], sub-block j = values 32j .. 32j + 31
  uint8_t min[8];    // [8] m_j in [0, 63]
};
static_assert(sizeof(Q4KScales) == 16);

// Word-parallel form of the table above (x86 is little-endian): with w0..w2 the 12 bytes as
// little-endian u32,
//   scale[0..3] = w0 & 0x3f..,  scale[4..7] = (w2 & 0x0f..) | ((w0 >> 6) & 0x03..) << 4
//   min[0..3]   = w1 & 0x3f..,  min[4..7]   = ((w2 >> 4) & 0x0f..) | ((w1 >> 6) & 0x03..) << 4
static inline Q4KScales UnpackQ4KScales(const uint8_t* q) {  // q: [12]
  uint32_t w[3];
  std::memcpy(w, q, 12);
  const uint32_t u[4] = {
      w[0] & 0x3f3f3f3fu,
      (w[2] & 0x0f0f0f0fu) | (((w[0] >> 6) & 0x03030303u) << 4),
      w[1] & 0x3f3f3f3fu,
      ((w[2] >> 4) & 0x0f0f0f0fu) | (((w[1] >> 6) & 0x03030303u) << 4),
  };
  Q4KScales s;
  std::memcpy(&s, u, sizeof(s));
  return s;
}

// sum_j m_j * (bsums[2j] + bsums[2j + 1]): the integer that the block's mins contribute,
// scaled later by dmin * d_a. |result| <= 63 * 256 * 127 fits int32.
static inline int32_t Q4KMinDot(const Q4KScales& s, const int16_t* bsums) {  // bsums: [16]
  int32_t sum = 0;
  for (int j = 0; j < 8; ++j) sum += s.min[j] * (bsums[2 * j] + bsums[2 * j + 1]);
  return sum;
}

// The 16 6-bit scales of a Q3_K block minus 32 (s_j - 32 in [-32, 31]) from its 12 bytes:
// low nibble of s_j in q[j % 8] (j < 8: bits 0-3, else 4-7), top 2 bits at q[8 + j % 4] bits
// 2 (j / 4). Word-parallel with w0..w2 the 12 bytes as little-endian u32:
//   s[0..3]   = w0 & 0x0f.. | (w2 & 0x03..) << 4
//   s[4..7]   = w1 & 0x0f.. | (w2 >> 2 & 0x03..) << 4
//   s[8..11]  = w0 >> 4 & 0x0f.. | (w2 >> 4 & 0x03..) << 4
//   s[12..15] = w1 >> 4 & 0x0f.. | (w2 >> 6 & 0x03..) << 4
static inline void UnpackQ3KScales(const uint8_t* q, int8_t* out) {  // q: [12], out: [16]
  uint32_t w[3];
  std::memcpy(w, q, 12);
  const uint32_t u[4] = {
      (w[0] & 0x0f0f0f0fu) | ((w[2] & 0x03030303u) << 4),
      (w[1] & 0x0f0f0f0fu) | (((w[2] >> 2) & 0x03030303u) << 4),
      ((w[0] >> 4) & 0x0f0f0f0fu) | (((w[2] >> 4) & 0x03030303u) << 4),
      ((w[1] >> 4) & 0x0f0f0f0fu) | (((w[2] >> 6) & 0x03030303u) << 4),
  };
  uint8_t s[16];
  std::memcpy(s, u, 16);
  for (int j = 0; j < 16; ++j) out[j] = static_cast<int8_t>(s[j] - 32);
}

// IEEE half -> float, exact for every input (normals, subnormals, inf, NaN).
static inline float HalfToFloat(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000) << 16;
  const uint32_t exp = (h >> 10) & 0x1F;
  const uint32_t mant = h & 0x3FF;
  uint32_t bits;
  if (exp == 0x1F) {
    bits = sign | 0x7F800000u | (mant << 13);
  } else if (exp != 0) {
    bits = sign | ((exp + 112) << 23) | (mant << 13);  // rebias 15 -> 127
  } else if (mant == 0) {
    bits = sign;
  } else {
    // Subnormal: value = mant * 2^-24, exactly representable as a float.
    float v = static_cast<float>(mant) * (1.0f / 16777216.0f);
    std::memcpy(&bits, &v, 4);
    bits |= sign;
  }
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

}  // namespace moesplit::gemv::internal
