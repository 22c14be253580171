#include "core/tokenizer/unicode.h"

namespace moesplit::tokenizer {
namespace {

bool IsContinuation(uint8_t b) { return (b & 0xC0) == 0x80; }

// Bytes a well-formed sequence starting with `lead` has: 1 for ASCII and for bytes that cannot
// start a sequence (10xxxxxx, 11111xxx).
int ExpectedLen(uint8_t lead) {
  if (lead < 0xC0) return 1;
  if (lead < 0xE0) return 2;
  if (lead < 0xF0) return 3;
  if (lead < 0xF8) return 4;
  return 1;
}

}  // namespace

uint32_t DecodeUtf8At(std::string_view text, size_t* pos) {
  const size_t i = *pos;
  const auto b = [&](size_t k) { return static_cast<uint8_t>(text[i + k]); };
  const uint8_t b0 = b(0);
  const int len = ExpectedLen(b0);
  if (b0 < 0x80) {
    *pos += 1;
    return b0;
  }
  // A malformed sequence: stray continuation byte, 0xF8..0xFF, truncated or bad continuation.
  bool ok = len > 1 && i + len <= text.size();
  for (int k = 1; ok && k < len; ++k) ok = IsContinuation(b(k));
  if (!ok) {
    *pos += 1;
    return kReplacementChar;
  }
  *pos += len;
  // Payload bits: 110xxxxx 10xxxxxx -> 5+6, 1110xxxx -> 4+6+6, 11110xxx -> 3+6+6+6.
  uint32_t cp = b0 & (0x7F >> len);
  for (int k = 1; k < len; ++k) cp = (cp << 6) | (b(k) & 0x3F);
  return cp;
}

std::vector<uint32_t> DecodeUtf8(std::string_view text) {
  std::vector<uint32_t> cps;
  cps.reserve(text.size());
  size_t pos = 0;
  while (pos < text.size()) cps.push_back(DecodeUtf8At(text, &pos));
  return cps;
}

void AppendUtf8(uint32_t cp, std::string* out) {
  if (cp > 0x10FFFF) cp = kReplacementChar;
  if (cp < 0x80) {
    out->push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out->push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out->push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out->push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

size_t CompleteUtf8Prefix(std::string_view bytes) {
  const size_t n = bytes.size();
  // A pending sequence has its lead byte among the last 3 bytes, followed only by
  // continuation bytes, and announces more bytes than are there.
  for (size_t back = 1; back <= 3 && back <= n; ++back) {
    const uint8_t c = static_cast<uint8_t>(bytes[n - back]);
    if (IsContinuation(c)) continue;
    return ExpectedLen(c) > static_cast<int>(back) ? n - back : n;
  }
  return n;
}

ByteLevelMap::ByteLevelMap() {
  cp_to_byte_.fill(-1);
  uint32_t next_extra = 0x100;  // characters for the bytes that do not stand for themselves
  for (int b = 0; b < 256; ++b) {
    const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE;
    const uint32_t cp = printable ? static_cast<uint32_t>(b) : next_extra++;
    byte_to_cp_[b] = cp;
    cp_to_byte_[cp] = static_cast<int16_t>(b);
    AppendUtf8(cp, &byte_to_utf8_[b]);
  }
}

const ByteLevelMap& ByteLevelMap::Get() {
  static const ByteLevelMap map;  // immutable after construction (thread-safe init)
  return map;
}

std::string ByteLevelEncode(std::string_view bytes) {
  const ByteLevelMap& m = ByteLevelMap::Get();
  std::string out;
  out.reserve(bytes.size() * 2);
  for (char c : bytes) out += m.ByteToUtf8(static_cast<uint8_t>(c));
  return out;
}

}  // namespace moesplit::tokenizer
