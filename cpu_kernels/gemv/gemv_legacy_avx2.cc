// AVX2 + FMA tier of the legacy-block kernels: Q4_0 / Q4_1 / Q5_0 / Q5_1 / IQ4_NL / MXFP4 dots and
// the Q8_0 / Q4_0 / Q4_1 / Q5_0 / Q5_1 / IQ4_NL / MXFP4 gemm tiles, all against Q8_0 activations.
// Compiled with MOESPLIT_FLAGS_AVX2 (gemv/legacy.cmake); reached only through
// KernelsFor(IsaTier::kAvx2).
//
// Integer scheme (maddubs needs one unsigned operand, pairs must fit i16):
//   Q4_0 / Q5_0: the raw quants u in [0, 15] / [0, 31] are the unsigned operand, and the offset
//     (8 / 16) comes off as off * sum(a):  sum_j (u_j - off) a_j = sum_j u_j a_j - off * sum_j a_j,
//     both as i16 pair sums (|pair| <= 2 * 31 * 127) before the one madd to i32.
//   Q8_0: the sign trick, |w| * (a with w's sign) (a in [-127, 127], |w| <= 128).
#include <immintrin.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "cpu_kernels/gemv/gemv_internal.h"
#include "cpu_kernels/gemv/gemv_isa_common.h"
#include "cpu_kernels/quant/blocks.h"
#include "cpu_kernels/quant/blocks_iq.h"
#include "cpu_kernels/quant/repack.h"

