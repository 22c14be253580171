#include <gtest/gtest.h>

#include <cmath>

#include "core/base/dtype.h"
#include "core/base/float16.h"
#include "core/base/status.h"

namespace moesplit {
namespace {

StatusOr<int> Half(int x) {
  if (x % 2) return InvalidArgumentError("odd value ", x);
  return x / 2;
}

Status Quarter(int x, int* out) {
  MOESPLIT_ASSIGN_OR_RETURN(int h, Half(x));
  MOESPLIT_ASSIGN_OR_RETURN(*out, Half(h));
  return Status::Ok();
}

TEST(Status, MacrosPropagateErrors) {
  int q = 0;
  EXPECT_TRUE(Quarter(8, &q).ok());
  EXPECT_EQ(q, 2);
  Status s = Quarter(6, &q);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s.ToString(), "INVALID_ARGUMENT: odd value 3");
  EXPECT_EQ(s.WithContext("model.gguf").message(), "model.gguf: odd value 3");
}

TEST(Status, StatusOrFromOkIsInternalError) {
  StatusOr<int> v(Status::Ok());
  EXPECT_FALSE(v.ok());
  EXPECT_EQ(v.status().code(), StatusCode::kInternal);
}

TEST(StatusDeathTest, CheckAbortsWithMessage) {
  EXPECT_DEATH(MOESPLIT_CHECK(1 + 1 == 3, "arithmetic is ", "broken"), "arithmetic is broken");
  StatusOr<int> v = Half(3);
  EXPECT_DEATH((void)v.value(), "odd value 3");
}

TEST(Dtype, BlockGeometry) {
  // Bits per weight: Q4_K 4.5, Q6_K 6.5625, Q8_0 8.5, Q4_0 4.5.
  EXPECT_EQ(RowBytes(GgmlType::kQ4_K, 7168), 7168 / 256 * 144);
  EXPECT_EQ(RowBytes(GgmlType::kQ6_K, 256), 210);
  EXPECT_EQ(RowBytes(GgmlType::kQ8_0, 64), 68);
  EXPECT_EQ(RowBytes(GgmlType::kBF16, 3), 6);
  EXPECT_EQ(FindTypeTraits(4), nullptr);   // removed Q4_2
  EXPECT_EQ(FindTypeTraits(31), nullptr);  // removed Q4_0_4_4
  EXPECT_EQ(FindTypeTraits(43), nullptr);
  ASSERT_NE(FindTypeTraits(41), nullptr);
  EXPECT_EQ(FindTypeTraits(41)->block_size, 128);  // q1_0: 128 values in 18 bytes
  EXPECT_EQ(FindTypeTraits(99), nullptr);
  ASSERT_NE(FindTypeTraits(39), nullptr);
  EXPECT_STREQ(FindTypeTraits(39)->name, "mxfp4");
}

TEST(Dtype, NamesRoundTrip) {
  for (uint32_t id = 0; id < kGgmlTypeIdLimit; ++id) {
    const TypeTraits* tr = FindTypeTraits(id);
    if (!tr) continue;
    auto t = TypeFromName(tr->name);
    ASSERT_TRUE(t.ok()) << tr->name;
    EXPECT_EQ(static_cast<uint32_t>(*t), id);
  }
  EXPECT_EQ(*TypeFromName("Q4_K"), GgmlType::kQ4_K);
  EXPECT_FALSE(TypeFromName("q4_k_m").ok());
  EXPECT_EQ(FileTypeName(15), "Q4_K_M");
  EXPECT_EQ(FileTypeName(1000), "unknown(1000)");
  EXPECT_EQ(FileTypeDescription(15), "Q4_K - Medium");
  EXPECT_EQ(FileTypeDescription(0), "all F32");
  EXPECT_EQ(FileTypeDescription(1000), "unknown, may not work");
}

TEST(Dtype, RowBytesChecksBlockMultiple) {
  EXPECT_DEATH(RowBytes(GgmlType::kQ4_K, 128), "not a multiple");
}

TEST(Float16, AllHalvesRoundTrip) {
  for (uint32_t h = 0; h < 65536; ++h) {
    const float f = Fp16ToFp32(static_cast<uint16_t>(h));
    if (std::isnan(f)) {
      EXPECT_TRUE(std::isnan(Fp16ToFp32(Fp32ToFp16(f))));
      continue;
    }
    EXPECT_EQ(Fp32ToFp16(f), h) << "half 0x" << std::hex << h;
  }
}

TEST(Float16, RoundsToNearestEven) {
  EXPECT_EQ(Fp32ToFp16(1.0f + 1.0f / 2048), 0x3c00);  // exactly halfway: even (down)
  EXPECT_EQ(Fp32ToFp16(1.0f + 3.0f / 2048), 0x3c02);  // halfway: even (up)
  EXPECT_EQ(Fp32ToFp16(65520.0f), 0x7c00);            // rounds to inf
  EXPECT_EQ(Fp32ToFp16(65519.0f), 0x7bff);
  EXPECT_EQ(Fp32ToFp16(1e-8f), 0x0000);
  EXPECT_EQ(Fp32ToFp16(-3e-8f), 0x8001);             // rounds up to the smallest subnormal
  EXPECT_EQ(Fp32ToBf16(1.0f + 1.0f / 256), 0x3f80);  // halfway: even
  EXPECT_EQ(Fp32ToBf16(1.0f + 3.0f / 256), 0x3f82);
  EXPECT_TRUE(std::isnan(Bf16ToFp32(Fp32ToBf16(std::nanf("")))));
}

}  // namespace
}  // namespace moesplit
