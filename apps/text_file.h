// Reading a user's text file (prompt, corpus) whole, with an error that names it.
#pragma once

#include <string>

#include "core/base/status.h"

namespace moesplit::app {

// The bytes of `path`; NotFound "PATH: cannot open the <what>" when it cannot be opened.
StatusOr<std::string> ReadTextFile(const std::string& path, const char* what);

}  // namespace moesplit::app
