// ZeroedPages: zero-filled, resident only where written, and a clear error for a mapping the
// machine cannot back.
#include "core/base/zeroed_pages.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>

namespace moesplit {
namespace {

TEST(ZeroedPages, ZeroAndResidentOnlyWhereWritten) {
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  constexpr size_t kMiB = 1 << 20;
  auto a = ZeroedArray<float>::Map(64 * kMiB / sizeof(float), "test buffer", "none");
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  EXPECT_EQ(a->size(), 64 * kMiB / sizeof(float));
  // Nothing written yet: at most a few pages (THP "always" could back one huge page on a read).
  EXPECT_LE(a->ResidentBytes(), 2 * kMiB);
  EXPECT_EQ((*a)[12345], 0.0f);
  std::memset(a->data(), 0x3F, 3 * page);  // three pages
  EXPECT_GE(a->ResidentBytes(), 3 * page);
  EXPECT_LE(a->ResidentBytes(), 2 * kMiB + 3 * page);
  EXPECT_EQ((*a)[a->size() - 1], 0.0f);  // untouched end still zero
}

TEST(ZeroedPages, EmptyAndMove) {
  auto e = ZeroedPages::Map(0, "nothing", "none");
  ASSERT_TRUE(e.ok());
  EXPECT_EQ(e->data(), nullptr);
  auto a = ZeroedPages::Map(4096, "a page", "none");
  ASSERT_TRUE(a.ok());
  a->data()[7] = 9;
  ZeroedPages b = std::move(*a);
  EXPECT_EQ(a->data(), nullptr);
  EXPECT_EQ(b.data()[7], 9);
}

TEST(ZeroedPages, RefusedMappingNamesWhatAndRam) {
  // 2^62 bytes: more than any overcommit check accepts.
  auto a = ZeroedPages::Map(size_t{1} << 62, "KV cache of test", "lower -c");
  ASSERT_FALSE(a.ok());
  const std::string m = a.status().ToString();
  EXPECT_NE(m.find("RESOURCE_EXHAUSTED"), std::string::npos) << m;
  EXPECT_NE(m.find("KV cache of test"), std::string::npos) << m;
  EXPECT_NE(m.find("GB of RAM: lower -c"), std::string::npos) << m;
  EXPECT_GT(PhysicalMemoryBytes(), uint64_t{1} << 26);
}

}  // namespace
}  // namespace moesplit
