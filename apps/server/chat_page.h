// The chat page served at / (apps/server/chat_page.html, built into the binary by
// apps/server/embed_file.cmake: one static file, no external resources).
#pragma once

#include <string_view>

namespace moesplit::app::server {

std::string_view ChatPageHtml();

}  // namespace moesplit::app::server
