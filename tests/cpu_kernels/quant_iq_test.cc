// The lattice quantizers IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS, IQ3_S, IQ1_S, IQ1_M (quant_iq2.cc,
// quant_iq23.cc, quant_iq1.cc) beyond the oracle files (quant_oracle_test.cc checks the bytes
// made the oracle's way against ggml's): the grid-neighbour maps, the no-imatrix variants of
// IQ1_M / IQ2_S / IQ3_XXS against their oracle files, error bounds on pure Gaussian data,
// all-zero and tiny blocks.
//
// ggml on the same data (16 rows x 4096, std::mt19937(seed) + normal_distribution(0, sigma),
// seeds 1 and 2, sigma 1 and 0.02), measured with tests/cpu_kernels/ggml_compare/
// iq_quant_vs_ggml.cc against /work/peers/llama.cpp (0a50d9909a34), a flat importance matrix
// for all: rel_rmse 0.3431-0.3436 (IQ2_XXS), 0.2987-0.2998 (IQ2_XS),
// 0.2484-0.2489 (IQ2_S), 0.1813-0.1821 (IQ3_XXS), 0.1366-0.1372 (IQ3_S), 0.4856-0.4863 (IQ1_S),
// 0.4512-0.4516 (IQ1_M), and our bytes were identical to ggml's in all 28 cases. The bounds
// below are those figures rounded up by ~1%.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <random>
#include <vector>

#include "core/base/dtype.h"
#include "cpu_kernels/quant/quant.h"
#include "cpu_kernels/quant/quant_internal.h"
#include "cpu_kernels/quant/quant_iq_lattice.h"
#include "tests/cpu_kernels/quant_test_util.h"
#include "tests/testdata.h"

