// The activation quantizers of every ISA tier (GemvKernels::quantize_q8k / quantize_q8_0)
// against the scalar references quant::QuantizeRow(kQ8_K / kQ8_0), byte for byte: random rows
// at many magnitudes, exact rounding ties (k + 0.5 after scaling) and their float neighbours,
// signed ties of the max |x|, zero / -0 blocks, tiny (scale overflows to inf) and huge values,
// and NaN / inf garbage. Outputs are poisoned (0xFF: NaN scales) before each run, and the bytes
// after the row must stay poisoned.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "core/base/dtype.h"
#include "cpu_kernels/cpu_features.h"
#include "cpu_kernels/gemv/gemv.h"
#include "cpu_kernels/quant/quant.h"

namespace moesplit::gemv {
namespace {

using cpu::IsaTier;

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

bool TierAvailable(IsaTier tier) {
  return static_cast<int>(tier) <= static_cast<int>(cpu::BestTier(cpu::DetectCpuFeatures()));
}

int BlockSize(GgmlType type) { return type == GgmlType::kQ8_K ? 256 : 32; }

// The max |x| of a Q8_K / Q8_0 block whose scale is the exact power of two 2^e: Q8_K's
// iscale = -127 / max, Q8_0's d = amax / 127.
float ExactScaleMax(int e) { return std::ldexp(127.0f, e); }

// One row of n values; `kind` picks the pattern (see the switch), per block where it matters.
std::vector<float> MakeRow(GgmlType type, int64_t n, int kind, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_int_distribution<int> level(-127, 126);
  std::vector<float> x(n);  // [n]
  const int bs = BlockSize(type);
  for (int64_t b0 = 0; b0 < n; b0 += bs) {
    float* xb = x.data() + b0;  // [bs] this block
    const int e = static_cast<int>(rng() % 40) - 20;
    switch (kind) {
      case 0:    // normal(0, 1)
      case 1: {  // normal at a per-block magnitude, 1e-45 .. 1e37
        static constexpr float kScales[] = {1e-45f, 1e-42f, 1e-38f, 1e-30f, 1e-6f,
                                            1e-3f,  1.0f,   1e3f,   1e30f,  3e37f};
        const float s = kind == 0 ? 1.0f : kScales[rng() % 10];
        for (int i = 0; i < bs; ++i) xb[i] = normal(rng) * s;
        break;
      }
      case 2:  // ties: (k + 0.5) * 2^e and their float neighbours, one value at +-127 * 2^e
      case 3: {
        for (int i = 0; i < bs; ++i) {
          float v = std::ldexp(static_cast<float>(level(rng)) + 0.5f, e);
          if (kind == 3 && (rng() & 1)) v = std::nextafter(v, (rng() & 1) ? kInf : -kInf);
          xb[i] = v;
        }
        xb[rng() % bs] = (rng() & 1) ? ExactScaleMax(e) : -ExactScaleMax(e);
        break;
      }
      case 4: {  // signed ties of the max |x|: the first one's sign must win
        for (int i = 0; i < bs; ++i) xb[i] = normal(rng);
        const float m = 8.0f + static_cast<float>(rng() % 4);
        for (int t = 0; t < 4; ++t) xb[rng() % bs] = (rng() & 1) ? m : -m;
        break;
      }
      case 5:  // zero / -0 blocks between normal ones
        for (int i = 0; i < bs; ++i) xb[i] = (b0 / bs) % 3 == 0 ? normal(rng) : 0.0f;
        if ((b0 / bs) % 3 == 2) {
          for (int i = 0; i < bs; ++i) xb[i] = -0.0f;
        }
        break;
      default: {  // NaN (plain and with a payload) and +-inf in otherwise normal blocks
        float payload_nan;
        const uint32_t bits = 0x7fc01234u;
        std::memcpy(&payload_nan, &bits, 4);
        const float specials[] = {kNaN, -kNaN, payload_nan, kInf, -kInf};
        for (int i = 0; i < bs; ++i) xb[i] = normal(rng);
        const int count = static_cast<int>(rng() % 3);
        for (int t = 0; t < count; ++t) xb[rng() % bs] = specials[rng() % 5];
        if (rng() % 8 == 0) {
          for (int i = 0; i < bs; ++i) xb[i] = kNaN;
        }
        break;
      }
    }
  }
  return x;
}

constexpr int kNumKinds = 7;
const char* KindName(int kind) {
  static constexpr const char* kNames[kNumKinds] = {
      "normal", "magnitudes", "ties", "tie-neighbours", "max-sign-ties", "zeros", "nan-inf"};
  return kNames[kind];
}

using Param = std::tuple<IsaTier, GgmlType>;

class QuantizeTest : public ::testing::TestWithParam<Param> {};

TEST_P(QuantizeTest, MatchesReferenceBytes) {
  const auto [tier, type] = GetParam();
  if (!TierAvailable(tier)) GTEST_SKIP() << "this CPU lacks ISA tier " << cpu::IsaTierName(tier);
  const QuantizeFn quantize = KernelsFor(tier).Quantizer(type);
  ASSERT_NE(quantize, nullptr);
  const std::vector<int64_t> widths = type == GgmlType::kQ8_K
                                          ? std::vector<int64_t>{256, 512, 768, 2048, 4096, 7168}
                                          : std::vector<int64_t>{32, 64, 96, 224, 1024, 1408};
  constexpr size_t kTail = 64;  // poisoned bytes after the row, must survive
  for (int64_t n : widths) {
    for (int kind = 0; kind < kNumKinds; ++kind) {
      for (uint32_t seed = 1; seed <= 3; ++seed) {
        const std::vector<float> x = MakeRow(type, n, kind, seed * 1000 + kind);
        const size_t bytes = static_cast<size_t>(RowBytes(type, n));
        // u32 storage: 4-byte aligned; the kernel's row starts 4 bytes in (not vector-aligned).
        std::vector<uint32_t> ref((bytes + 3) / 4, 0);
        std::vector<uint32_t> out((4 + bytes + kTail) / 4 + 1, 0xFFFFFFFFu);
        quant::QuantizeRow(type, x.data(), ref.data(), n);
        auto* dst = reinterpret_cast<uint8_t*>(out.data()) + 4;
        quantize(x.data(), dst, n);
        ASSERT_EQ(std::memcmp(dst, ref.data(), bytes), 0)
            << "n=" << n << " kind=" << KindName(kind) << " seed=" << seed
            << ": first diff at byte " << [&] {
                 const auto* r = reinterpret_cast<const uint8_t*>(ref.data());
                 size_t i = 0;
                 while (i < bytes && dst[i] == r[i]) ++i;
                 return i;
               }();
        for (size_t i = 0; i < kTail; ++i) {
          ASSERT_EQ(dst[bytes + i], 0xFF) << "wrote past the row, n=" << n;
        }
      }
    }
  }
}

std::string ParamName(const ::testing::TestParamInfo<Param>& info) {
  return std::string(cpu::IsaTierName(std::get<0>(info.param))) + "_" +
         (std::get<1>(info.param) == GgmlType::kQ8_K ? "Q8_K" : "Q8_0");
}

INSTANTIATE_TEST_SUITE_P(Quantize, QuantizeTest,
                         ::testing::Combine(::testing::Values(IsaTier::kScalar, IsaTier::kAvx2,
                                                              IsaTier::kAvx512,
                                                              IsaTier::kAvx512Vnni),
                                            ::testing::Values(GgmlType::kQ8_K, GgmlType::kQ8_0)),
                         ParamName);

}  // namespace
}  // namespace moesplit::gemv
