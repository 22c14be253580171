// QuantGemvIds (routed experts: one GEMV per (token, expert) pair, the expert read from device
// ids) against a double-precision CPU reference, with the bound of qgemv_test.cc: |err| <= 1e-4 *
// sum_c |w_c * x_c| (the same kernel arithmetic, only the matrix and x row of each batch differ).
// y is NaN-poisoned so that a row not written shows; an id outside [0, n_expert) must give its
// pair NaN rows, leave every other pair right and not fault (Synchronize stays ok). The argument
// checks (before any CUDA call) run without a GPU.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
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

bool ValidId(int32_t e, int64_t n_expert) { return e >= 0 && e < n_expert; }

// Runs n_pairs = ids.size() products of `n_expert` experts of rows x cols (m: the experts back to
// back, n_expert * rows rows) over x ([ceil(n_pairs / x_div) x cols]) and checks y ([n_pairs x
// rows] plus one guard row): valid pairs within the bound, invalid pairs all NaN, the guard row
// untouched. y starts as NaN bytes 0xFF (poison_nan) or as the finite kFill (so that the NaN of
// an invalid pair can only be the kernel's).
void RunCase(const testing::Matrix& m, int64_t n_expert, const std::vector<int32_t>& ids,
             int64_t x_div, bool poison_nan, uint32_t seed) {
  const int64_t rows = m.rows / n_expert, cols = m.cols;
  const int64_t n_pairs = static_cast<int64_t>(ids.size());
  const int64_t x_rows = (n_pairs + x_div - 1) / x_div;
  SCOPED_TRACE(std::string(TypeName(m.type)) + " rows " + std::to_string(rows) + " cols " +
               std::to_string(cols) + " n_expert " + std::to_string(n_expert) + " n_pairs " +
               std::to_string(n_pairs) + " x_div " + std::to_string(x_div));
  const std::vector<float> x = testing::RandomActivations(x_rows * cols, seed);
  constexpr float kFill = 1234.5f;  // finite poison: an invalid pair's NaN must be the kernel's
  const int64_t y_len = (n_pairs + 1) * rows;
  DeviceBuffer dw = UploadWeights(m);
  DeviceBuffer dx = Upload(x);
  DeviceBuffer dids = Upload(ids);
  DeviceBuffer dy = poison_nan ? Poisoned<float>(y_len) : Upload(std::vector<float>(y_len, kFill));
  ASSERT_TRUE(QuantGemvIds(m.type, Weights(dw), rows, cols, n_expert, dids.as<int32_t>(), n_pairs,
                           dx.as<float>(), x_div, dy.as<float>(), nullptr)
                  .ok());
  const Status sync = Synchronize(nullptr);
  ASSERT_TRUE(sync.ok()) << sync.ToString();  // no fault, also for invalid ids
  const std::vector<float> y = Download<float>(dy, y_len);

  int bad = 0;
  for (int64_t p = 0; p < n_pairs && bad < 5; ++p) {
    const int32_t e = ids[p];
    const float* xr = &x[(p / x_div) * cols];
    for (int64_t r = 0; r < rows && bad < 5; ++r) {
      const float got = y[p * rows + r];
      if (!ValidId(e, n_expert)) {
        if (!std::isnan(got)) {
          ++bad;
          ADD_FAILURE() << "pair " << p << " (id " << e << ") row " << r << ": " << got
                        << ", want NaN";
        }
        continue;
      }
      const float* wr = &m.values[(e * rows + r) * cols];
      double s = 0.0, a = 0.0;
      for (int64_t c = 0; c < cols; ++c) {
        const double prod = static_cast<double>(wr[c]) * xr[c];
        s += prod;
        a += std::abs(prod);
      }
      if (!(std::abs(got - s) <= kRelTol * a)) {  // also catches NaN
        ++bad;
        ADD_FAILURE() << "pair " << p << " (expert " << e << ") row " << r << " got " << got
                      << " want " << s << " (bound " << kRelTol * a << ")";
      }
    }
  }
  for (int64_t r = 0; r < rows; ++r) {
    const float got = y[n_pairs * rows + r];
    uint32_t bits = 0, want = 0;
    std::memcpy(&bits, &got, 4);
    std::memcpy(&want, &kFill, 4);
    ASSERT_EQ(bits, poison_nan ? 0xFFFFFFFFu : want) << "guard row float " << r << " written";
  }
}

class QGemvIds : public ::testing::TestWithParam<GgmlType> {};

// Rows not a multiple of the 4 rows per thread block; cols with a partial last chunk (K-quants: 5
// super-blocks = 4 + 1; others 45 x 32 = 1024 + 416 values), as in qgemv_test.cc.
int64_t ColsFor(GgmlType t) { return GetTypeTraits(t).block_size == 256 ? 5 * 256 : 45 * 32; }

