// UTF-8 helpers and GPT-2's byte-to-unicode map, with exactly llama.cpp's leniency: a byte
// sequence that is not valid UTF-8 decodes to U+FFFD one byte at a time, so tokenization of any
// byte string is defined (and equals llama.cpp's).
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace moesplit::tokenizer {

inline constexpr uint32_t kReplacementChar = 0xFFFD;

// Length of the UTF-8 sequence a lead byte announces, from its top 4 bits:
// 0xxx -> 1, 10xx (a stray continuation byte) -> 1, 110x -> 2, 1110 -> 3, 1111 -> 4.
inline int Utf8SeqLen(uint8_t lead) {
  static constexpr int kLen[16] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4};
  return kLen[lead >> 4];
}

// Decodes one code point at text[*pos] and advances *pos. Checks lead/continuation bit patterns
// only (no overlong or surrogate checks, as llama.cpp): a malformed sequence yields U+FFFD and
// advances by one byte.
uint32_t DecodeUtf8At(std::string_view text, size_t* pos);

// All code points of `text` (malformed bytes -> U+FFFD each).
std::vector<uint32_t> DecodeUtf8(std::string_view text);

// Appends the UTF-8 form of `cp`; code points above U+10FFFF append U+FFFD.
void AppendUtf8(uint32_t cp, std::string* out);

// The number of leading bytes of `bytes` that form complete UTF-8 sequences: a trailing lead byte
// whose continuation bytes have not all arrived yet is excluded (streaming output holds it back).
// Malformed bytes count as complete (they can never be completed).
size_t CompleteUtf8Prefix(std::string_view bytes);

// GPT-2's reversible byte <-> printable-character map (byte-level BPE): bytes '!'..'~', 0xA1..0xAC
// and 0xAE..0xFF stand for themselves; the other 68 bytes map, in byte order, to U+0100..U+0143
// (so ' ' -> 'Ġ' U+0120, '\n' -> 'Ċ' U+010A).
class ByteLevelMap {
 public:
  static const ByteLevelMap& Get();  // immutable, built once

  // UTF-8 of the character standing for byte b (1 or 2 bytes).
  const std::string& ByteToUtf8(uint8_t b) const { return byte_to_utf8_[b]; }
  uint32_t ByteToCodepoint(uint8_t b) const { return byte_to_cp_[b]; }
  // The byte a character stands for, or -1 if it is not one of the 256 characters.
  int CodepointToByte(uint32_t cp) const { return cp < cp_to_byte_.size() ? cp_to_byte_[cp] : -1; }

 private:
  ByteLevelMap();
  std::array<std::string, 256> byte_to_utf8_;  // [256]
  std::array<uint32_t, 256> byte_to_cp_;       // [256]
  std::array<int16_t, 0x144> cp_to_byte_;      // [U+0000..U+0143] -> byte or -1
};

// Byte-level encoding of raw bytes: each byte replaced by its GPT-2 character.
std::string ByteLevelEncode(std::string_view bytes);

}  // namespace moesplit::tokenizer
