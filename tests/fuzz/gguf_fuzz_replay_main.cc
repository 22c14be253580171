// Without libFuzzer: runs every file named on the command line (directories: every file in
// them) through LLVMFuzzerTestOneInput once. Used as a ctest test over the seed corpus.
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

namespace {

void RunOne(const std::filesystem::path& p) {
  std::ifstream f(p, std::ios::binary);
  std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  LLVMFuzzerTestOneInput(bytes.data(), bytes.size());
}

}  // namespace

int main(int argc, char** argv) {
  size_t n = 0;
  for (int i = 1; i < argc; ++i) {
    const std::filesystem::path arg(argv[i]);
    if (std::filesystem::is_directory(arg)) {
      for (const auto& e : std::filesystem::directory_iterator(arg)) {
        if (!e.is_regular_file()) continue;
        RunOne(e.path());
        ++n;
      }
    } else {
      RunOne(arg);
      ++n;
    }
  }
  std::printf("%s: ran %zu inputs\n", argv[0], n);
  return n > 0 ? 0 : 1;  // an empty corpus means a wrong path, not a pass
}
