// QuantGemv against a CPU reference: DequantizeRow (bit-exact with the GPU decode) and a
// double-precision dot. The GPU adds the same products in f32 in another order (32-value partial
// sums per lane, then a shuffle tree), so the bound is |err| <= 1e-4 * sum_c |w_c * x_c|: the
// f32 rounding of ~cols / 32 + 5 sequential additions of terms bounded by that sum is far below
// it for the column counts here (<= 4096).
#include "gpu_kernels/qgemv.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "tests/gpu_kernels/gpu_test_util.h"
#include "tests/gpu_kernels/quant_test_util.h"

namespace moesplit::gpu {
namespace {

using testing::Download;
using testing::kGpuQuantTypes;
using testing::Poisoned;
using testing::RandomActivations;
using testing::RandomMatrix;
using testing::Upload;
using testing::UploadWeights;
using testing::Weights;

constexpr double kRelTol = 1e-4;

class QGemv : public ::testing::TestWithParam<GgmlType> {};

// Block size of `type` times `blocks`.
int64_t ColsOf(GgmlType type, int64_t blocks) {
  const int64_t bv = GetTypeTraits(type).quantized ? GetTypeTraits(type).block_size : 32;
  return bv * blocks;
}

void RunCase(GgmlType type, int64_t rows, int64_t cols, int n_tok, uint32_t seed) {
  const std::string what = std::string(TypeName(type)) + " rows " + std::to_string(rows) +
                           " cols " + std::to_string(cols) + " n_tok " + std::to_string(n_tok);
  const testing::Matrix m = RandomMatrix(type, rows, cols, seed);
  const std::vector<float> x = RandomActivations(n_tok * cols, seed + 1);
  DeviceBuffer dw = UploadWeights(m);
  DeviceBuffer dx = Upload(x);
  DeviceBuffer dy = Poisoned<float>(n_tok * rows);
  ASSERT_TRUE(
      QuantGemv(type, Weights(dw), rows, cols, dx.as<float>(), n_tok, dy.as<float>(), nullptr)
          .ok());
  ASSERT_TRUE(Synchronize(nullptr).ok());
  testing::ExpectClose(testing::Reference(m, x, n_tok), Download<float>(dy, n_tok * rows), rows,
                       kRelTol, what);
}

TEST_P(QGemv, OneRowOneToken) {
  MOESPLIT_SKIP_WITHOUT_GPU();
  RunCase(GetParam(), 1, ColsOf(GetParam(), 1), 1, 11);
}

// Rows not a multiple of the 4 rows per thread block; a partial last chunk (K-quants: 5 super-
// blocks = one chunk of 4 + 1; others: 45 x 32 = 1024 + 416 values).
TEST_P(QGemv, OddShapesEveryTokenCount) {
  MOESPLIT_SKIP_WITHOUT_GPU();
  const GgmlType t = GetParam();
  const int64_t cols = GetTypeTraits(t).block_size == 256 ? ColsOf(t, 5) : ColsOf(t, 45);
  for (int n_tok = 1; n_tok <= kQGemvMaxTokens; ++n_tok) {
    RunCase(t, 37 + n_tok, cols, n_tok, 100 + n_tok);
  }
}

TEST_P(QGemv, WideRows) {
  MOESPLIT_SKIP_WITHOUT_GPU();
  RunCase(GetParam(), 130, 4096, 8, 7);
  RunCase(GetParam(), 3, 4096, 1, 8);
}

INSTANTIATE_TEST_SUITE_P(GpuQuant, QGemv, ::testing::ValuesIn(kGpuQuantTypes),
                         testing::TypeTestName);

// Argument errors are found before any CUDA call: these run without a GPU.
TEST(QGemvArgs, RejectsUnsupportedType) {
  const Status s = QuantGemv(GgmlType::kTQ1_0, nullptr, 4, 256, nullptr, 1, nullptr, nullptr);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("tq1_0"), std::string::npos) << s.ToString();
  EXPECT_FALSE(QuantGemvSupports(GgmlType::kQ4_K_R16));  // moesplit's CPU layouts stay there
  EXPECT_TRUE(QuantGemvSupports(GgmlType::kMXFP4));
  EXPECT_TRUE(QuantGemvSupports(GgmlType::kIQ1_M));
  EXPECT_TRUE(QuantGemvSupports(GgmlType::kQ5_1));
  EXPECT_TRUE(QuantGemvSupports(GgmlType::kQ6_K));
}

TEST(QGemvArgs, RejectsColsNotAMultipleOfTheBlock) {
  Status s = QuantGemv(GgmlType::kQ4_K, nullptr, 4, 100, nullptr, 1, nullptr, nullptr);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("cols = 100"), std::string::npos) << s.ToString();
  EXPECT_NE(s.message().find("256"), std::string::npos) << s.ToString();
  s = CheckQuantGemvArgs(GgmlType::kF16, 4, 48, nullptr, 1);  // float types: multiples of 32
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  s = CheckQuantGemvArgs(GgmlType::kQ8_0, 4, 0, nullptr, 1);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
}

TEST(QGemvArgs, RejectsTokenCountsOutside1To8) {
  for (int n_tok : {0, -1, 9, 64}) {
    const Status s = QuantGemv(GgmlType::kQ8_0, nullptr, 4, 64, nullptr, n_tok, nullptr, nullptr);
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
    EXPECT_NE(s.message().find("n_tok = " + std::to_string(n_tok)), std::string::npos)
        << s.ToString();
    EXPECT_NE(s.message().find("[1, 8]"), std::string::npos) << s.ToString();
  }
}

TEST(QGemvArgs, RejectsBadRowsAndMisalignedX) {
  EXPECT_EQ(CheckQuantGemvArgs(GgmlType::kQ8_0, 0, 64, nullptr, 1).code(),
            StatusCode::kInvalidArgument);
  const float* misaligned = reinterpret_cast<const float*>(uintptr_t{4});
  const Status s = CheckQuantGemvArgs(GgmlType::kQ8_0, 4, 64, misaligned, 1);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("16-byte"), std::string::npos) << s.ToString();
  EXPECT_TRUE(CheckQuantGemvArgs(GgmlType::kQ6_K, 1, 256, nullptr, 8).ok());
}

}  // namespace
}  // namespace moesplit::gpu
