#include "apps/text_file.h"

#include <cerrno>
#include <cstring>
#include <fstream>
#include <iterator>

namespace moesplit::app {

StatusOr<std::string> ReadTextFile(const std::string& path, const char* what) {
  std::ifstream f(path, std::ios::binary);
  if (!f) return NotFoundError(path, ": cannot open the ", what, " (", std::strerror(errno), ")");
  return std::string(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
}

}  // namespace moesplit::app