namespace moesplit::gemv::internal {
namespace {

using quant::BlockQ4_0;
using quant::BlockQ5_0;
using quant::BlockQ8_0;
using quant::kQk;

constexpr size_t kActBytes = sizeof(BlockQ8_0);  // 34: f16 d, then [32] i8

[[gnu::always_inline]] inline float HorizontalSum(__m256 v) {  // v: [8] f32
  const __m128 s4 = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  const __m128 s2 = _mm_add_ps(s4, _mm_movehl_ps(s4, s4));
  return _mm_cvtss_f32(_mm_add_ss(s2, _mm_movehdup_ps(s2)));
}

// The f16 at p (2-byte aligned) as f32.
[[gnu::always_inline]] inline float LoadHalf(const uint8_t* p) {
  uint16_t h;
  std::memcpy(&h, p, 2);
  return _cvtsh_ss(h);
}

[[gnu::always_inline]] inline __m256i Load256(const void* p) {
  return _mm256_loadu_si256(static_cast<const __m256i*>(p));
}

// [32] u8 in value order from a Q4_0/Q5_0 nibble array qs: [16]: byte j of qs holds value j (low
// nibble) and j + 16 (high nibble).
[[gnu::always_inline]] inline __m256i UnpackNibbles(const uint8_t* qs) {
  const __m128i x = _mm_loadu_si128(reinterpret_cast<const __m128i*>(qs));
  const __m256i xx = _mm256_set_m128i(_mm_srli_epi16(x, 4), x);
  return _mm256_and_si256(xx, _mm256_set1_epi8(0x0F));
}

// [32] u8: 0x10 at byte j where bit j of the little-endian u32 at qh is set, else 0.
// Byte j first gets byte j / 8 of qh (shuffle), then keeps bit j % 8 (and + cmpeq).
[[gnu::always_inline]] inline __m256i HighBitsQ5(const uint8_t* qh) {
  uint32_t x;
  std::memcpy(&x, qh, 4);
  const __m256i spread = _mm256_set_epi64x(0x0303030303030303, 0x0202020202020202,
                                           0x0101010101010101, 0x0000000000000000);
  const __m256i bytes = _mm256_shuffle_epi8(_mm256_set1_epi32(static_cast<int>(x)), spread);
  const __m256i bit = _mm256_set1_epi64x(static_cast<int64_t>(0x8040201008040201));
  const __m256i set = _mm256_cmpeq_epi8(_mm256_and_si256(bytes, bit), bit);
  return _mm256_and_si256(set, _mm256_set1_epi8(0x10));
}

// The per-type parts of the kernels. Each kind has:
//   W          one unpacked weight block (32 values)
//   Unpack(p)  p: the block's bytes
//   Act        one activation block's quants and whatever the dot needs from them alone
//   MakeAct(a) a: [32] i8 quants
//   Dot(w, a)  [8] i32 whose sum is the block's integer dot sum_j q_j a_j (q the signed value)
template <int kOff>
struct OffsetAct {
  __m256i a;     // [32] i8
  __m256i corr;  // [16] i16: off * (a_2k + a_2k+1), the offset's share of each maddubs pair
};

template <int kOff>
[[gnu::always_inline]] inline OffsetAct<kOff> MakeOffsetAct(__m256i a) {
  return {a, _mm256_maddubs_epi16(_mm256_set1_epi8(kOff), a)};
}

// sum_j (u_j - off) a_j as [8] i32: maddubs pairs minus the offset pairs, then madd to i32.
// |pair| <= 2 * 31 * 127 + 2 * 16 * 127 < 2^15.
template <int kOff>
[[gnu::always_inline]] inline __m256i OffsetDot(__m256i u, const OffsetAct<kOff>& act) {
  const __m256i p16 = _mm256_sub_epi16(_mm256_maddubs_epi16(u, act.a), act.corr);
  return _mm256_madd_epi16(p16, _mm256_set1_epi16(1));
}

struct KindQ4_0 {
  static constexpr size_t kBytes = sizeof(BlockQ4_0);
  // The wide path (gemv_legacy_wide_avx2.inc): u8 quants WideU = q + kWideOff <= kWideMaxU.
  static constexpr int kWideOff = 8, kWideMaxU = 15;
  [[gnu::always_inline]] static __m256i WideU(const uint8_t* p) { return Unpack(p); }
  using W = __m256i;  // [32] u8 in [0, 15]
  using Act = OffsetAct<8>;
  [[gnu::always_inline]] static W Unpack(const uint8_t* p) {
    return UnpackNibbles(p + offsetof(BlockQ4_0, qs));
  }
  [[gnu::always_inline]] static Act MakeAct(__m256i a) { return MakeOffsetAct<8>(a); }
  [[gnu::always_inline]] static __m256i Dot(W w, const Act& a) { return OffsetDot<8>(w, a); }
};

struct KindQ5_0 {
  static constexpr size_t kBytes = sizeof(BlockQ5_0);
  static constexpr int kWideOff = 16, kWideMaxU = 31;
  [[gnu::always_inline]] static __m256i WideU(const uint8_t* p) { return Unpack(p); }
  using W = __m256i;  // [32] u8 in [0, 31]
  using Act = OffsetAct<16>;
  [[gnu::always_inline]] static W Unpack(const uint8_t* p) {
    return _mm256_or_si256(UnpackNibbles(p + offsetof(BlockQ5_0, qs)),
                           HighBitsQ5(p + offsetof(BlockQ5_0, qh)));
  }
  [[gnu::always_inline]] static Act MakeAct(__m256i a) { return MakeOffsetAct<16>(a); }
  [[gnu::always_inline]] static __m256i Dot(W w, const Act& a) { return OffsetDot<16>(w, a); }
};

// Q4_1 / Q5_1 (d u + m, u in [0, 15] / [0, 31]): Dot is sum u a (maddubs pairs <= 2 * 31 *
// 127, then madd); the tiles add m * d_a * sum a, sum a ([8] i32 partial sums) made once per
// activation block. The two blocks put d and m first (offsets 0 and 2), then Q5_1's qh.
template <class Block>
struct KindWithMin {
  static constexpr bool kQ5 = std::is_same_v<Block, quant::BlockQ5_1>;
  static constexpr size_t kBytes = sizeof(Block);
  static constexpr bool kMin = true;
  static constexpr int kWideOff = 0, kWideMaxU = kQ5 ? 31 : 15;
  [[gnu::always_inline]] static __m256i WideU(const uint8_t* p) { return Unpack(p); }
  using W = __m256i;  // [32] u8 in [0, kWideMaxU]
  struct Act {
    __m256i a;    // [32] i8
    __m256i sum;  // [8] i32 whose sum is sum a
  };
  [[gnu::always_inline]] static W Unpack(const uint8_t* p) {
    const __m256i u = UnpackNibbles(p + offsetof(Block, qs));
    if constexpr (kQ5) {
      return _mm256_or_si256(u, HighBitsQ5(p + offsetof(quant::BlockQ5_1, qh)));
    } else {
      return u;
    }
  }
  [[gnu::always_inline]] static Act MakeAct(__m256i a) {
    const __m256i pairs = _mm256_maddubs_epi16(_mm256_set1_epi8(1), a);
    return {a, _mm256_madd_epi16(pairs, _mm256_set1_epi16(1))};
  }
  [[gnu::always_inline]] static __m256i Dot(W w, const Act& a) {
    return _mm256_madd_epi16(_mm256_maddubs_epi16(w, a.a), _mm256_set1_epi16(1));
  }
};
using KindQ5_1 = KindWithMin<quant::BlockQ5_1>;
using KindQ4_1 = KindWithMin<quant::BlockQ4_1>;
static_assert(offsetof(quant::BlockQ4_1, m) == 2 && offsetof(quant::BlockQ5_1, m) == 2);

struct KindQ8_0 {
  static constexpr size_t kBytes = sizeof(BlockQ8_0);
  struct W {
    __m256i q;    // [32] i8 in [-128, 127]
    __m256i abs;  // [32] u8 |q|
  };
  using Act = __m256i;  // [32] i8 in [-127, 127]
  [[gnu::always_inline]] static W Unpack(const uint8_t* p) {
    const __m256i q = Load256(p + offsetof(BlockQ8_0, qs));
    return {q, _mm256_abs_epi8(q)};
  }
  [[gnu::always_inline]] static Act MakeAct(__m256i a) { return a; }
  // |pair| <= 2 * 128 * 127 < 2^15.
  [[gnu::always_inline]] static __m256i Dot(const W& w, Act a) {
    const __m256i p16 = _mm256_maddubs_epi16(w.abs, _mm256_sign_epi8(a, w.q));
    return _mm256_madd_epi16(p16, _mm256_set1_epi16(1));
  }
};

// IQ4_NL: the nibbles index kIq4Values; one vpshufb (16-entry table per 128-bit lane) turns
// them into the signed values, which then take Q8_0's sign trick (|q| <= 127).
struct KindIQ4NL : KindQ8_0 {
  static constexpr size_t kBytes = sizeof(quant::BlockIQ4_NL);
  [[gnu::always_inline]] static W Unpack(const uint8_t* p) {
    const __m256i table = _mm256_broadcastsi128_si256(
        _mm_loadu_si128(reinterpret_cast<const __m128i*>(quant::kIq4Values)));
    const __m256i q = _mm256_shuffle_epi8(table, UnpackNibbles(p + 2));
    return {q, _mm256_abs_epi8(q)};
  }
};

// MXFP4: the nibbles (at byte 1, after the E8M0 exponent) index the doubled E2M1 levels
// kMxfp4Values (|q| <= 12), then Q8_0's sign trick; the block scale is Mxfp4HalfScale(e).
struct KindMXFP4 : KindQ8_0 {
  static constexpr size_t kBytes = sizeof(quant::BlockMXFP4);
  static constexpr bool kE8M0 = true;
  static constexpr int kWideOff = 12, kWideMaxU = 24;  // u = q + 12, |q| <= 12
  [[gnu::always_inline]] static __m256i WideU(const uint8_t* p) {
    return _mm256_add_epi8(Unpack(p).q, _mm256_set1_epi8(kWideOff));
  }
  [[gnu::always_inline]] static W Unpack(const uint8_t* p) {
    const __m256i table = _mm256_broadcastsi128_si256(
        _mm_loadu_si128(reinterpret_cast<const __m128i*>(quant::kMxfp4Values)));
    const __m256i q =
        _mm256_shuffle_epi8(table, UnpackNibbles(p + offsetof(quant::BlockMXFP4, qs)));
    return {q, _mm256_abs_epi8(q)};
  }
};

// The weight block's f32 scale: an E8M0 exponent (MXFP4) or the f16 d at its start.
template <class K>
[[gnu::always_inline]] inline float WeightScale(const uint8_t* p) {
  if constexpr (requires { K::kE8M0; }) {
    return quant::Mxfp4HalfScale(p[0]);
  } else {
    return LoadHalf(p);
  }
}

// acc + d_w * d_a * Dot of the weight block at w and the activation block at a.
template <class K>
[[gnu::always_inline]] inline __m256 DotBlock(const uint8_t* w, const uint8_t* a, __m256 acc) {
  const __m256i isum = K::Dot(K::Unpack(w), K::MakeAct(Load256(a + 2)));
  const __m256 d = _mm256_set1_ps(WeightScale<K>(w) * LoadHalf(a));
  return _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(isum), acc);
}

// One row's dot, two blocks per step (two FMA chains).
template <class K>
float DotImpl(const void* w_row, const void* a_row, int64_t n) {
  const auto* w = static_cast<const uint8_t*>(w_row);  // [n / 32 blocks]
  const auto* a = static_cast<const uint8_t*>(a_row);  // [n / 32 blocks of 34 B]
  const int64_t nb = n / kQk;
  __m256 acc0 = _mm256_setzero_ps();  // [8] f32: even blocks
  __m256 acc1 = _mm256_setzero_ps();  // [8] f32: odd blocks
  int64_t b = 0;
  for (; b + 1 < nb; b += 2) {
    acc0 = DotBlock<K>(w + b * K::kBytes, a + b * kActBytes, acc0);
    acc1 = DotBlock<K>(w + (b + 1) * K::kBytes, a + (b + 1) * kActBytes, acc1);
  }
  if (b < nb) acc0 = DotBlock<K>(w + b * K::kBytes, a + b * kActBytes, acc0);
  return HorizontalSum(_mm256_add_ps(acc0, acc1));
}

#include "cpu_kernels/gemv/gemv_legacy_rows.inc"
#include "cpu_kernels/gemv/gemv_legacy_wide_avx2.inc"
// After the wide path: these use its helpers (avx2_wide, legacy_wide::SetBlock).
#include "cpu_kernels/gemv/gemv_iq4nl_r16_avx2.inc"
#include "cpu_kernels/gemv/gemv_legacy_r16_avx2.inc"

// kR rows x kT tokens: each weight block is unpacked once and used for kT tokens, each activation
// block once for kR rows. Per (row, token, block): y += d_w * d_a * Dot (Q5_1: + m_w * d_a * sum
// a), the float scales applied per block. Not inlined: each tile shape gets its own register
// allocation.
template <class K, int kR, int kT>
[[gnu::noinline]] void Tile(const TileRows<kR>& tr, const uint8_t* a, size_t a_stride, int64_t nb,
                            float* y, int64_t ldy) {
  __m256 acc[kR][kT];  // [kR][kT] of [8] f32 partial sums
  for (int r = 0; r < kR; ++r) {
    for (int t = 0; t < kT; ++t) acc[r][t] = _mm256_setzero_ps();
  }
  const int64_t row_bytes = nb * static_cast<int64_t>(K::kBytes);
  if (tr.first) PrefetchStart(tr, row_bytes);
  for (int64_t b = 0, off = 0, ao = 0; b < nb; ++b, off += K::kBytes, ao += kActBytes) {
    if (b % PrefetchEvery(K::kBytes) == 0) PrefetchAhead(tr, off);
    constexpr bool kMin = requires { K::kMin; };
    typename K::W w[kR];
    __m256 dw[kR], mw[kR];  // [kR] broadcast weight scales (and Q5_1's mins)
    for (int r = 0; r < kR; ++r) {
      w[r] = K::Unpack(tr.rows[r] + off);
      dw[r] = _mm256_set1_ps(WeightScale<K>(tr.rows[r] + off));
      if constexpr (kMin) mw[r] = _mm256_set1_ps(LoadHalf(tr.rows[r] + off + 2));
    }
    for (int t = 0; t < kT; ++t) {
      const uint8_t* ab = a + t * a_stride + ao;
      const typename K::Act act = K::MakeAct(Load256(ab + 2));
      const __m256 da = _mm256_set1_ps(LoadHalf(ab));
      for (int r = 0; r < kR; ++r) {
        const __m256 isum = _mm256_cvtepi32_ps(K::Dot(w[r], act));
        acc[r][t] = _mm256_fmadd_ps(_mm256_mul_ps(dw[r], da), isum, acc[r][t]);
        if constexpr (kMin) {
          acc[r][t] =
              _mm256_fmadd_ps(_mm256_mul_ps(mw[r], da), _mm256_cvtepi32_ps(act.sum), acc[r][t]);
        }
      }
    }
  }
  for (int t = 0; t < kT; ++t) {
    for (int r = 0; r < tr.valid; ++r) y[t * ldy + r] = HorizontalSum(acc[r][t]);
  }
}

// The prefill tiles of 2 rows x kT tokens, indexed by kT - 1.
using PrefillTileFn = void (*)(const TileRows<2>&, const uint8_t*, size_t, int64_t, float*,
                               int64_t);
template <class K>
constexpr PrefillTileFn kPrefillTiles[4] = {Tile<K, 2, 1>, Tile<K, 2, 2>, Tile<K, 2, 3>,
                                            Tile<K, 2, 4>};

// Decode (n_tok == 1): 4 rows at a time, four weight streams in flight. Prefill: the wide path
// from legacy_wide::kMinTokens tokens (the kinds with kWideMaxU), else 2 rows x up to 4 tokens
// (8 accumulators + the unpacked blocks fit the 16 ymm registers).
template <class K>
void GemmImpl(const void* w, size_t w_stride, int64_t n_rows, const void* a, size_t a_stride,
              int64_t n_tok, int64_t n, float* y, int64_t ldy) {
  const auto* wb = static_cast<const uint8_t*>(w);
  const auto* ab = static_cast<const uint8_t*>(a);
  const int64_t nb = n / kQk;
  if constexpr (requires { K::kWideMaxU; }) {
    // A last token block under kMinTokens (65 = 64 + 1) is left to the tiles below.
    const int64_t n_wide =
        avx2_wide::WideTokens(n_tok, legacy_wide::kMinTokens, legacy_wide::kTokBlock);
    if (n_wide > 0) {
      legacy_wide::WideGemm<K>(w, w_stride, n_rows, a, a_stride, n_wide, n, y, ldy);
      if (n_wide == n_tok) return;
      GemmImpl<K>(w, w_stride, n_rows, ab + n_wide * a_stride, a_stride, n_tok - n_wide, n,
                  y + n_wide * ldy, ldy);
      return;
    }
  }
  if (n_tok == 1) {
    for (int64_t r0 = 0; r0 < n_rows; r0 += 4) {
      Tile<K, 4, 1>(MakeTileRows<4>(wb, w_stride, n_rows, r0), ab, a_stride, nb, y + r0, ldy);
    }
    return;
  }
  for (int64_t r0 = 0; r0 < n_rows; r0 += 2) {
    const TileRows<2> tr = MakeTileRows<2>(wb, w_stride, n_rows, r0);
    for (int64_t t0 = 0; t0 < n_tok; t0 += 4) {
      const uint8_t* at = ab + t0 * a_stride;
      float* yt = y + t0 * ldy + r0;
      kPrefillTiles<K>[(n_tok - t0 < 4 ? n_tok - t0 : 4) - 1](tr, at, a_stride, nb, yt, ldy);
    }
  }
}

}  // namespace

