// QuantGemvBatched (MLA's per-head maps) against a double-precision CPU reference over strided
// per-head layouts, with the bound of qgemv_test.cc: |err| <= 1e-4 * sum_c |w_c * x_c| (the same
// kernel arithmetic, only the addresses differ). Every float of y outside the written rows is
// poisoned NaN and must stay bit-identical; the gaps of x are NaN too, so reading one would turn
// a result into NaN. The argument checks (before any CUDA call) run without a GPU.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "gpu_kernels/qgemv.h"
#include "tests/gpu_kernels/gpu_test_util.h"
#include "tests/gpu_kernels/quant_test_util.h"

namespace moesplit::gpu {
namespace {

using testing::Download;
using testing::Poisoned;
using testing::RandomMatrix;
using testing::Upload;
using testing::UploadWeights;
using testing::Weights;

constexpr double kRelTol = 1e-4;

// Strides in floats of x ([n_tok x n_batch] rows of cols) and y ([n_tok x n_batch] rows of rows).
struct Layout {
  int64_t x_tok, x_batch, y_tok, y_batch;
};

// forward_mla's token-major layout (row t, head b at t * n_batch * head + b * head) with gaps:
// 8 floats after every x head, 4 after every x token; 3 after every y head, 5 after a y token.
Layout TokenMajor(int64_t rows, int64_t cols, int64_t n_batch) {
  const int64_t xh = cols + 8, yh = rows + 3;
  return {n_batch * xh + 4, xh, n_batch * yh + 5, yh};
}
// Head-major (head b's tokens together), again with gaps.
Layout HeadMajor(int64_t rows, int64_t cols, int n_tok) {
  const int64_t xt = cols + 4, yt = rows + 1;
  return {xt, n_tok * xt + 8, yt, n_tok * yt + 2};
}

// Floats a strided [n_tok x n_batch] set of rows of `len` floats spans.
int64_t Span(int64_t len, int n_tok, int64_t tok, int64_t n_batch, int64_t batch) {
  return (n_tok - 1) * tok + (n_batch - 1) * batch + len;
}

void RunCase(GgmlType type, int64_t rows, int64_t cols, int64_t n_batch, int n_tok, const Layout& l,
             uint32_t seed) {
  const std::string what = std::string(TypeName(type)) + " rows " + std::to_string(rows) +
                           " cols " + std::to_string(cols) + " n_batch " + std::to_string(n_batch) +
                           " n_tok " + std::to_string(n_tok) + " strides x " +
                           std::to_string(l.x_tok) + "/" + std::to_string(l.x_batch) + " y " +
                           std::to_string(l.y_tok) + "/" + std::to_string(l.y_batch);
  SCOPED_TRACE(what);
  // The n_batch matrices back to back: matrix b is rows b * rows .. of one tall matrix.
  const testing::Matrix m = RandomMatrix(type, n_batch * rows, cols, seed);
  const int64_t x_len = Span(cols, n_tok, l.x_tok, n_batch, l.x_batch);
  const int64_t y_len = Span(rows, n_tok, l.y_tok, n_batch, l.y_batch);
  std::vector<float> x(x_len, std::numeric_limits<float>::quiet_NaN());  // gaps stay NaN
  const std::vector<float> vals = testing::RandomActivations(n_tok * n_batch * cols, seed + 1);
  for (int t = 0; t < n_tok; ++t) {
    for (int64_t b = 0; b < n_batch; ++b) {
      std::memcpy(&x[t * l.x_tok + b * l.x_batch], &vals[(t * n_batch + b) * cols],
                  cols * sizeof(float));
    }
  }
  DeviceBuffer dw = UploadWeights(m);
  DeviceBuffer dx = Upload(x);
  DeviceBuffer dy = Poisoned<float>(y_len);
  ASSERT_TRUE(QuantGemvBatched(type, Weights(dw), rows, cols, n_batch, dx.as<float>(), l.x_tok,
                               l.x_batch, n_tok, dy.as<float>(), l.y_tok, l.y_batch, nullptr)
                  .ok());
  ASSERT_TRUE(Synchronize(nullptr).ok());
  const std::vector<float> y = Download<float>(dy, y_len);

  std::vector<bool> written(y_len, false);
  int bad = 0;
  for (int t = 0; t < n_tok; ++t) {
    for (int64_t b = 0; b < n_batch; ++b) {
      const float* xr = &x[t * l.x_tok + b * l.x_batch];
      for (int64_t r = 0; r < rows; ++r) {
        const float* wr = &m.values[(b * rows + r) * cols];
        double s = 0.0, a = 0.0;
        for (int64_t c = 0; c < cols; ++c) {
          const double p = static_cast<double>(wr[c]) * xr[c];
          s += p;
          a += std::abs(p);
        }
        const int64_t i = t * l.y_tok + b * l.y_batch + r;
        written[i] = true;
        if (!(std::abs(y[i] - s) <= kRelTol * a) && bad++ < 5) {  // also catches NaN
          ADD_FAILURE() << "token " << t << " batch " << b << " row " << r << " got " << y[i]
                        << " want " << s << " (bound " << kRelTol * a << ")";
        }
      }
    }
  }
  for (int64_t i = 0; i < y_len && bad < 5; ++i) {
    uint32_t bits = 0;
    std::memcpy(&bits, &y[i], 4);
    if (!written[i] && bits != 0xFFFFFFFFu) {
      ++bad;
      ADD_FAILURE() << "gap float " << i << " of y was written: " << y[i];
    }
  }
}

class QGemvBatched : public ::testing::TestWithParam<GgmlType> {};

// MLA's shapes at toy head counts: W_kb-like (rows 512 of cols 128) for the legacy and float
// types, a K-quant row of 256 for the super-block types; 3 and 16 heads; 1 / 3 / 8 tokens.
TEST_P(QGemvBatched, PerHeadStridedLayouts) {
  MOESPLIT_SKIP_WITHOUT_GPU();
  const GgmlType t = GetParam();
  const bool kquant = GetTypeTraits(t).block_size == 256;
  const int64_t rows = kquant ? 64 : 512;
  const int64_t cols = kquant ? 256 : 128;
  uint32_t seed = 1;
  for (int64_t n_batch : {int64_t{3}, int64_t{16}}) {
    for (int n_tok : {1, 3, 8}) {
      RunCase(t, rows, cols, n_batch, n_tok, TokenMajor(rows, cols, n_batch), seed++);
      RunCase(t, rows, cols, n_batch, n_tok, HeadMajor(rows, cols, n_tok), seed++);
    }
  }
}

// W_vb-like: rows 128 of cols 512 (several chunks per row), rows not a multiple of 4.
TEST_P(QGemvBatched, WideRowsAndPartialRowBlocks) {
  MOESPLIT_SKIP_WITHOUT_GPU();
  const GgmlType t = GetParam();
  RunCase(t, 128, 512, 5, 2, TokenMajor(128, 512, 5), 50);
  RunCase(t, 37, 1024, 4, 7, HeadMajor(37, 1024, 7), 51);
}

// x_batch = 0: every batch reads the same activations.
TEST_P(QGemvBatched, SharedActivations) {
  MOESPLIT_SKIP_WITHOUT_GPU();
  const GgmlType t = GetParam();
  const int64_t cols = GetTypeTraits(t).block_size == 256 ? 256 : 128;
  RunCase(t, 40, cols, 6, 4, Layout{cols + 4, 0, 6 * 40, 40}, 60);
}

INSTANTIATE_TEST_SUITE_P(GpuQuant, QGemvBatched, ::testing::ValuesIn(testing::kGpuQuantTypes),
                         testing::TypeTestName);

// n_batch = 1 with contiguous strides is QuantGemv: the same kernel, bit-identical results.
TEST(QGemvBatchedGpu, OneBatchIsQuantGemv) {
  MOESPLIT_SKIP_WITHOUT_GPU();
  const int64_t rows = 70, cols = 512;
  const int n_tok = 5;
  const testing::Matrix m = RandomMatrix(GgmlType::kQ4_K, rows, cols, 3);
  DeviceBuffer dw = UploadWeights(m);
  DeviceBuffer dx = Upload(testing::RandomActivations(n_tok * cols, 4));
  DeviceBuffer y1 = Poisoned<float>(n_tok * rows), y2 = Poisoned<float>(n_tok * rows);
  ASSERT_TRUE(QuantGemv(GgmlType::kQ4_K, Weights(dw), rows, cols, dx.as<float>(), n_tok,
                        y1.as<float>(), nullptr)
                  .ok());
  ASSERT_TRUE(QuantGemvBatched(GgmlType::kQ4_K, Weights(dw), rows, cols, 1, dx.as<float>(), cols, 0,
                               n_tok, y2.as<float>(), rows, 0, nullptr)
                  .ok());
  const std::vector<float> a = Download<float>(y1, n_tok * rows);
  const std::vector<float> b = Download<float>(y2, n_tok * rows);
  ASSERT_EQ(0, std::memcmp(a.data(), b.data(), a.size() * sizeof(float)));
  for (float v : a) ASSERT_TRUE(std::isfinite(v));
}

// ---------------------------------------------------------------------------------------------
// Argument errors, found before any CUDA call: these run without a GPU.
// ---------------------------------------------------------------------------------------------

void ExpectInvalid(const Status& s, const std::string& needle) {
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.ToString();
  EXPECT_NE(s.message().find(needle), std::string::npos) << needle << " in " << s.ToString();
  EXPECT_NE(s.message().find("QuantGemvBatched"), std::string::npos) << s.ToString();
}

// rows 512 x cols 128 Q8_0, 16 heads, 4 tokens, forward_mla's token-major layout.
Status Check(int64_t n_batch, int n_tok, int64_t x_tok, int64_t x_batch, int64_t y_tok,
             int64_t y_batch, const float* x = nullptr) {
  return CheckQuantGemvBatchedArgs(GgmlType::kQ8_0, 512, 128, n_batch, x, x_tok, x_batch, n_tok,
                                   y_tok, y_batch);
}

TEST(QGemvBatchedArgs, AcceptsMlaLayouts) {
  // W_kb: x = q_nope in [n_tok x 16 x 192] rows, y = q_abs in [n_tok x 16 x 576] rows.
  EXPECT_TRUE(Check(16, 4, 16 * 192, 192, 16 * 576, 576).ok());
  // Head-major, one token (unused token strides need no alignment), shared x.
  EXPECT_TRUE(Check(16, 4, 128, 4 * 128, 512, 4 * 512).ok());
  EXPECT_TRUE(Check(16, 1, 3, 0, 7, 512).ok());
  EXPECT_TRUE(Check(1, 8, 128, 5, 512, 0).ok());
}

TEST(QGemvBatchedArgs, RejectsBatchCounts) {
  for (int64_t n_batch : {int64_t{0}, int64_t{-2}, kQGemvMaxBatch + 1}) {
    ExpectInvalid(Check(n_batch, 1, 128, 128, 512, 512), "n_batch = " + std::to_string(n_batch));
  }
}

TEST(QGemvBatchedArgs, RejectsStridesOutOfRange) {
  ExpectInvalid(Check(2, 2, -128, 128, 512, 1024), "x_tok = -128");
  ExpectInvalid(Check(2, 2, 256, -4, 512, 1024), "x_batch = -4");
  ExpectInvalid(Check(2, 2, 256, 128, kQGemvMaxStride + 1, 512), "y_tok = ");
  ExpectInvalid(Check(2, 2, 256, 128, 1024, -1), "y_batch = -1");
}

TEST(QGemvBatchedArgs, RejectsMisalignedXRows) {
  ExpectInvalid(Check(2, 2, 130, 0, 1024, 512), "x_tok = 130");
  ExpectInvalid(Check(2, 1, 128, 130, 512, 512), "x_batch = 130");
  const float* misaligned = reinterpret_cast<const float*>(uintptr_t{8});
  ExpectInvalid(Check(2, 1, 128, 128, 512, 512, misaligned), "16-byte");
}

TEST(QGemvBatchedArgs, RejectsOverlappingOutputRows) {
  ExpectInvalid(Check(1, 2, 128, 0, 511, 0), "overlap");                   // tokens
  ExpectInvalid(Check(2, 1, 128, 128, 0, 0), "y_batch = 0");               // one y for all heads
  ExpectInvalid(Check(4, 2, 128, 128, 4 * 512 - 1, 512), "y_tok = 2047");  // token-major
  ExpectInvalid(Check(4, 2, 128, 128, 512, 1023), "overlap");              // head-major
  EXPECT_TRUE(Check(4, 2, 128, 128, 4 * 512, 512).ok());
  EXPECT_TRUE(Check(4, 2, 128, 128, 512, 1024).ok());
}

TEST(QGemvBatchedArgs, CommonChecksNameTheBatchedCall) {
  ExpectInvalid(CheckQuantGemvBatchedArgs(GgmlType::kQ4_K, 4, 128, 2, nullptr, 128, 128, 1, 4, 4),
                "cols = 128");
  ExpectInvalid(CheckQuantGemvBatchedArgs(GgmlType::kTQ1_0, 4, 256, 2, nullptr, 256, 256, 1, 4, 4),
                "tq1_0");
  ExpectInvalid(Check(2, 9, 128, 128, 4096, 512), "n_tok = 9");
  // The launcher returns the same errors before touching the GPU.
  ExpectInvalid(QuantGemvBatched(GgmlType::kQ8_0, nullptr, 512, 128, 0, nullptr, 128, 128, 1,
                                 nullptr, 512, 512, nullptr),
                "n_batch = 0");
}

}  // namespace
}  // namespace moesplit::gpu