// Repeated ids, every expert of 5 used or not; x_div = 1 (down: one x row per pair) and x_div =
// 3 (gate / up: one hidden row per token for its 3 pairs, 4 tokens), NaN-poisoned y.
TEST_P(QGemvIds, RepeatedIdsBothXDivs) {
  MOESPLIT_SKIP_WITHOUT_GPU();
  const GgmlType t = GetParam();
  const int64_t n_expert = 5, rows = 37;
  const testing::Matrix m = RandomMatrix(t, n_expert * rows, ColsFor(t), 11);
  RunCase(m, n_expert, {3, 0, 3, 4, 3, 1, 0}, 1, true, 12);
  RunCase(m, n_expert, {4, 0, 2, 2, 4, 0, 1, 3, 4, 0, 0, 0}, 3, true, 13);
  // The last token with fewer pairs than x_div: x has ceil(11 / 3) = 4 rows.
  RunCase(m, n_expert, {4, 0, 2, 2, 4, 0, 1, 3, 4, 1, 1}, 3, true, 14);
}

// Ids -1, n_expert, INT32_MAX and INT32_MIN among valid ones: those pairs' rows are NaN, the
// others right, and nothing faults (INT32_MAX * rows * row_bytes is far outside the weights).
TEST_P(QGemvIds, OutOfRangeIdsGiveNaNRowsWithoutFault) {
  MOESPLIT_SKIP_WITHOUT_GPU();
  const GgmlType t = GetParam();
  const int64_t n_expert = 4, rows = 10;
  const testing::Matrix m = RandomMatrix(t, n_expert * rows, ColsFor(t), 21);
  const std::vector<int32_t> ids = {
      2, -1, 3, 4, 0, std::numeric_limits<int32_t>::max(), 1, std::numeric_limits<int32_t>::min(),
      3};
  RunCase(m, n_expert, ids, 1, false, 22);
  RunCase(m, n_expert, ids, 2, false, 23);
}

INSTANTIATE_TEST_SUITE_P(GpuQuant, QGemvIds, ::testing::ValuesIn(testing::kGpuQuantTypes),
                         testing::TypeTestName);

// More pairs than one launch's grid.y (65535): the chunks index ids, x and y with the absolute
// pair, the x rows continue across the boundary (x_div 8 does not divide 65535), and a bad id
// right after the boundary still gives NaN.
TEST(QGemvIdsGpu, PairsBeyondOneGrid) {
  MOESPLIT_SKIP_WITHOUT_GPU();
  const int64_t n_expert = 16, rows = 4, n_pairs = kQGemvMaxBatch + 300;
  const testing::Matrix m = RandomMatrix(GgmlType::kQ8_0, n_expert * rows, 64, 31);
  std::mt19937 rng(32);
  std::uniform_int_distribution<int32_t> pick(0, static_cast<int32_t>(n_expert - 1));
  std::vector<int32_t> ids(n_pairs);
  for (int32_t& e : ids) e = pick(rng);
  ids[kQGemvMaxBatch] = static_cast<int32_t>(n_expert);
  ids[kQGemvMaxBatch - 1] = -7;
  RunCase(m, n_expert, ids, 8, false, 33);
}

// ---------------------------------------------------------------------------------------------
// Argument errors, found before any CUDA call: these run without a GPU.
// ---------------------------------------------------------------------------------------------

const int32_t* FakeIds() { return reinterpret_cast<const int32_t*>(uintptr_t{256}); }

void ExpectInvalid(const Status& s, const std::string& needle) {
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.ToString();
  EXPECT_NE(s.message().find(needle), std::string::npos) << needle << " in " << s.ToString();
  EXPECT_NE(s.message().find("QuantGemvIds"), std::string::npos) << s.ToString();
}

TEST(QGemvIdsArgs, AcceptsDeepSeekExpertShapes) {
  // DeepSeek-V3: 256 experts, gate / up [2048 x 7168] read with x_div = k = 8 for 512 tokens,
  // down [7168 x 2048] with x_div = 1; decode: 8 pairs.
  EXPECT_TRUE(
      CheckQuantGemvIdsArgs(GgmlType::kQ4_K, 2048, 7168, 256, FakeIds(), 4096, nullptr, 8).ok());
  EXPECT_TRUE(
      CheckQuantGemvIdsArgs(GgmlType::kQ6_K, 7168, 2048, 256, FakeIds(), 4096, nullptr, 1).ok());
  EXPECT_TRUE(
      CheckQuantGemvIdsArgs(GgmlType::kBF16, 2048, 7168, 256, FakeIds(), 8, nullptr, 8).ok());
  // x_div larger than n_pairs: every pair reads x row 0.
  EXPECT_TRUE(CheckQuantGemvIdsArgs(GgmlType::kQ8_0, 4, 32, 1, FakeIds(), 3, nullptr, 100).ok());
  EXPECT_TRUE(
      CheckQuantGemvIdsArgs(GgmlType::kQ8_0, 4, 32, 1, FakeIds(), kQGemvMaxPairs, nullptr, 1).ok());
}

