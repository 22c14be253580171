// Where the llama.cpp-made oracle files live (../shared/testdata by default; see CMake option
// MOESPLIT_TESTDATA_DIR). Tests that need them skip with a message when the folder was not found
// at configure time; CI configures with MOESPLIT_REQUIRE_TESTDATA=ON so they can never skip there.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

namespace moesplit::testing {

inline std::string TestDataDir() { return MOESPLIT_TESTDATA_DIR; }
inline std::string TestDataPath(const std::string& rel) { return TestDataDir() + "/" + rel; }

inline std::vector<uint8_t> ReadFileBytes(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
}

// A scratch directory unique to this test binary (under the build tree).
inline std::string ScratchDir() {
  std::string d = std::string(MOESPLIT_BINARY_DIR) + "/test_scratch";
  std::string cmd = "mkdir -p '" + d + "'";
  (void)!std::system(cmd.c_str());
  return d;
}

}  // namespace moesplit::testing

#define MOESPLIT_REQUIRE_TESTDATA()                                                          \
  do {                                                                                       \
    if (::moesplit::testing::TestDataDir().empty())                                          \
      GTEST_SKIP() << "shared/testdata not found at configure time (MOESPLIT_TESTDATA_DIR)"; \
  } while (0)
