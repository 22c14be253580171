// Not built by CMake: a one-off probe of 256-bit (AVX2) instruction throughput on the build
// machine, whose figures docs/PERFORMANCE.md quotes ("The AVX2 tier on Zen 3 ..."). Eight
// independent chains of one instruction each, 20 M iterations; prints ns per instruction (lower =
// more per cycle). An instruction with latency L and throughput P per cycle reads
// max(L / 8, 1 / P) cycles: 8 chains hide a latency of up to 8 / P cycles.
//   g++ -O2 -march=native -std=c++20 bench/probes/instruction_throughput_avx2.cc -o /tmp/probe2
//   /tmp/probe2
// Needs AVX2 + FMA (Haswell, Zen 1 and later).
#include <immintrin.h>

#include <chrono>
#include <cstdio>

namespace {

// ns per application of f over 8 independent chains.
template <typename F>
void Run(const char* name, F f) {
  __m256i r[8];
  for (int i = 0; i < 8; ++i) r[i] = _mm256_set1_epi32(i + 1);
  const __m256i t = _mm256_set1_epi8(3);
  constexpr long kIters = 20000000;
  const auto t0 = std::chrono::steady_clock::now();
  for (long k = 0; k < kIters; ++k) {
#pragma GCC unroll 8
    for (int i = 0; i < 8; ++i) r[i] = f(r[i], t);
  }
  const auto t1 = std::chrono::steady_clock::now();
  __m256i s = r[0];
  for (int i = 1; i < 8; ++i) s = _mm256_xor_si256(s, r[i]);  // keeps the chains live
  const double ns = std::chrono::duration<double, std::nano>(t1 - t0).count() / (kIters * 8.0);
  std::printf("%-12s %.3f ns/op  (sink %d)\n", name, ns, _mm256_extract_epi32(s, 0) & 1);
}

}  // namespace

int main() {
  Run("vpshufb", [](__m256i a, __m256i t) { return _mm256_shuffle_epi8(t, a); });
  Run("vpsrlw", [](__m256i a, __m256i) { return _mm256_srli_epi16(a, 1); });
  Run("vpmaddubsw", [](__m256i a, __m256i t) { return _mm256_maddubs_epi16(t, a); });
  Run("vpmaddwd", [](__m256i a, __m256i t) { return _mm256_madd_epi16(t, a); });
  Run("vpsignb", [](__m256i a, __m256i t) { return _mm256_sign_epi8(a, t); });
  Run("vpabsb", [](__m256i a, __m256i) { return _mm256_abs_epi8(a); });
  Run("vfmadd231ps", [](__m256i a, __m256i t) {
    const __m256 x = _mm256_castsi256_ps(a), y = _mm256_castsi256_ps(t);
    return _mm256_castps_si256(_mm256_fmadd_ps(x, y, y));
  });
}
