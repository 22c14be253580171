// CUDA's built-in vector types for the emulated device (global namespace, as in CUDA), with
// CUDA's alignments: a misaligned float4 / uint4 access is undefined behaviour here as on the
// GPU, and UBSan (the sanitizer pass) reports it.
#pragma once

#include <cstdint>

struct uint3 {
  unsigned x, y, z;
};

struct dim3 {
  unsigned x = 1, y = 1, z = 1;
  constexpr dim3(unsigned vx = 1, unsigned vy = 1, unsigned vz = 1) : x(vx), y(vy), z(vz) {}
  constexpr dim3(uint3 v) : x(v.x), y(v.y), z(v.z) {}  // NOLINT: implicit, as in CUDA
  constexpr operator uint3() const { return uint3{x, y, z}; }
};

struct alignas(8) float2 {
  float x, y;
};
struct alignas(16) float4 {
  float x, y, z, w;
};
struct alignas(8) int2 {
  int x, y;
};
struct alignas(16) int4 {
  int x, y, z, w;
};
struct alignas(8) uint2 {
  unsigned x, y;
};
struct alignas(16) uint4 {
  unsigned x, y, z, w;
};
struct alignas(16) double2 {
  double x, y;
};

inline constexpr float2 make_float2(float x, float y) { return float2{x, y}; }
inline constexpr float4 make_float4(float x, float y, float z, float w) {
  return float4{x, y, z, w};
}
inline constexpr int2 make_int2(int x, int y) { return int2{x, y}; }
inline constexpr int4 make_int4(int x, int y, int z, int w) { return int4{x, y, z, w}; }
inline constexpr uint2 make_uint2(unsigned x, unsigned y) { return uint2{x, y}; }
inline constexpr uint4 make_uint4(unsigned x, unsigned y, unsigned z, unsigned w) {
  return uint4{x, y, z, w};
}
inline constexpr uint3 make_uint3(unsigned x, unsigned y, unsigned z) { return uint3{x, y, z}; }
inline constexpr dim3 make_dim3(unsigned x, unsigned y, unsigned z) { return dim3(x, y, z); }
