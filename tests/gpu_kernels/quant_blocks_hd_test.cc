// The GPU block decoders (gpu_kernels/quant_blocks_hd.h) run here as plain C++ and must give the
// same bits as cpu_kernels' DequantizeRow (bit-exact with ggml) for every value: blocks made by
// QuantizeRow from random data, blocks of random bytes (any scale: negative, zero, subnormal,
// inf, NaN), and hand-written blocks with extreme scales.
#include "gpu_kernels/quant_blocks_hd.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <iterator>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "core/base/dtype.h"
#include "core/base/float16.h"
#include "cpu_kernels/quant/quant.h"

namespace moesplit::gpu {
namespace {

constexpr GgmlType kTypes[] = {
    GgmlType::kQ4_0,   GgmlType::kQ5_0,    GgmlType::kQ4_1,   GgmlType::kQ5_1,    GgmlType::kQ8_0,
    GgmlType::kIQ4_NL, GgmlType::kMXFP4,   GgmlType::kQ2_K,   GgmlType::kQ3_K,    GgmlType::kQ4_K,
    GgmlType::kQ5_K,   GgmlType::kQ6_K,    GgmlType::kIQ4_XS, GgmlType::kIQ2_XXS, GgmlType::kIQ2_XS,
    GgmlType::kIQ2_S,  GgmlType::kIQ3_XXS, GgmlType::kIQ3_S,  GgmlType::kIQ1_S,   GgmlType::kIQ1_M,
    GgmlType::kF32,    GgmlType::kF16,     GgmlType::kBF16};

// Decodes a whole row of n values unit by unit, into a NaN-poisoned buffer.
std::vector<float> DecodeRow(GgmlType t, const std::vector<uint8_t>& bytes, int64_t n) {
  std::vector<float> out(n, std::numeric_limits<float>::quiet_NaN());
  const int bv = HdBlockValues(t), bb = HdBlockBytes(t);
  for (int64_t b = 0; b < n / bv; ++b) {
    for (int j = 0; j < bv / kUnitValues; ++j) {
      EXPECT_TRUE(HdDecodeUnit(t, bytes.data() + b * bb, j, out.data() + b * bv + j * 32));
    }
  }
  return out;
}

// The reference, from a 4-byte aligned copy (DequantizeRow CHECKs the block alignment).
std::vector<float> Reference(GgmlType t, const std::vector<uint8_t>& bytes, int64_t n) {
  std::vector<uint32_t> aligned((bytes.size() + 3) / 4);
  std::memcpy(aligned.data(), bytes.data(), bytes.size());
  std::vector<float> out(n);
  quant::DequantizeRow(t, aligned.data(), out.data(), n);
  return out;
}

void ExpectSameBits(GgmlType t, const std::vector<uint8_t>& bytes, int64_t n,
                    const std::string& what) {
  ASSERT_EQ(static_cast<int64_t>(bytes.size()), RowBytes(t, n));
  const std::vector<float> got = DecodeRow(t, bytes, n);
  const std::vector<float> want = Reference(t, bytes, n);
  int bad = 0;
  for (int64_t i = 0; i < n && bad < 5; ++i) {
    // A NaN only has to stay a NaN: with two NaN operands (Q4_1 / Q5_1: q * d + m with d and m
    // both NaN) which payload survives is the compiler's choice of operand order.
    if (std::isnan(got[i]) && std::isnan(want[i])) continue;
    if (FloatToBits(got[i]) != FloatToBits(want[i])) {
      ++bad;
      ADD_FAILURE() << TypeName(t) << " " << what << ": value " << i << " decoded " << got[i]
                    << " (0x" << std::hex << FloatToBits(got[i]) << "), reference " << want[i]
                    << " (0x" << FloatToBits(want[i]) << std::dec << ")";
    }
  }
}

TEST(QuantBlocksHd, GeometryMatchesGgml) {
  for (GgmlType t : kTypes) {
    const TypeTraits& tr = GetTypeTraits(t);
    const int bv = HdBlockValues(t);
    ASSERT_GT(bv, 0) << tr.name;
    EXPECT_EQ(bv % kUnitValues, 0) << tr.name;
    EXPECT_EQ(RowBytes(t, bv), HdBlockBytes(t)) << tr.name;
  }
  // Types no GGUF weight of a DeepSeek file has, and moesplit's own repacked layouts.
  for (GgmlType t : {GgmlType::kQ8_K, GgmlType::kTQ1_0, GgmlType::kNVFP4, GgmlType::kQ4_K_R16}) {
    EXPECT_FALSE(HdCanDecode(t)) << TypeName(t);
    float out[32];
    EXPECT_FALSE(HdDecodeUnit(t, nullptr, 0, out)) << TypeName(t);
  }
}

// The three parallel statements of what the GPU decodes agree: the X-macro list that the
// dispatch switches expand, the geometry switch (HdCanDecode) and the error messages' string;
// and this file's kTypes covers them all.
TEST(QuantBlocksHd, DecodableListsAgree) {
#define MOESPLIT_TEST_TYPE(t) GgmlType::t,
  constexpr GgmlType kListed[] = {MOESPLIT_HD_DECODABLE_TYPES(MOESPLIT_TEST_TYPE)};
#undef MOESPLIT_TEST_TYPE
  std::string names;
  for (GgmlType t : kListed) {
    EXPECT_TRUE(HdCanDecode(t)) << TypeName(t);
    names += (names.empty() ? "" : ", ") + std::string(TypeName(t));
  }
  EXPECT_EQ(names, kHdDecodableTypes);
  ASSERT_EQ(std::size(kListed), std::size(kTypes));
  for (size_t i = 0; i < std::size(kTypes); ++i) EXPECT_EQ(kListed[i], kTypes[i]) << i;
  // No type decodes without being listed (every value up to 4095; the enumerators end below 100).
  for (int v = 0; v < 4096; ++v) {
    const auto t = static_cast<GgmlType>(v);
    if (!HdCanDecode(t)) continue;
    EXPECT_NE(std::find(std::begin(kListed), std::end(kListed), t), std::end(kListed))
        << "type value " << v << " decodes but is not in MOESPLIT_HD_DECODABLE_TYPES";
  }
}

TEST(QuantBlocksHd, HalfToFloatAllBitPatterns) {
  for (uint32_t h = 0; h < 65536; ++h) {
    const float got = HdHalfToFloat(h);
    const float want = Fp16ToFp32(static_cast<uint16_t>(h));
    ASSERT_EQ(FloatToBits(got), FloatToBits(want)) << "half 0x" << std::hex << h;
  }
}

TEST(QuantBlocksHd, Bf16BothWays) {
  for (uint32_t b = 0; b < 65536; ++b) {
    ASSERT_EQ(FloatToBits(HdBf16ToFloat(b)), FloatToBits(Bf16ToFp32(static_cast<uint16_t>(b))))
        << "bf16 0x" << std::hex << b;
  }
  std::mt19937 rng(7);
  std::vector<uint32_t> bits = {0x00000000u, 0x80000000u, 0x7f800000u, 0xff800000u, 0x7fc00000u,
                                0x7f800001u, 0xffffffffu, 0x3f808000u, 0x3f818000u, 0x3f807fffu,
                                0x7f7fffffu, 0x00000001u, 0x807fffffu, 0x3f7fffffu};
  for (int i = 0; i < 200000; ++i) bits.push_back(rng());
  for (uint32_t u : bits) {
    const float f = BitsToFloat(u);
    ASSERT_EQ(HdFloatToBf16(f), Fp32ToBf16(f)) << "float bits 0x" << std::hex << u;
  }
}

// Values spread over several magnitudes, with a few outliers, as real weights have.
std::vector<float> RandomRow(std::mt19937& rng, int64_t n, float scale) {
  std::normal_distribution<float> normal(0.0f, scale);
  std::vector<float> v(n);
  for (int64_t i = 0; i < n; ++i) {
    v[i] = normal(rng);
    if (i % 97 == 5) v[i] *= 20.0f;
  }
  return v;
}

TEST(QuantBlocksHd, QuantizedRowsMatchReference) {
  std::mt19937 rng(1234);
  const int64_t n = 1024;
  for (GgmlType t : kTypes) {
    for (float scale : {1e-6f, 0.02f, 1.0f, 300.0f}) {
      for (int rep = 0; rep < 8; ++rep) {
        std::vector<float> src = RandomRow(rng, n, scale);
        if (rep == 1) {
          for (int64_t i = 0; i < n; ++i) src[i] = std::fabs(src[i]);  // all positive
        } else if (rep == 2) {
          for (int64_t i = 0; i < n; ++i) src[i] = -std::fabs(src[i]);  // all negative
        } else if (rep == 3) {
          for (int64_t i = 0; i < n / 2; ++i) src[i] = 0.0f;  // zero blocks
        }
        std::vector<uint32_t> buf((RowBytes(t, n) + 3) / 4);
        quant::QuantizeRow(t, src.data(), buf.data(), n);
        std::vector<uint8_t> bytes(RowBytes(t, n));
        std::memcpy(bytes.data(), buf.data(), bytes.size());
        ExpectSameBits(t, bytes, n, "scale " + std::to_string(scale));
      }
    }
  }
}

// Random bytes: every header pattern (f16 scales negative, zero, subnormal, inf, NaN) and every
// packed-scale / high-bit combination.
TEST(QuantBlocksHd, RandomBytesMatchReference) {
  std::mt19937 rng(99);
  for (GgmlType t : kTypes) {
    const int64_t n = 64 * HdBlockValues(t);
    for (int rep = 0; rep < 20; ++rep) {
      std::vector<uint8_t> bytes(RowBytes(t, n));
      for (uint8_t& b : bytes) b = static_cast<uint8_t>(rng());
      ExpectSameBits(t, bytes, n, "random bytes");
    }
  }
}

// Offset of the f16 scale fields in one block, for writing them byte by byte.
struct ScaleFields {
  int d;
  int dmin;  // -1: none
};
ScaleFields FieldsOf(GgmlType t) {
  switch (t) {
    case GgmlType::kQ4_K:
    case GgmlType::kQ5_K:
    case GgmlType::kQ4_1:  // d, m
    case GgmlType::kQ5_1:
      return {0, 2};
    case GgmlType::kQ6_K:
      return {208, -1};
    case GgmlType::kQ2_K:
      return {80, 82};
    case GgmlType::kQ3_K:
      return {108, -1};
    default:
      return {0, -1};  // legacy blocks, IQ4_NL, IQ4_XS, the lattice types but IQ1_M
  }
}

void PutHalf(uint8_t* p, uint16_t h) {
  p[0] = static_cast<uint8_t>(h & 0xff);
  p[1] = static_cast<uint8_t>(h >> 8);
}

TEST(QuantBlocksHd, ExtremeScalesMatchReference) {
  // max half, min normal, largest / smallest subnormal, negative subnormal, -0, zero, -max,
  // inf, NaN, 1.0, -2.5.
  const uint16_t kHalves[] = {0x7bff, 0x0400, 0x03ff, 0x0001, 0x8001, 0x8000,
                              0x0000, 0xfbff, 0x7c00, 0x7e00, 0x3c00, 0xc100};
  std::mt19937 rng(5);
  for (GgmlType t : kTypes) {
    // MXFP4's scale is a byte exponent (every value: Mxfp4Exponents); IQ1_M's f16 is spread
    // over four nibbles (Iq1mSpreadScale).
    if (HdIsPlainFloat(t) || t == GgmlType::kMXFP4 || t == GgmlType::kIQ1_M) continue;
    const ScaleFields f = FieldsOf(t);
    const int bb = HdBlockBytes(t);
    const int nh = static_cast<int>(std::size(kHalves));
    // One block per (d, dmin) pair, random quant bytes.
    const int64_t blocks = static_cast<int64_t>(nh) * (f.dmin >= 0 ? nh : 1);
    std::vector<uint8_t> bytes(blocks * bb);
    for (uint8_t& b : bytes) b = static_cast<uint8_t>(rng());
    for (int64_t i = 0; i < blocks; ++i) {
      uint8_t* blk = bytes.data() + i * bb;
      PutHalf(blk + f.d, kHalves[i % nh]);
      if (f.dmin >= 0) PutHalf(blk + f.dmin, kHalves[i / nh]);
      if (t == GgmlType::kQ6_K && i % 3 == 0) {
        for (int s = 0; s < 16; ++s) blk[192 + s] = s % 2 ? 0x80 : 0x7f;  // scales -128 / 127
      }
      if ((t == GgmlType::kQ4_K || t == GgmlType::kQ5_K) && i % 3 == 0) {
        for (int s = 0; s < 12; ++s) blk[4 + s] = 0xff;  // every scale and min 63
      }
      if (t == GgmlType::kQ2_K && i % 3 == 0) {
        for (int s = 0; s < 16; ++s) blk[s] = s % 2 ? 0xff : 0x00;  // scales and mins 15 / 0
      }
      if (t == GgmlType::kQ3_K && i % 3 != 2) {
        for (int s = 0; s < 12; ++s) blk[96 + s] = i % 3 ? 0x00 : 0xff;  // every scale -32 / 31
      }
      if (t == GgmlType::kIQ4_XS && i % 3 != 2) {
        for (int s = 2; s < 8; ++s) blk[s] = i % 3 ? 0x00 : 0xff;  // every scale -32 / 31
      }
      if (t == GgmlType::kIQ2_XXS && i % 3 == 0) {
        for (int s = 0; s < 8; ++s) blk[2 + 8 * s + 7] |= 0xF0;  // every scale 15
      }
      if ((t == GgmlType::kIQ2_XS || t == GgmlType::kIQ2_S) && i % 3 == 0) {
        for (int s = 0; s < 8; ++s) blk[bb - 8 + s] = 0xff;  // every scale 15
      }
      if (t == GgmlType::kIQ3_S && i % 3 == 0) {
        for (int s = 0; s < 4; ++s) blk[106 + s] = 0xff;  // every scale 15
      }
    }
    ExpectSameBits(t, bytes, blocks * HdBlockValues(t), "extreme scales");
  }
}

// Every E8M0 exponent of MXFP4 (subnormal 2^-128 / 2^-127 at 0 and 1, 2^127 at 255) with
// random codes.
TEST(QuantBlocksHd, Mxfp4Exponents) {
  std::mt19937 rng(11);
  std::vector<uint8_t> bytes(256 * 17);
  for (uint8_t& b : bytes) b = static_cast<uint8_t>(rng());
  for (int e = 0; e < 256; ++e) bytes[17 * e] = static_cast<uint8_t>(e);
  ExpectSameBits(GgmlType::kMXFP4, bytes, 256 * 32, "every exponent");
}

// IQ1_M's super-scale is the top nibbles of its four scale words: the extreme halves spread
// there, with random codes and 3-bit scales.
TEST(QuantBlocksHd, Iq1mSpreadScale) {
  const uint16_t kHalves[] = {0x7bff, 0x0400, 0x03ff, 0x0001, 0x8001, 0x8000,
                              0x0000, 0xfbff, 0x7c00, 0x7e00, 0x3c00, 0xc100};
  std::mt19937 rng(13);
  const int nh = static_cast<int>(std::size(kHalves));
  std::vector<uint8_t> bytes(static_cast<size_t>(nh) * 56);
  for (uint8_t& b : bytes) b = static_cast<uint8_t>(rng());
  for (int i = 0; i < nh; ++i) {
    uint8_t* scales = bytes.data() + 56 * i + 48;  // 4 little-endian u16 words
    for (int w = 0; w < 4; ++w) {
      const int nibble = (kHalves[i] >> (4 * w)) & 0xF;
      scales[2 * w + 1] = static_cast<uint8_t>((scales[2 * w + 1] & 0x0F) | nibble << 4);
    }
  }
  ExpectSameBits(GgmlType::kIQ1_M, bytes, nh * 256, "spread scales");
}

TEST(QuantBlocksHd, PlainFloatElements) {
  std::mt19937 rng(3);
  std::vector<uint8_t> bytes(4 * 100 + 3);
  for (uint8_t& b : bytes) b = static_cast<uint8_t>(rng());
  for (int64_t i = 0; i < 100; ++i) {
    // Unaligned source (offset 1): the decoders read bytes.
    const uint8_t* p = bytes.data() + 1;
    uint16_t h;
    std::memcpy(&h, p + 2 * i, 2);
    uint32_t u;
    std::memcpy(&u, p + 4 * i, 4);
    EXPECT_EQ(FloatToBits(HdPlainElement<GgmlType::kF16>(p, i)), FloatToBits(Fp16ToFp32(h)));
    EXPECT_EQ(FloatToBits(HdPlainElement<GgmlType::kBF16>(p, i)), FloatToBits(Bf16ToFp32(h)));
    EXPECT_EQ(FloatToBits(HdPlainElement<GgmlType::kF32>(p, i)), u);
  }
}

}  // namespace
}  // namespace moesplit::gpu
