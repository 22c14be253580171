// Not built by CMake: a one-off probe of 512-bit instruction throughput on the build machine,
// whose figures docs/PERFORMANCE.md quotes ("Why IQ2_XXS decode stays short of 0.85 ...").
// Eight independent chains of one instruction each, 20 M iterations; prints ns per instruction
// (lower = more per cycle; a dependent pair shows the latency of the chain instead).
//   g++ -O2 -march=native -std=c++20 bench/probes/instruction_throughput.cc -o /tmp/probe
//   /tmp/probe
// Needs AVX-512 VNNI, VBMI and GFNI (Ice Lake, Zen 4 and later).
#include <immintrin.h>

#include <chrono>
#include <cstdint>
#include <cstdio>

namespace {

// ns per application of f over 8 independent chains.
template <typename F>
void Run(const char* name, F f) {
  __m512i r[8];
  for (int i = 0; i < 8; ++i) r[i] = _mm512_set1_epi32(i + 1);
  const __m512i t = _mm512_set1_epi8(3), u = _mm512_set1_epi8(5);
  constexpr long kIters = 20000000;
  const auto t0 = std::chrono::steady_clock::now();
  for (long k = 0; k < kIters; ++k) {
#pragma GCC unroll 8
    for (int i = 0; i < 8; ++i) r[i] = f(r[i], t, u);
  }
  const auto t1 = std::chrono::steady_clock::now();
  __m512i s = r[0];
  for (int i = 1; i < 8; ++i) s = _mm512_xor_si512(s, r[i]);  // keeps the chains live
  const double ns = std::chrono::duration<double, std::nano>(t1 - t0).count() / (kIters * 8.0);
  std::printf("%-14s %.3f ns/op  (sink %d)\n", name, ns, _mm512_reduce_add_epi32(s) & 1);
}

// The same with the iteration number passed on (k + i: a varying index, e.g. into a mask table).
template <typename F>
void RunIndexed(const char* name, F f) {
  long k = 0;
  Run(name, [&k, f](__m512i a, __m512i t, __m512i u) { return f(a, t, u, k++); });
}

// 64-bit masks read from memory (volatile: a load per use, as a kernel's stored sign masks).
volatile uint64_t g_masks[64];

}  // namespace

