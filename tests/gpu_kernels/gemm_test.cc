// GemmContext::QuantGemm against a CPU reference (DequantizeRow, double-precision products).
// Error bound: W and X are rounded to BF16 (8 significant bits: relative error <= 2^-9 each, so
// <= ~2^-8 per product), then accumulated in f32: |err| <= 1e-2 * sum_c |w_c * x_c|.
#include "gpu_kernels/gemm.h"

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

constexpr double kRelTol = 1e-2;

class QuantGemm : public ::testing::TestWithParam<GgmlType> {};

void RunCase(GemmContext& ctx, GgmlType type, int64_t rows, int64_t cols, int64_t n_tok,
             uint32_t seed) {
  const std::string what = std::string(TypeName(type)) + " rows " + std::to_string(rows) +
                           " cols " + std::to_string(cols) + " n_tok " + std::to_string(n_tok);
  const testing::Matrix m = RandomMatrix(type, rows, cols, seed);
  const std::vector<float> x = RandomActivations(n_tok * cols, seed + 1);
  DeviceBuffer dw = UploadWeights(m);
  DeviceBuffer dx = Upload(x);
  DeviceBuffer dy = Poisoned<float>(n_tok * rows);
  const Status s =
      ctx.QuantGemm(type, Weights(dw), rows, cols, dx.as<float>(), n_tok, dy.as<float>());
  ASSERT_TRUE(s.ok()) << s.ToString();
  ASSERT_TRUE(Synchronize(ctx.stream()).ok());
  testing::ExpectClose(testing::Reference(m, x, n_tok), Download<float>(dy, n_tok * rows), rows,
                       kRelTol, what);
}

int64_t ColsFor(GgmlType t) {
  if (GetTypeTraits(t).block_size == 256) return 512;
  if (GetTypeTraits(t).quantized) return 96;
  return 100;  // float types: any length
}

TEST_P(QuantGemm, DefaultScratchOneChunk) {
  MOESPLIT_SKIP_WITHOUT_GPU();
  auto ctx = GemmContext::Create(nullptr);
  ASSERT_TRUE(ctx.ok()) << ctx.status().ToString();
  const int64_t cols = ColsFor(GetParam());
  RunCase(**ctx, GetParam(), 1, cols, 1, 3);     // rows = 1, one token
  RunCase(**ctx, GetParam(), 70, cols, 8, 4);    // rows not a multiple of any tile
  RunCase(**ctx, GetParam(), 33, cols, 129, 5);  // a prefill batch
}

// A scratch bound of 3 rows: the weights go in chunks of 3 rows (the last one partial), each
// writing its own columns of Y.
TEST_P(QuantGemm, SmallScratchManyChunks) {
  MOESPLIT_SKIP_WITHOUT_GPU();
  const int64_t cols = ColsFor(GetParam());
  auto ctx = GemmContext::Create(nullptr, static_cast<size_t>(3 * cols * 2));
  ASSERT_TRUE(ctx.ok()) << ctx.status().ToString();
  RunCase(**ctx, GetParam(), 17, cols, 7, 6);
  // Smaller than one row: one row per chunk.
  auto tiny = GemmContext::Create(nullptr, 1);
  ASSERT_TRUE(tiny.ok()) << tiny.status().ToString();
  RunCase(**tiny, GetParam(), 5, cols, 2, 7);
}

INSTANTIATE_TEST_SUITE_P(GpuQuant, QuantGemm, ::testing::ValuesIn(kGpuQuantTypes),
                         testing::TypeTestName);

// Argument errors are found before any CUDA call: these run without a GPU.
TEST(QuantGemmArgs, RejectsBadArguments) {
  Status s = GemmContext::CheckArgs(GgmlType::kTQ1_0, 4, 256, 1);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("tq1_0"), std::string::npos) << s.ToString();
  s = GemmContext::CheckArgs(GgmlType::kQ4_K, 4, 200, 1);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("cols = 200"), std::string::npos) << s.ToString();
  s = GemmContext::CheckArgs(GgmlType::kQ8_0, 0, 64, 1);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("rows = 0"), std::string::npos) << s.ToString();
  s = GemmContext::CheckArgs(GgmlType::kQ8_0, 4, 64, 0);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("n_tok = 0"), std::string::npos) << s.ToString();
  s = GemmContext::CheckArgs(GgmlType::kF16, int64_t{1} << 32, 64, 1);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(GemmContext::CheckArgs(GgmlType::kBF16, 3, 7, 1).ok());
  EXPECT_TRUE(GemmContext::CheckArgs(GgmlType::kQ6_K, 3, 512, 4096).ok());
}

}  // namespace
}  // namespace moesplit::gpu