float DotMXFP4_Q8_0_Avx2(const void* w_row, const void* a_row, int64_t n) {
  return DotImpl<KindMXFP4>(w_row, a_row, n);
}

void GemmMXFP4_Q8_0_Avx2(const void* w, size_t w_stride, int64_t n_rows, const void* a,
                         size_t a_stride, int64_t n_tok, int64_t n, float* y, int64_t ldy) {
  GemmImpl<KindMXFP4>(w, w_stride, n_rows, a, a_stride, n_tok, n, y, ldy);
}

float DotIQ4NL_Q8_0_Avx2(const void* w_row, const void* a_row, int64_t n) {
  return DotImpl<KindIQ4NL>(w_row, a_row, n);
}

void GemmIQ4NL_Q8_0_Avx2(const void* w, size_t w_stride, int64_t n_rows, const void* a,
                         size_t a_stride, int64_t n_tok, int64_t n, float* y, int64_t ldy) {
  GemmImpl<KindIQ4NL>(w, w_stride, n_rows, a, a_stride, n_tok, n, y, ldy);
}

float DotQ4_0_Q8_0_Avx2(const void* w_row, const void* a_row, int64_t n) {
  return DotImpl<KindQ4_0>(w_row, a_row, n);
}

// Q4_1 / Q5_1 (d * u + m): per block the two integers of the scalar dot, sum u a (maddubs pairs
// <= 2 * 31 * 127, then madd) and sum a (maddubs of ones), each times its own scale (d d_a, m
// d_a) into one accumulator (the dot of rows the tiles leave; GemmImpl<KindWithMin> runs the
// tiles).
namespace {
template <class K>
float DotWithMinImpl(const void* w_row, const void* a_row, int64_t n) {
  const auto* w = static_cast<const uint8_t*>(w_row);  // [n / 32] blocks (20 / 24 B)
  const auto* a = static_cast<const uint8_t*>(a_row);  // [n / 32] BlockQ8_0 (34 B)
  __m256 acc = _mm256_setzero_ps();
  for (int64_t b = 0; b < n / kQk; ++b, w += K::kBytes, a += kActBytes) {
    const typename K::Act act = K::MakeAct(Load256(a + 2));
    const __m256i ua = K::Dot(K::Unpack(w), act);  // [8] i32
    const float da = LoadHalf(a);
    acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(ua), _mm256_set1_ps(LoadHalf(w) * da), acc);
    acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(act.sum), _mm256_set1_ps(LoadHalf(w + 2) * da), acc);
  }
  return HorizontalSum(acc);
}

}  // namespace

