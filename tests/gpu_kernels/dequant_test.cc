// DequantizeRowsToBf16, GetRows and ConvertF32ToBf16 against cpu_kernels: the decode is bit-exact
// (DequantizeRow's floats; bf16 outputs are those floats rounded by Fp32ToBf16), so every output
// is compared bit for bit, in NaN-poisoned buffers.
#include "gpu_kernels/dequant.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/base/float16.h"
#include "tests/gpu_kernels/gpu_test_util.h"
#include "tests/gpu_kernels/quant_test_util.h"

namespace moesplit::gpu {
namespace {

using testing::Download;
using testing::kGpuQuantTypes;
using testing::Poisoned;
using testing::RandomMatrix;
using testing::Upload;
using testing::UploadWeights;
using testing::Weights;

class GpuDequant : public ::testing::TestWithParam<GgmlType> {};

// 3 K-quant super-blocks or 7 groups of 32; the float types also get a row length that is not
// a multiple of 32.
std::vector<int64_t> ColsFor(GgmlType t) {
  if (GetTypeTraits(t).block_size == 256) return {768};
  if (GetTypeTraits(t).quantized) return {224};
  return {224, 50};
}

TEST_P(GpuDequant, RowRangeToBf16IsBitExact) {
  MOESPLIT_SKIP_WITHOUT_GPU();
  const GgmlType t = GetParam();
  for (int64_t cols : ColsFor(t)) {
    const int64_t rows = 29;
    const testing::Matrix m = RandomMatrix(t, rows, cols, 21);
    DeviceBuffer dw = UploadWeights(m);
    for (auto [r0, r1] : {std::pair<int64_t, int64_t>{0, rows}, {5, 6}, {3, 20}}) {
      DeviceBuffer out = Poisoned<uint16_t>((r1 - r0) * cols);
      ASSERT_TRUE(
          DequantizeRowsToBf16(t, Weights(dw), rows, cols, r0, r1, out.as<uint16_t>(), nullptr)
              .ok());
      ASSERT_TRUE(Synchronize(nullptr).ok());
      const std::vector<uint16_t> got = Download<uint16_t>(out, (r1 - r0) * cols);
      for (int64_t i = 0; i < (r1 - r0) * cols; ++i) {
        const uint16_t want = Fp32ToBf16(m.values[r0 * cols + i]);
        ASSERT_EQ(got[i], want) << TypeName(t) << " cols " << cols << " rows [" << r0 << ", " << r1
                                << ") value " << i;
      }
    }
  }
}

TEST_P(GpuDequant, GetRowsIsBitExact) {
  MOESPLIT_SKIP_WITHOUT_GPU();
  const GgmlType t = GetParam();
  for (int64_t cols : ColsFor(t)) {
    const testing::Matrix m = RandomMatrix(t, 17, cols, 5);
    DeviceBuffer dw = UploadWeights(m);
    const std::vector<int32_t> ids = {16, 0, 3, 3, 1, 9};  // repeats, first and last rows
    DeviceBuffer dids = Upload(ids);
    const int64_t n = static_cast<int64_t>(ids.size());
    DeviceBuffer out = Poisoned<float>(n * cols);
    ASSERT_TRUE(
        GetRows(t, Weights(dw), cols, dids.as<int32_t>(), n, out.as<float>(), nullptr).ok());
    ASSERT_TRUE(Synchronize(nullptr).ok());
    const std::vector<float> got = Download<float>(out, n * cols);
    for (int64_t i = 0; i < n; ++i) {
      for (int64_t c = 0; c < cols; ++c) {
        ASSERT_EQ(FloatToBits(got[i * cols + c]), FloatToBits(m.values[ids[i] * cols + c]))
            << TypeName(t) << " id " << ids[i] << " col " << c;
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(GpuQuant, GpuDequant, ::testing::ValuesIn(kGpuQuantTypes),
                         testing::TypeTestName);

TEST(GpuConvertF32ToBf16, RoundsLikeTheCpu) {
  MOESPLIT_SKIP_WITHOUT_GPU();
  std::vector<float> x = testing::RandomActivations(1001, 3);
  x[0] = BitsToFloat(0x7fc00001u);  // NaN
  x[1] = BitsToFloat(0x3f808000u);  // a tie: rounds to even
  x[2] = BitsToFloat(0x3f818000u);  // a tie: rounds up
  DeviceBuffer dx = Upload(x);
  DeviceBuffer out = Poisoned<uint16_t>(static_cast<int64_t>(x.size()));
  ASSERT_TRUE(
      ConvertF32ToBf16(dx.as<float>(), static_cast<int64_t>(x.size()), out.as<uint16_t>(), nullptr)
          .ok());
  ASSERT_TRUE(Synchronize(nullptr).ok());
  const std::vector<uint16_t> got = Download<uint16_t>(out, static_cast<int64_t>(x.size()));
  for (size_t i = 0; i < x.size(); ++i) ASSERT_EQ(got[i], Fp32ToBf16(x[i])) << i;
}

// Argument errors are found before any CUDA call: these run without a GPU.
TEST(GpuDequantArgs, RejectsBadArguments) {
  Status s = DequantizeRowsToBf16(GgmlType::kTQ1_0, nullptr, 4, 256, 0, 4, nullptr, nullptr);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("tq1_0"), std::string::npos) << s.ToString();
  s = DequantizeRowsToBf16(GgmlType::kQ5_K, nullptr, 4, 300, 0, 4, nullptr, nullptr);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("cols = 300"), std::string::npos) << s.ToString();
  s = DequantizeRowsToBf16(GgmlType::kQ8_0, nullptr, 4, 64, 2, 5, nullptr, nullptr);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("[2, 5)"), std::string::npos) << s.ToString();
  auto* misaligned = reinterpret_cast<uint16_t*>(uintptr_t{8});
  s = DequantizeRowsToBf16(GgmlType::kQ4_0, nullptr, 4, 64, 0, 4, misaligned, nullptr);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(CheckDequantizeRowsArgs(GgmlType::kF16, 4, 50, 1, 1, misaligned).ok());

  s = GetRows(GgmlType::kTQ1_0, nullptr, 256, nullptr, 1, nullptr, nullptr);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  s = GetRows(GgmlType::kQ6_K, nullptr, 255, nullptr, 1, nullptr, nullptr);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("cols = 255"), std::string::npos) << s.ToString();
  EXPECT_EQ(CheckGetRowsArgs(GgmlType::kF32, 10, -1, nullptr).code(), StatusCode::kInvalidArgument);
  // Nothing to do: no CUDA call either.
  EXPECT_TRUE(GetRows(GgmlType::kQ4_K, nullptr, 256, nullptr, 0, nullptr, nullptr).ok());
  EXPECT_TRUE(ConvertF32ToBf16(nullptr, 0, nullptr, nullptr).ok());
}

}  // namespace
}  // namespace moesplit::gpu