int main() {
  for (int i = 0; i < 64; ++i) g_masks[i] = 0x0123456789ABCDEFull * static_cast<uint64_t>(i + 1);
  Run("vpaddd", [](__m512i a, __m512i t, __m512i) { return _mm512_add_epi32(a, t); });
  Run("vpermb", [](__m512i a, __m512i t, __m512i) { return _mm512_permutexvar_epi8(a, t); });
  Run("vpermi2b",
      [](__m512i a, __m512i t, __m512i u) { return _mm512_permutex2var_epi8(t, a, u); });
  Run("vpdpbusd", [](__m512i a, __m512i t, __m512i u) { return _mm512_dpbusd_epi32(a, t, u); });
  Run("vpternlogq",
      [](__m512i a, __m512i t, __m512i u) { return _mm512_ternarylogic_epi64(a, t, u, 0xE4); });
  Run("vpsrlw", [](__m512i a, __m512i, __m512i) { return _mm512_srli_epi16(a, 2); });
  Run("gf2p8affine",
      [](__m512i a, __m512i t, __m512i) { return _mm512_gf2p8affine_epi64_epi8(a, t, 0); });
  Run("vpmulld", [](__m512i a, __m512i t, __m512i) { return _mm512_mullo_epi32(a, t); });
  Run("vpmaddubsw", [](__m512i a, __m512i t, __m512i) { return _mm512_maddubs_epi16(t, a); });
  Run("vpdpwssd", [](__m512i a, __m512i t, __m512i u) { return _mm512_dpwssd_epi32(a, t, u); });
  Run("vpmultishift",
      [](__m512i a, __m512i t, __m512i) { return _mm512_multishift_epi64_epi8(t, a); });
  Run("permb+dpbusd", [](__m512i a, __m512i t, __m512i u) {
    return _mm512_dpbusd_epi32(a, _mm512_permutexvar_epi8(a, t), u);
  });
  // Pairs: ~2x a single op's time where the two share one issue slot, ~1x where they overlap.
  Run("permb+gf2p8", [](__m512i a, __m512i t, __m512i u) {
    return _mm512_gf2p8affine_epi64_epi8(_mm512_permutexvar_epi8(a, t), u, 0);
  });
  Run("permb+ternlog", [](__m512i a, __m512i t, __m512i u) {
    return _mm512_ternarylogic_epi64(_mm512_permutexvar_epi8(a, t), t, u, 0xE4);
  });
  // The Q2_K extraction paths feeding vpdpbusd: a shift, a bit pick, an AND.
  Run("srlw+dpbusd", [](__m512i a, __m512i t, __m512i u) {
    return _mm512_dpbusd_epi32(a, _mm512_srli_epi16(a, 4), u);
  });
  Run("gf2p8+dpbusd", [](__m512i a, __m512i t, __m512i u) {
    return _mm512_dpbusd_epi32(a, _mm512_gf2p8affine_epi64_epi8(a, t, 0), u);
  });
  Run("and+dpbusd", [](__m512i a, __m512i t, __m512i u) {
    return _mm512_dpbusd_epi32(a, _mm512_and_si512(a, t), u);
  });
  Run("srlw+4and+4busd", [](__m512i a, __m512i t, __m512i u) {
    const __m512i h = _mm512_srli_epi16(a, 4);
    __m512i r = _mm512_dpbusd_epi32(a, _mm512_and_si512(a, t), u);
    r = _mm512_dpbusd_epi32(r, _mm512_and_si512(a, u), t);
    r = _mm512_dpbusd_epi32(r, _mm512_and_si512(h, t), u);
    return _mm512_dpbusd_epi32(r, _mm512_and_si512(h, u), t);
  });
  Run("3gf2+and+4busd", [](__m512i a, __m512i t, __m512i u) {
    __m512i r = _mm512_dpbusd_epi32(a, _mm512_and_si512(a, t), u);
    r = _mm512_dpbusd_epi32(r, _mm512_gf2p8affine_epi64_epi8(a, u, 0), t);
    r = _mm512_dpbusd_epi32(r, _mm512_gf2p8affine_epi64_epi8(a, t, 0), u);
    return _mm512_dpbusd_epi32(r, _mm512_gf2p8affine_epi64_epi8(a, u, 0), t);
  });
  Run("3srl+4and+4busd", [](__m512i a, __m512i t, __m512i u) {
    __m512i r = _mm512_dpbusd_epi32(a, _mm512_and_si512(a, t), u);
    r = _mm512_dpbusd_epi32(r, _mm512_and_si512(_mm512_srli_epi32(a, 2), t), u);
    r = _mm512_dpbusd_epi32(r, _mm512_and_si512(_mm512_srli_epi32(a, 4), t), u);
    return _mm512_dpbusd_epi32(r, _mm512_and_si512(_mm512_srli_epi32(a, 6), t), u);
  });
  // The mask path: a masked byte op with a constant mask, and with a mask loaded from memory.
  Run("vpandd", [](__m512i a, __m512i t, __m512i) { return _mm512_and_si512(a, t); });
  Run("vpaddb k-const", [](__m512i a, __m512i t, __m512i) {
    return _mm512_mask_add_epi8(a, static_cast<__mmask64>(0x5555555555555555ull), a, t);
  });
  RunIndexed("vpsubb k-mem", [](__m512i a, __m512i t, __m512i, long k) {
    return _mm512_mask_sub_epi8(a, static_cast<__mmask64>(g_masks[k & 63]), t, a);
  });
}