TEST(QGemvIdsArgs, RejectsExpertCounts) {
  for (int64_t n_expert : {int64_t{0}, int64_t{-3}, int64_t{1} << 31}) {
    ExpectInvalid(CheckQuantGemvIdsArgs(GgmlType::kQ8_0, 4, 64, n_expert, FakeIds(), 8, nullptr, 1),
                  "n_expert = " + std::to_string(n_expert));
  }
}

TEST(QGemvIdsArgs, RejectsExpertTensorsBeyondInt64Offsets) {
  // F32 [2^20 x 2^30]: 2^52 bytes per expert; (2^63 - 1) / 2^52 = 2047 experts fit, 2048 do not.
  const int64_t rows = int64_t{1} << 20, cols = int64_t{1} << 30;
  EXPECT_TRUE(
      CheckQuantGemvIdsArgs(GgmlType::kF32, rows, cols, 2047, FakeIds(), 1, nullptr, 1).ok());
  ExpectInvalid(CheckQuantGemvIdsArgs(GgmlType::kF32, rows, cols, 2048, FakeIds(), 1, nullptr, 1),
                "2^63");
  ExpectInvalid(CheckQuantGemvIdsArgs(GgmlType::kF32, 4, (int64_t{1} << 36) + 32, 1, FakeIds(), 1,
                                      nullptr, 1),
                "cols = ");
}

TEST(QGemvIdsArgs, RejectsPairCountsXDivAndNullIds) {
  for (int64_t n_pairs : {int64_t{-1}, kQGemvMaxPairs + 1}) {
    ExpectInvalid(CheckQuantGemvIdsArgs(GgmlType::kQ8_0, 4, 64, 8, FakeIds(), n_pairs, nullptr, 1),
                  "n_pairs = " + std::to_string(n_pairs));
  }
  for (int64_t x_div : {int64_t{0}, int64_t{-8}}) {
    ExpectInvalid(CheckQuantGemvIdsArgs(GgmlType::kQ8_0, 4, 64, 8, FakeIds(), 8, nullptr, x_div),
                  "x_div = " + std::to_string(x_div));
  }
  ExpectInvalid(CheckQuantGemvIdsArgs(GgmlType::kQ8_0, 4, 64, 8, nullptr, 8, nullptr, 1),
                "ids is null");
  // No pairs: ids may be null.
  EXPECT_TRUE(CheckQuantGemvIdsArgs(GgmlType::kQ8_0, 4, 64, 8, nullptr, 0, nullptr, 1).ok());
}

TEST(QGemvIdsArgs, CommonChecksNameTheIdsCall) {
  ExpectInvalid(CheckQuantGemvIdsArgs(GgmlType::kTQ1_0, 4, 256, 8, FakeIds(), 8, nullptr, 1),
                "tq1_0");
  ExpectInvalid(CheckQuantGemvIdsArgs(GgmlType::kQ4_K, 4, 128, 8, FakeIds(), 8, nullptr, 1),
                "cols = 128");
  ExpectInvalid(CheckQuantGemvIdsArgs(GgmlType::kQ8_0, 0, 64, 8, FakeIds(), 8, nullptr, 1),
                "rows = 0");
  // x must be 16-byte aligned (float4 loads; every x row then is, cols being a multiple of 32).
  const float* misaligned = reinterpret_cast<const float*>(uintptr_t{4100});
  ExpectInvalid(CheckQuantGemvIdsArgs(GgmlType::kQ8_0, 4, 64, 8, FakeIds(), 8, misaligned, 1),
                "16-byte");
}

TEST(QGemvIdsArgs, LauncherChecksFirstAndZeroPairsQueueNothing) {
  ExpectInvalid(
      QuantGemvIds(GgmlType::kQ8_0, nullptr, 4, 64, 0, FakeIds(), 8, nullptr, 1, nullptr, nullptr),
      "n_expert = 0");
  ExpectInvalid(
      QuantGemvIds(GgmlType::kQ8_0, nullptr, 4, 64, 8, FakeIds(), 8, nullptr, 0, nullptr, nullptr),
      "x_div = 0");
  // No CUDA call at all: Ok also where no device (or driver) exists.
  EXPECT_TRUE(
      QuantGemvIds(GgmlType::kQ8_0, nullptr, 4, 64, 8, nullptr, 0, nullptr, 1, nullptr, nullptr)
          .ok());
}

}  // namespace
}  // namespace moesplit::gpu