float DotQ5_1_Q8_0_Avx2(const void* w_row, const void* a_row, int64_t n) {
  return DotWithMinImpl<KindQ5_1>(w_row, a_row, n);
}

void GemmQ5_1_Q8_0_Avx2(const void* w, size_t w_stride, int64_t n_rows, const void* a,
                        size_t a_stride, int64_t n_tok, int64_t n, float* y, int64_t ldy) {
  GemmImpl<KindQ5_1>(w, w_stride, n_rows, a, a_stride, n_tok, n, y, ldy);
}

float DotQ4_1_Q8_0_Avx2(const void* w_row, const void* a_row, int64_t n) {
  return DotWithMinImpl<KindQ4_1>(w_row, a_row, n);
}

void GemmQ4_1_Q8_0_Avx2(const void* w, size_t w_stride, int64_t n_rows, const void* a,
                        size_t a_stride, int64_t n_tok, int64_t n, float* y, int64_t ldy) {
  GemmImpl<KindQ4_1>(w, w_stride, n_rows, a, a_stride, n_tok, n, y, ldy);
}

float DotQ5_0_Q8_0_Avx2(const void* w_row, const void* a_row, int64_t n) {
  return DotImpl<KindQ5_0>(w_row, a_row, n);
}

void GemmQ8_0_Q8_0_Avx2(const void* w, size_t w_stride, int64_t n_rows, const void* a,
                        size_t a_stride, int64_t n_tok, int64_t n, float* y, int64_t ldy) {
  GemmImpl<KindQ8_0>(w, w_stride, n_rows, a, a_stride, n_tok, n, y, ldy);
}

