// The ISA tiers a per-tier test suite is instantiated over, and its test-name suffix, shared by
// every "AllTiers" suite: each test skips the tiers this CPU lacks, so a machine runs all it has.
//
//   INSTANTIATE_TEST_SUITE_P(AllTiers, MyTest, testing::AllIsaTiers(),
//   testing::IsaTierParamName());
#pragma once

#include <gtest/gtest.h>

#include <string>

#include "cpu_kernels/cpu_features.h"

namespace moesplit::testing {

// Every tier, lowest first.
inline auto AllIsaTiers() {
  return ::testing::Values(cpu::IsaTier::kScalar, cpu::IsaTier::kAvx2, cpu::IsaTier::kAvx512,
                           cpu::IsaTier::kAvx512Vnni, cpu::IsaTier::kAmx);
}

// The tier's name (scalar, avx2, ...) as the test-name suffix of a suite parameterized by tier.
struct IsaTierParamName {
  std::string operator()(const ::testing::TestParamInfo<cpu::IsaTier>& info) const {
    return std::string(cpu::IsaTierName(info.param));
  }
};

}  // namespace moesplit::testing
