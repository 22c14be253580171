// For tests that run CUDA kernels: they skip, saying why, where no CUDA device is visible (CI and
// the development machines have nvcc but no GPU), and run on the GPU machine.
//
//   TEST(GpuRmsNorm, MatchesCpu) { MOESPLIT_SKIP_WITHOUT_GPU(); ... }
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "gpu_kernels/device_buffer.h"
#include "gpu_kernels/device_info.h"

#define MOESPLIT_SKIP_WITHOUT_GPU()                                                           \
  do {                                                                                        \
    auto moesplit_devices_ = ::moesplit::gpu::ListDevices();                                  \
    if (!moesplit_devices_.ok()) {                                                            \
      GTEST_SKIP() << "no usable CUDA device (" << moesplit_devices_.status().ToString()      \
                   << "): this GPU test runs only on a machine with an NVIDIA GPU";           \
    }                                                                                         \
    if (moesplit_devices_->empty()) {                                                         \
      GTEST_SKIP() << "no CUDA device visible: this GPU test runs only on a machine with an " \
                      "NVIDIA GPU";                                                           \
    }                                                                                         \
  } while (0)

namespace moesplit::gpu::testing {

// n values uniform in [lo, hi), deterministic per seed.
inline std::vector<float> RandomUniform(size_t n, float lo, float hi, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

// A device copy of v (an empty buffer, and a test failure, when it cannot be made).
template <typename T>
DeviceBuffer Upload(const std::vector<T>& v) {
  auto buf = DeviceBuffer::Alloc(v.size() * sizeof(T));
  EXPECT_TRUE(buf.ok()) << buf.status().ToString();
  if (!buf.ok()) return DeviceBuffer();
  EXPECT_TRUE(buf->CopyFromHost(v.data(), v.size() * sizeof(T)).ok());
  return std::move(*buf);
}

// A device buffer of n Ts poisoned with 0xFF bytes (NaN for f32 / f16 / bf16).
template <typename T>
DeviceBuffer Poisoned(int64_t n) {
  auto buf = DeviceBuffer::Alloc(static_cast<size_t>(n) * sizeof(T));
  EXPECT_TRUE(buf.ok()) << buf.status().ToString();
  if (!buf.ok()) return DeviceBuffer();
  EXPECT_TRUE(buf->Fill(0xFF).ok());
  return std::move(*buf);
}

// The first n Ts of buf, after the default stream's work is done.
template <typename T>
std::vector<T> Download(const DeviceBuffer& buf, int64_t n) {
  std::vector<T> v(n);
  EXPECT_TRUE(Synchronize(nullptr).ok());
  EXPECT_TRUE(buf.CopyToHost(v.data(), v.size() * sizeof(T)).ok());
  return v;
}

// Distance in units in the last place (NaN: huge).
inline int64_t UlpDistance(float a, float b) {
  if (std::isnan(a) || std::isnan(b)) return std::numeric_limits<int64_t>::max();
  if (a == b) return 0;
  auto key = [](float f) {
    int32_t i = 0;
    std::memcpy(&i, &f, sizeof(i));
    return i < 0 ? -static_cast<int64_t>(i & 0x7fffffff) : static_cast<int64_t>(i);
  };
  return std::abs(key(a) - key(b));
}

}  // namespace moesplit::gpu::testing