// One or two tokens on the groups as they stand, the wide path (decoding a block once per 64
// tokens) from 3.
template <class K>
void R16LegacyDispatch(const void* w, size_t w_stride, int64_t n_rows, const void* a,
                       size_t a_stride, int64_t n_tok, int64_t n, float* y, int64_t ldy) {
  const auto* wb = static_cast<const uint8_t*>(w);
  const auto* ab = static_cast<const uint8_t*>(a);
  if (n_tok == 1) {
    R16LegacyGemm<K, 1>(wb, w_stride, n_rows, ab, a_stride, n, y, ldy);
  } else if (n_tok == 2) {
    R16LegacyGemm<K, 2>(wb, w_stride, n_rows, ab, a_stride, n, y, ldy);
  } else {
    legacy_wide::WideGemm<K>(w, w_stride, n_rows, a, a_stride, n_tok, n, y, ldy);
  }
}

void GemmQ4_0R16_Q8_0_Avx2(const void* w, size_t w_stride, int64_t n_rows, const void* a,
                           size_t a_stride, int64_t n_tok, int64_t n, float* y, int64_t ldy) {
  R16LegacyDispatch<KindQ4_0R16>(w, w_stride, n_rows, a, a_stride, n_tok, n, y, ldy);
}
void GemmQ5_0R16_Q8_0_Avx2(const void* w, size_t w_stride, int64_t n_rows, const void* a,
                           size_t a_stride, int64_t n_tok, int64_t n, float* y, int64_t ldy) {
  R16LegacyDispatch<KindQ5_0R16>(w, w_stride, n_rows, a, a_stride, n_tok, n, y, ldy);
}

