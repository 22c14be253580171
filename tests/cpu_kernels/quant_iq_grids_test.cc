// The transcribed IQ lattice tables (iq_grids.h) and corners of the decode-only types that
// ggml's oracle blocks (quant_oracle_test.cc) do not reach: the tables' shapes and byte values,
// a few entries spot-checked against ggml-common.h, the sign rule, and hand-built blocks with
// extreme scales.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <set>
#include <vector>

#include "core/base/float16.h"
#include "cpu_kernels/quant/blocks_iq.h"
#include "cpu_kernels/quant/iq_grids.h"
#include "cpu_kernels/quant/quant.h"

namespace moesplit::quant {
namespace {

using namespace ::moesplit::quant::internal;

// The set of byte values over all entries, and whether the entries are pairwise distinct.
template <typename E, size_t N>
std::set<int> ByteValues(const E (&table)[N], bool* distinct) {
  std::set<int> bytes;
  std::set<E> entries(table, table + N);
  *distinct = entries.size() == N;
  for (E e : table) {
    for (size_t j = 0; j < sizeof(E); ++j) bytes.insert(static_cast<int>((e >> (8 * j)) & 0xFF));
  }
  return bytes;
}

TEST(IqGrids, ShapesAndByteValues) {
  EXPECT_EQ(std::size(kIq2XxsGrid), 256u);
  EXPECT_EQ(std::size(kIq2XsGrid), 512u);
  EXPECT_EQ(std::size(kIq2SGrid), 1024u);
  EXPECT_EQ(std::size(kIq3XxsGrid), 256u);
  EXPECT_EQ(std::size(kIq3SGrid), 512u);
  EXPECT_EQ(std::size(kIq1SGrid), 2048u);
  bool distinct = false;
  const std::set<int> iq2 = {8, 25, 43};
  EXPECT_EQ(ByteValues(kIq2XxsGrid, &distinct), iq2);
  EXPECT_TRUE(distinct);
  EXPECT_EQ(ByteValues(kIq2XsGrid, &distinct), iq2);
  EXPECT_TRUE(distinct);
  EXPECT_EQ(ByteValues(kIq2SGrid, &distinct), iq2);
  EXPECT_TRUE(distinct);
  EXPECT_EQ(ByteValues(kIq3XxsGrid, &distinct), (std::set<int>{4, 12, 20, 28, 36, 44, 52, 62}));
  EXPECT_TRUE(distinct);
  EXPECT_EQ(ByteValues(kIq3SGrid, &distinct), (std::set<int>{1, 3, 5, 7, 9, 11, 13, 15}));
  EXPECT_TRUE(distinct);
  EXPECT_EQ(ByteValues(kIq1SGrid, &distinct), (std::set<int>{0x00, 0x01, 0xFF}));
  EXPECT_TRUE(distinct);
}

// Entries 0, 1, N/2 and N-1 of each table as ggml-common.h has them.
TEST(IqGrids, SpotChecksAgainstGgml) {
  EXPECT_EQ(kIq2XxsGrid[1], 0x080808080808082bu);
  EXPECT_EQ(kIq2XxsGrid[128], 0x082b2b0808082b08u);
  EXPECT_EQ(kIq2XxsGrid[255], 0x2b2b2b1908081908u);
  EXPECT_EQ(kIq2XsGrid[256], 0x190808080808192bu);
  EXPECT_EQ(kIq2XsGrid[511], 0x2b2b2b2b2b2b2b2bu);
  EXPECT_EQ(kIq2SGrid[512], 0x19080819082b1919u);
  EXPECT_EQ(kIq2SGrid[1023], 0x2b2b2b2b2b2b2b2bu);
  EXPECT_EQ(kIq3XxsGrid[1], 0x04040414u);
  EXPECT_EQ(kIq3XxsGrid[128], 0x141c3e04u);
  EXPECT_EQ(kIq3XxsGrid[255], 0x3e341c04u);
  EXPECT_EQ(kIq3SGrid[256], 0x05090507u);
  EXPECT_EQ(kIq3SGrid[511], 0x0f0f0101u);
  EXPECT_EQ(kIq1SGrid[0], 0xffffffffffffffffu);
  EXPECT_EQ(kIq1SGrid[1024], 0x0000000000ff0100u);
  EXPECT_EQ(kIq1SGrid[2047], 0x0101010101010101u);
}

// ggml's ksigns_iq2xs, first and last rows: the rule Iq2SignByte computes.
TEST(IqGrids, SignRuleIsGgmlsTable) {
  const uint8_t first[16] = {0, 129, 130, 3, 132, 5, 6, 135, 136, 9, 10, 139, 12, 141, 142, 15};
  const uint8_t last[16] = {240, 113, 114, 243, 116, 245, 246, 119,
                            120, 249, 250, 123, 252, 125, 126, 255};
  for (int i = 0; i < 16; ++i) {
    EXPECT_EQ(Iq2SignByte(i), first[i]) << i;
    EXPECT_EQ(Iq2SignByte(112 + i), last[i]) << 112 + i;
  }
  for (int s = 0; s < 128; ++s) EXPECT_EQ(__builtin_popcount(Iq2SignByte(s)) % 2, 0) << s;
}

// MXFP4's E8M0 scale over its whole range: 2^(e - 128) times the doubled E2M1 level, exact,
// subnormal for e < 2 (ggml builds those from bits), 2^127 (not NaN) for e = 255.
TEST(IqDecode, Mxfp4ScaleRange) {
  for (int e : {0, 1, 2, 127, 128, 200, 254, 255}) {
    BlockMXFP4 b;
    b.e = static_cast<uint8_t>(e);
    for (int j = 0; j < 16; ++j) b.qs[j] = static_cast<uint8_t>(j | (15 - j) << 4);
    float y[32];
    DequantizeRow(GgmlType::kMXFP4, &b, y, 32);
    for (int j = 0; j < 16; ++j) {
      EXPECT_EQ(y[j], std::ldexp(static_cast<float>(kMxfp4Values[j]), e - 128)) << e << " " << j;
      EXPECT_EQ(y[16 + j], std::ldexp(static_cast<float>(kMxfp4Values[15 - j]), e - 128))
          << e << " " << j;
    }
  }
}

// A zero super-scale decodes to zeros whose sign is ggml's: (0 * g) * -1 = -0.0 where the
// sign bit is set (IQ2_XS: sign index 1 makes value 0 and value 7 negative).
TEST(IqDecode, ZeroScaleKeepsGgmlsSignedZeros) {
  BlockIQ2_XS b;
  std::memset(&b, 0, sizeof(b));
  b.d = Fp32ToFp16(0.0f);
  for (uint16_t& q : b.qs) q = static_cast<uint16_t>(1u << 9);  // grid 0, sign index 1
  std::vector<float> y(256);
  DequantizeRow(GgmlType::kIQ2_XS, &b, y.data(), 256);
  for (int i = 0; i < 256; ++i) {
    const bool negative = i % 8 == 0 || i % 8 == 7;  // Iq2SignByte(1) = 0b10000001
    EXPECT_EQ(std::signbit(y[i]), negative) << i;
    EXPECT_EQ(y[i], 0.0f) << i;
  }
}

// IQ1_M's super-scale is spread over the top nibbles of its four scale words: d = 1.0 (f16
// 0x3C00) with every 3-bit scale 0 and grid entry 2047 (all +1), delta +0.125: 1.125.
TEST(IqDecode, Iq1mGathersTheScaleNibbles) {
  BlockIQ1_M b;
  std::memset(&b, 0, sizeof(b));
  const uint16_t d = Fp32ToFp16(1.0f);
  const uint16_t words[4] = {
      static_cast<uint16_t>((d & 0xF) << 12), static_cast<uint16_t>((d >> 4 & 0xF) << 12),
      static_cast<uint16_t>((d >> 8 & 0xF) << 12), static_cast<uint16_t>((d >> 12 & 0xF) << 12)};
  std::memcpy(b.scales, words, sizeof(words));
  std::memset(b.qs, 0xFF, sizeof(b.qs));
  std::memset(b.qh, 0x77, sizeof(b.qh));  // index bits 7, delta sign + (bit 3 clear)
  std::vector<float> y(256);
  DequantizeRow(GgmlType::kIQ1_M, &b, y.data(), 256);
  for (int i = 0; i < 256; ++i) EXPECT_EQ(y[i], 1.125f) << i;
}

}  // namespace
}  // namespace moesplit::quant
