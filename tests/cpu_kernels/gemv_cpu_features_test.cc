#include <gtest/gtest.h>

#include <cstdio>
#include <string>

#include "cpu_kernels/cpu_features.h"

namespace moesplit::cpu {
namespace {

TEST(CpuFeaturesTest, ParseIsaCapAcceptsEveryTierName) {
  for (int i = 0; i < kNumIsaTiers; ++i) {
    const IsaTier tier = static_cast<IsaTier>(i);
    StatusOr<IsaTier> parsed = ParseIsaCap(IsaTierName(tier));
    ASSERT_TRUE(parsed.ok()) << IsaTierName(tier);
    EXPECT_EQ(*parsed, tier);
  }
}

TEST(CpuFeaturesTest, ParseIsaCapRejectsUnknownWithHelpfulMessage) {
  for (const char* bad : {"", "AVX2", "avx-512", "sse4", "avx512vnni "}) {
    StatusOr<IsaTier> parsed = ParseIsaCap(bad);
    ASSERT_FALSE(parsed.ok()) << bad;
    EXPECT_NE(parsed.status().message().find("MOESPLIT_MAX_ISA"), std::string::npos);
    EXPECT_NE(parsed.status().message().find("avx512vnni"), std::string::npos);
  }
}

TEST(CpuFeaturesTest, CapTierTakesTheMinimum) {
  EXPECT_EQ(CapTier(IsaTier::kAvx512Vnni, IsaTier::kAvx2), IsaTier::kAvx2);
  EXPECT_EQ(CapTier(IsaTier::kAvx2, IsaTier::kAvx512Vnni), IsaTier::kAvx2);
  EXPECT_EQ(CapTier(IsaTier::kAvx512, IsaTier::kScalar), IsaTier::kScalar);
  EXPECT_EQ(CapTier(IsaTier::kAvx512, IsaTier::kAvx512), IsaTier::kAvx512);
}

TEST(CpuFeaturesTest, BestTierNeedsEveryFeatureOfTheTier) {
  CpuFeatures f;
  EXPECT_EQ(BestTier(f), IsaTier::kScalar);
  f.avx2 = f.fma = true;
  EXPECT_EQ(BestTier(f), IsaTier::kScalar);  // no F16C
  f.f16c = true;
  EXPECT_EQ(BestTier(f), IsaTier::kAvx2);
  f.avx512f = f.avx512bw = f.avx512vl = true;
  EXPECT_EQ(BestTier(f), IsaTier::kAvx2);  // no DQ
  f.avx512dq = true;
  EXPECT_EQ(BestTier(f), IsaTier::kAvx512);
  f.avx512vnni = true;
  EXPECT_EQ(BestTier(f), IsaTier::kAvx512Vnni);
  f.amx_bf16 = true;
  EXPECT_EQ(BestTier(f), IsaTier::kAvx512Vnni);  // the AMX tier needs AMX-INT8
  f.amx_int8 = true;
  EXPECT_EQ(BestTier(f), IsaTier::kAvx512Vnni);  // ... and AVX-512 BF16 (the F32 GEMM's splits)
  f.avx512bf16 = true;
  EXPECT_EQ(BestTier(f), IsaTier::kAmx);
  EXPECT_EQ(IsaTierName(IsaTier::kAmx), "amx");
  EXPECT_EQ(*ParseIsaCap("amx"), IsaTier::kAmx);
}

TEST(CpuFeaturesTest, EffectiveTierAppliesTheEnvCap) {
  CpuFeatures f;
  f.avx2 = f.fma = f.f16c = true;
  f.avx512f = f.avx512bw = f.avx512vl = f.avx512dq = f.avx512vnni = true;
  EXPECT_EQ(*EffectiveIsaTier(f, nullptr), IsaTier::kAvx512Vnni);
  EXPECT_EQ(*EffectiveIsaTier(f, ""), IsaTier::kAvx512Vnni);
  EXPECT_EQ(*EffectiveIsaTier(f, "avx2"), IsaTier::kAvx2);
  EXPECT_EQ(*EffectiveIsaTier(f, "scalar"), IsaTier::kScalar);
  EXPECT_FALSE(EffectiveIsaTier(f, "avx1024").ok());
  CpuFeatures none;
  EXPECT_EQ(*EffectiveIsaTier(none, "avx512vnni"), IsaTier::kScalar);  // cap never raises
}

TEST(CpuFeaturesTest, DetectionIsConsistent) {
  const CpuFeatures f = DetectCpuFeatures();
  // A higher tier's features never appear without the OS state the lower ones need.
  if (f.avx512bw || f.avx512vl || f.avx512dq || f.avx512vnni) {
    EXPECT_TRUE(f.avx512f);
  }
  const IsaTier tier = BestTier(f);
  std::printf("detected tier: %s (avx512bf16=%d amx_int8=%d amx_bf16=%d)\n",
              std::string(IsaTierName(tier)).c_str(), f.avx512bf16, f.amx_int8, f.amx_bf16);
  EXPECT_EQ(DetectCpuFeatures().avx2, f.avx2);  // deterministic
}

}  // namespace
}  // namespace moesplit::cpu
