# cmake -DIN=file -DOUT=file.cc -DNAME=Function -P embed_file.cmake
# Writes OUT defining `std::string_view moesplit::app::server::NAME()` with IN's bytes.
file(READ "${IN}" hex HEX)
string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," bytes "${hex}")
string(REGEX REPLACE "(0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,)" "\\1\n" bytes "${bytes}")
file(WRITE "${OUT}" "// Generated from ${IN} by embed_file.cmake: do not edit.\n#include <string_view>\nnamespace moesplit::app::server {\nnamespace {\nconstexpr unsigned char kBytes[] = {\n${bytes}0};\n}  // namespace\nstd::string_view ${NAME}() { return {reinterpret_cast<const char*>(kBytes), sizeof(kBytes) - 1}; }\n}  // namespace moesplit::app::server\n")