namespace moesplit::quant {
namespace {

using namespace ::moesplit::quant::testing;
using internal::IqLattice;

std::vector<float> Gauss(int64_t n, float sigma, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, sigma);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

// Every key of valid levels (0..2 in 8 x 2 bits; IQ3: 0..7 in 4 x 3 bits) resolves: on-grid
// keys to the entry with those levels, off-grid keys to a non-empty list whose first entry is at
// the least distance over the whole grid.
void CheckLattice(const IqLattice& lat, int entries) {
  ASSERT_EQ(lat.entries(), entries);
  const int group = lat.group(), bits = group == 4 ? 3 : 2, n_levels = group == 4 ? 8 : 3;
  int on_grid = 0;
  for (int key = 0; key < (1 << (group * bits)); ++key) {
    int l[8];
    bool valid = true;
    for (int j = 0; j < group; ++j) {
      l[j] = (key >> (bits * j)) & ((1 << bits) - 1);
      valid &= l[j] < n_levels;
    }
    if (!valid) continue;
    const int e = lat.Exact(static_cast<uint16_t>(key));
    if (e >= 0) {
      ++on_grid;
      for (int j = 0; j < group; ++j) ASSERT_EQ(lat.Level(e, j), l[j]) << key;
      continue;
    }
    int count = 0;
    const uint16_t* nb = lat.Neighbours(static_cast<uint16_t>(key), &count);
    ASSERT_GT(count, 0) << key;
    auto dist = [&](int g) {
      int d = 0;
      for (int j = 0; j < group; ++j) d += (lat.Level(g, j) - l[j]) * (lat.Level(g, j) - l[j]);
      return d;
    };
    int best = 1 << 30;
    for (int g = 0; g < entries; ++g) best = std::min(best, dist(g));
    ASSERT_EQ(dist(nb[0]), best) << key;
  }
  EXPECT_EQ(on_grid, entries);  // every entry is a distinct key
}

TEST(QuantIqLattice, Iq2XxsMapsAndNeighbours) { CheckLattice(internal::Iq2XxsLattice(), 256); }
TEST(QuantIqLattice, Iq2XsMapsAndNeighbours) { CheckLattice(internal::Iq2XsLattice(), 512); }
TEST(QuantIqLattice, Iq2SMapsAndNeighbours) { CheckLattice(internal::Iq2SLattice(), 1024); }
TEST(QuantIqLattice, Iq3XxsMapsAndNeighbours) { CheckLattice(internal::Iq3XxsLattice(), 256); }
TEST(QuantIqLattice, Iq3SMapsAndNeighbours) { CheckLattice(internal::Iq3SLattice(), 512); }
TEST(QuantIqLattice, Iq1MapsAndNeighbours) { CheckLattice(internal::Iq1Lattice(), 2048); }

TEST(QuantIqLattice, RejectsLevelThreeKeys) {
  EXPECT_DEATH(internal::Iq2XxsLattice().Exact(3), "level past the last");
}

// shared/testdata/quant/iq1_m.q was made by ggml without an importance matrix (x^2 weights);
// QuantIQ1_MNoImatrix runs that weighting through the same search as the registered
// (flat-imatrix) IQ1_M quantizer, and must give the file's bytes.
TEST(QuantIq1M, NoImatrixVariantMatchesOracleBytes) {
  MOESPLIT_REQUIRE_TESTDATA();
  using ::moesplit::testing::ReadFileBytes;
  using ::moesplit::testing::TestDataPath;
  const std::vector<float> in = BytesToFloats(ReadFileBytes(TestDataPath("quant/iq1_m.in.f32")));
  const std::vector<uint8_t> want = ReadFileBytes(TestDataPath("quant/iq1_m.q"));
  ASSERT_EQ(in.size(), 8u * 2048);
  ASSERT_EQ(want.size(), 8u * 8 * 56);
  std::vector<uint8_t> got = PoisonBytes(want.size());
  internal::QuantIQ1_MNoImatrix(in.data(), got.data(), static_cast<int64_t>(in.size()) / 256);
  size_t differing = 0;
  for (size_t i = 0; i < want.size(); ++i) differing += got[i] != want[i];
  EXPECT_EQ(differing, 0u);
  // The registered quantizer weighs differently, so its bytes differ (and its error is lower).
  std::vector<uint8_t> flat = PoisonBytes(want.size());
  for (int r = 0; r < 8; ++r) {
    QuantizeRow(GgmlType::kIQ1_M, in.data() + r * 2048, flat.data() + r * 448, 2048);
  }
  EXPECT_NE(flat, want);
}

// The same for IQ2_S, IQ3_XXS and IQ3_S: their oracle files are ggml's quantize_row_*_ref (no
// importance matrix: w = sigma^2 / 4 + x^2, x^2, x^2), the registered quantizers take a flat
// one.
void ExpectNoImatrixVariantBytes(const char* name, GgmlType type, int block_bytes,
                                 void (*variant)(const float*, void*, int64_t)) {
  using ::moesplit::testing::ReadFileBytes;
  using ::moesplit::testing::TestDataPath;
  const std::string stem = std::string("quant/") + name;
  const std::vector<float> in = BytesToFloats(ReadFileBytes(TestDataPath(stem + ".in.f32")));
  const std::vector<uint8_t> want = ReadFileBytes(TestDataPath(stem + ".q"));
  ASSERT_EQ(in.size(), 8u * 2048);
  ASSERT_EQ(want.size(), 8u * 8 * block_bytes);
  std::vector<uint8_t> got = PoisonBytes(want.size());
  variant(in.data(), got.data(), static_cast<int64_t>(in.size()) / 256);
  size_t differing = 0;
  for (size_t i = 0; i < want.size(); ++i) differing += got[i] != want[i];
  EXPECT_EQ(differing, 0u) << name;
  std::vector<uint8_t> flat = PoisonBytes(want.size());
  for (int r = 0; r < 8; ++r) {
    QuantizeRow(type, in.data() + r * 2048, flat.data() + r * 8 * block_bytes, 2048);
  }
  EXPECT_NE(flat, want) << name;
}

TEST(QuantIq2S, NoImatrixVariantMatchesOracleBytes) {
  MOESPLIT_REQUIRE_TESTDATA();
  ExpectNoImatrixVariantBytes("iq2_s", GgmlType::kIQ2_S, 82, internal::QuantIQ2_SNoImatrix);
}

TEST(QuantIq3Xxs, NoImatrixVariantMatchesOracleBytes) {
  MOESPLIT_REQUIRE_TESTDATA();
  ExpectNoImatrixVariantBytes("iq3_xxs", GgmlType::kIQ3_XXS, 98, internal::QuantIQ3_XXSNoImatrix);
}

TEST(QuantIq3S, NoImatrixVariantMatchesOracleBytes) {
  MOESPLIT_REQUIRE_TESTDATA();
  ExpectNoImatrixVariantBytes("iq3_s", GgmlType::kIQ3_S, 110, internal::QuantIQ3_SNoImatrix);
}

struct BoundCase {
  GgmlType type;
  double bound;  // rel_rmse bound on the Gaussian data (ggml's figure, see top, + ~1%)
};

class QuantIqGaussianTest : public ::testing::TestWithParam<BoundCase> {};

TEST_P(QuantIqGaussianTest, ErrorWithinGgmlBound) {
  const BoundCase& c = GetParam();
  for (uint32_t seed : {1u, 2u}) {
    for (float sigma : {1.0f, 0.02f}) {
      const std::vector<float> in = Gauss(16 * 4096, sigma, seed);
      const RoundTrip rt = QuantizeDequantize(c.type, in, 4096);
      ASSERT_TRUE(AllFinite(rt.deq)) << TypeName(c.type);
      const double rmse = RelRmse(in, rt.deq);
      EXPECT_LE(rmse, c.bound) << TypeName(c.type) << " seed " << seed << " sigma " << sigma;
      // A quantizer that wrote garbage scales would be far off; one that wrote nothing would
      // leave the 0xFF poison, which decodes to non-finite or huge values.
      EXPECT_GT(rmse, 0.1) << TypeName(c.type);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    Types, QuantIqGaussianTest,
    ::testing::Values(BoundCase{GgmlType::kIQ2_XXS, 0.347}, BoundCase{GgmlType::kIQ2_XS, 0.303},
                      BoundCase{GgmlType::kIQ2_S, 0.252}, BoundCase{GgmlType::kIQ3_XXS, 0.184},
                      BoundCase{GgmlType::kIQ3_S, 0.139}, BoundCase{GgmlType::kIQ1_S, 0.491},
                      BoundCase{GgmlType::kIQ1_M, 0.456}),
    [](const auto& info) { return std::string(TypeName(info.param.type)); });

// All-zero super-blocks decode to exact zeros; a block of one non-zero value keeps its sign
// and stays finite (sub-blocks below the threshold get scale 0).
TEST(QuantIqEdge, ZeroAndSparseBlocks) {
  for (GgmlType t : {GgmlType::kIQ2_XXS, GgmlType::kIQ2_XS, GgmlType::kIQ2_S, GgmlType::kIQ3_XXS,
                     GgmlType::kIQ3_S, GgmlType::kIQ1_S, GgmlType::kIQ1_M}) {
    std::vector<float> in(512, 0.0f);
    in[256 + 37] = -3.0f;
    const RoundTrip rt = QuantizeDequantize(t, in, 512);
    ASSERT_TRUE(AllFinite(rt.deq)) << TypeName(t);
    for (int i = 0; i < 256; ++i) ASSERT_EQ(rt.deq[i], 0.0f) << TypeName(t) << " " << i;
    EXPECT_LT(rt.deq[256 + 37], 0.0f) << TypeName(t);
  }
}

}  // namespace
}  // namespace moesplit::quant