void GemmQ4_1R16_Q8_0_Avx2(const void* w, size_t w_stride, int64_t n_rows, const void* a,
                           size_t a_stride, int64_t n_tok, int64_t n, float* y, int64_t ldy) {
  R16LegacyDispatch<KindQ4_1R16>(w, w_stride, n_rows, a, a_stride, n_tok, n, y, ldy);
}
void GemmQ5_1R16_Q8_0_Avx2(const void* w, size_t w_stride, int64_t n_rows, const void* a,
                           size_t a_stride, int64_t n_tok, int64_t n, float* y, int64_t ldy) {
  R16LegacyDispatch<KindQ5_1R16>(w, w_stride, n_rows, a, a_stride, n_tok, n, y, ldy);
}

void GemmIQ4NLR16_Q8_0_Avx2(const void* w, size_t w_stride, int64_t n_rows, const void* a,
                            size_t a_stride, int64_t n_tok, int64_t n, float* y, int64_t ldy) {
  const auto* wb = static_cast<const uint8_t*>(w);
  const auto* ab = static_cast<const uint8_t*>(a);
  int64_t t = 0;
  for (; t + 2 <= n_tok; t += 2) {
    IQ4NLR16Gemm<2>(wb, w_stride, n_rows, ab + t * a_stride, a_stride, n, y + t * ldy, ldy);
  }
  if (t < n_tok)
    IQ4NLR16Gemm<1>(wb, w_stride, n_rows, ab + t * a_stride, a_stride, n, y + t * ldy, ldy);
}

void GemmQ4_0_Q8_0_Avx2(const void* w, size_t w_stride, int64_t n_rows, const void* a,
                        size_t a_stride, int64_t n_tok, int64_t n, float* y, int64_t ldy) {
  GemmImpl<KindQ4_0>(w, w_stride, n_rows, a, a_stride, n_tok, n, y, ldy);
}

void GemmQ5_0_Q8_0_Avx2(const void* w, size_t w_stride, int64_t n_rows, const void* a,
                        size_t a_stride, int64_t n_tok, int64_t n, float* y, int64_t ldy) {
  GemmImpl<KindQ5_0>(w, w_stride, n_rows, a, a_stride, n_tok, n, y, ldy);
}

}  // namespace moesplit::gemv::internal
