#include <cmath>
#include <cstring>
#include <vector>

#include "gpu_kernels/device_buffer.h"
#include "tests/gpu_kernels/gpu_test_util.h"

namespace moesplit::gpu {
namespace {

TEST(GpuDeviceBuffer, RoundTripAndPoison) {
  MOESPLIT_SKIP_WITHOUT_GPU();
  std::vector<float> host(1000);
  for (size_t i = 0; i < host.size(); ++i) host[i] = static_cast<float>(i) * 0.5f;
  auto buf = DeviceBuffer::Alloc(host.size() * sizeof(float));
  ASSERT_TRUE(buf.ok()) << buf.status().ToString();
  ASSERT_TRUE(buf->CopyFromHost(host.data(), host.size() * sizeof(float)).ok());
  std::vector<float> back(host.size(), -1.0f);
  ASSERT_TRUE(buf->CopyToHost(back.data(), back.size() * sizeof(float)).ok());
  EXPECT_EQ(back, host);
  ASSERT_TRUE(buf->Fill(0xFF).ok());
  ASSERT_TRUE(buf->CopyToHost(back.data(), back.size() * sizeof(float)).ok());
  for (float v : back) EXPECT_TRUE(std::isnan(v));
}

TEST(GpuDeviceBuffer, ImpossibleAllocationIsAnError) {
  MOESPLIT_SKIP_WITHOUT_GPU();
  auto buf = DeviceBuffer::Alloc(size_t{1} << 60);  // 1 EiB: no device has it
  ASSERT_FALSE(buf.ok());
  EXPECT_NE(buf.status().message().find("cudaMalloc"), std::string::npos);
  // The failure must not poison the next call.
  auto small = DeviceBuffer::Alloc(4096);
  EXPECT_TRUE(small.ok()) << small.status().ToString();
}

}  // namespace
}  // namespace moesplit::gpu
