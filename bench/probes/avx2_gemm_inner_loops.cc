// Not built by CMake: a one-off probe of two inner loops for the AVX2 wide prefill path
// (cpu_kernels/gemv/gemv_avx2_wide.inc), on L1-resident data, whose figures docs/PERFORMANCE.md
// quotes ("The AVX2 wide prefill path ..."). Both multiply 16 rows (two row sets of 8, one i32
// lane per row) by 4 tokens:
//   i16:     8 rows x 2 i16 weights per ymm (scales folded in), the token's i16 pair broadcast,
//            vpmaddwd + vpaddd per 16 MACs;
//   maddubs: 8 rows x 4 u8 quants per ymm, the token's 4 i8 broadcast, two quads' vpmaddubsw
//            pairs added in i16, then one vpmaddwd (by the group scales) + vpaddd per 64 MACs.
// Prints GMAC/s per core (higher = better).
//   g++ -O2 -mavx2 -mfma -std=c++20 bench/probes/avx2_gemm_inner_loops.cc -o /tmp/loops
//   /tmp/loops
#include <immintrin.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>

namespace {

alignas(64) int16_t w16[2][128][16];    // [set][k pair][8 rows x 2]
alignas(64) int16_t a16[4][256];        // [token][value]
alignas(64) uint8_t w8[2][64][32];      // [set][quad][8 rows x 4]
alignas(64) int8_t a8[4][256];          // [token][value]
alignas(64) int16_t scales[2][16][16];  // [set][group][8 rows x 2]

__m256i Broadcast4(const void* p) {
  int32_t v;
  std::memcpy(&v, p, sizeof(v));
  return _mm256_set1_epi32(v);
}

// One 256-value block, 16 rows x 4 tokens, the i16 form: 16,384 MACs.
[[gnu::noinline]] __m256i LoopI16(long reps) {
  __m256i acc[2][4];
  for (auto& s : acc)
    for (auto& t : s) t = _mm256_setzero_si256();
  for (long r = 0; r < reps; ++r) {
    for (int q = 0; q < 128; ++q) {
      const __m256i w0 = _mm256_load_si256(reinterpret_cast<const __m256i*>(w16[0][q]));
      const __m256i w1 = _mm256_load_si256(reinterpret_cast<const __m256i*>(w16[1][q]));
#pragma GCC unroll 4
      for (int t = 0; t < 4; ++t) {
        const __m256i a = Broadcast4(a16[t] + 2 * q);
        acc[0][t] = _mm256_add_epi32(acc[0][t], _mm256_madd_epi16(w0, a));
        acc[1][t] = _mm256_add_epi32(acc[1][t], _mm256_madd_epi16(w1, a));
      }
    }
  }
  __m256i x = acc[0][0];
  for (int t = 1; t < 4; ++t) x = _mm256_xor_si256(x, _mm256_xor_si256(acc[0][t], acc[1][t]));
  return x;
}

// The same block in the maddubs form: 16,384 MACs.
[[gnu::noinline]] __m256i LoopMaddubs(long reps) {
  __m256i acc[2][4];
  for (auto& s : acc)
    for (auto& t : s) t = _mm256_setzero_si256();
  for (long r = 0; r < reps; ++r) {
    for (int j = 0; j < 64; j += 2) {
      const __m256i ua0 = _mm256_load_si256(reinterpret_cast<const __m256i*>(w8[0][j]));
      const __m256i ub0 = _mm256_load_si256(reinterpret_cast<const __m256i*>(w8[0][j + 1]));
      const __m256i ua1 = _mm256_load_si256(reinterpret_cast<const __m256i*>(w8[1][j]));
      const __m256i ub1 = _mm256_load_si256(reinterpret_cast<const __m256i*>(w8[1][j + 1]));
      const __m256i s0 = _mm256_load_si256(reinterpret_cast<const __m256i*>(scales[0][j / 4]));
      const __m256i s1 = _mm256_load_si256(reinterpret_cast<const __m256i*>(scales[1][j / 4]));
#pragma GCC unroll 4
      for (int t = 0; t < 4; ++t) {
        const __m256i aa = Broadcast4(a8[t] + 4 * j), ab = Broadcast4(a8[t] + 4 * j + 4);
        const __m256i p0 =
            _mm256_add_epi16(_mm256_maddubs_epi16(ua0, aa), _mm256_maddubs_epi16(ub0, ab));
        const __m256i p1 =
            _mm256_add_epi16(_mm256_maddubs_epi16(ua1, aa), _mm256_maddubs_epi16(ub1, ab));
        acc[0][t] = _mm256_add_epi32(acc[0][t], _mm256_madd_epi16(p0, s0));
        acc[1][t] = _mm256_add_epi32(acc[1][t], _mm256_madd_epi16(p1, s1));
      }
    }
  }
  __m256i x = acc[0][0];
  for (int t = 1; t < 4; ++t) x = _mm256_xor_si256(x, _mm256_xor_si256(acc[0][t], acc[1][t]));
  return x;
}

template <class F>
void Run(const char* name, F f) {
  constexpr long kReps = 200000;
  constexpr double kMacsPerRep = 16.0 * 256 * 4;
  for (int round = 0; round < 3; ++round) {
    const auto t0 = std::chrono::steady_clock::now();
    const __m256i sink = f(kReps);
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::printf("%-8s %6.1f GMAC/s  (sink %d)\n", name, kMacsPerRep * kReps / s * 1e-9,
                _mm256_extract_epi32(sink, 0) & 1);
  }
}

}  // namespace

int main() {
  for (int i = 0; i < 256; ++i) {
    for (int t = 0; t < 4; ++t) {
      a16[t][i] = static_cast<int16_t>((i * 7 + t) % 255 - 127);
      a8[t][i] = static_cast<int8_t>((i * 7 + t) % 255 - 127);
    }
  }
  std::memset(w16, 3, sizeof(w16));
  std::memset(w8, 3, sizeof(w8));
  std::memset(scales, 1, sizeof(scales));
  Run("i16", LoopI16);
  Run("maddubs", LoopMaddubs);
  return 0;
}
