// Corrupted copies of ds-tiny: truncated at every header byte and at sampled data offsets, and
// with bytes flipped all over the header. Each must give an error or a valid parse — never a
// crash, a hang or a read outside the buffer (run under ASan to check the last part).
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <random>

#include "tests/core/gguf/gguf_test_util.h"
#include "tests/testdata.h"

namespace moesplit::gguf {
namespace {

using ::moesplit::testing::ReadFileBytes;
using ::moesplit::testing::ScratchDir;
using ::moesplit::testing::TestDataPath;
using testing::TouchEverything;

constexpr uint64_t kDataOffset = 29280;  // ds-tiny's data section (README)

class GgufCorrupt : public ::testing::Test {
 protected:
  void SetUp() override {
    if (::moesplit::testing::TestDataDir().empty()) GTEST_SKIP() << "no testdata";
    bytes_ = ReadFileBytes(TestDataPath("models/ds-tiny-Q4_K_M.gguf"));
    ASSERT_EQ(bytes_.size(), 4372256u);
  }
  std::vector<uint8_t> bytes_;
};

TEST_F(GgufCorrupt, TruncatedAnywhereInHeader) {
  // The heap copy of each prefix makes ASan catch a read one byte past the truncation point.
  for (uint64_t n = 0; n <= kDataOffset; ++n) {
    std::vector<uint8_t> prefix(bytes_.begin(), bytes_.begin() + n);
    StatusOr<ParsedGguf> r = ParseGguf(prefix.data(), n, "ds.gguf");
    ASSERT_FALSE(r.ok()) << "truncated at " << n;
    ASSERT_EQ(r.status().code(), StatusCode::kDataLoss) << r.status().ToString();
    ASSERT_EQ(r.status().message().rfind("ds.gguf: offset ", 0), 0u) << r.status().message();
  }
}

TEST_F(GgufCorrupt, TruncatedInData) {
  std::mt19937_64 rng(42);
  for (int i = 0; i < 300; ++i) {
    const uint64_t n = kDataOffset + 1 + rng() % (bytes_.size() - kDataOffset - 1);
    StatusOr<ParsedGguf> r = ParseGguf(bytes_.data(), n, "ds.gguf");
    ASSERT_FALSE(r.ok()) << "truncated at " << n;
    ASSERT_NE(r.status().message().find("run past the end"), std::string::npos)
        << r.status().message();
  }
  // Through the file API: the message names the real path.
  const std::string path = ScratchDir() + "/ds-truncated.gguf";
  std::FILE* f = std::fopen(path.c_str(), "wb");
  ASSERT_NE(f, nullptr);
  std::fwrite(bytes_.data(), 1, bytes_.size() - 1000, f);
  std::fclose(f);
  auto g = GgufFile::Open(path);
  ASSERT_FALSE(g.ok());
  EXPECT_EQ(g.status().message().rfind(path + ": offset ", 0), 0u) << g.status().message();
}

TEST_F(GgufCorrupt, FlippedHeaderBytes) {
  // Every 3rd header byte, flipped in place in the full image (then restored), so that a flip
  // that still parses yields a complete model whose tensors are touched.
  std::mt19937_64 rng(7);
  int parsed = 0, failed = 0;
  const uint8_t kFlips[] = {0xff, 0x01, 0x80, 0x10};
  for (uint64_t pos = 0; pos < kDataOffset; pos += 3) {
    const uint8_t flip = kFlips[rng() % 4];
    bytes_[pos] ^= flip;
    StatusOr<ParsedGguf> r = ParseGguf(bytes_.data(), bytes_.size(), "ds.gguf");
    if (r.ok()) {
      ++parsed;
      TouchEverything(*r);
    } else {
      ++failed;
      ASSERT_EQ(r.status().message().rfind("ds.gguf: offset ", 0), 0u) << r.status().message();
    }
    bytes_[pos] ^= flip;
  }
  // Most header bytes are string contents (token texts), which parse fine when flipped.
  EXPECT_GT(parsed, 0);
  EXPECT_GT(failed, 100);
}

TEST_F(GgufCorrupt, RandomMultiByteDamage) {
  std::mt19937_64 rng(99);
  std::vector<uint8_t> header(bytes_.begin(), bytes_.begin() + kDataOffset);
  for (int iter = 0; iter < 2000; ++iter) {
    std::vector<uint8_t> img = header;
    const int n = 1 + static_cast<int>(rng() % 8);
    for (int k = 0; k < n; ++k) img[rng() % img.size()] = static_cast<uint8_t>(rng());
    img.resize(rng() % (img.size() + 1));
    StatusOr<ParsedGguf> r = ParseGguf(img.data(), img.size(), "ds.gguf");
    if (r.ok()) TouchEverything(*r);
  }
}

}  // namespace
}  // namespace moesplit::gguf
