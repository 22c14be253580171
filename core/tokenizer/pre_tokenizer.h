// Byte-level BPE pre-tokenization: splits text into words with the regexes llama.cpp uses for
// each `tokenizer.ggml.pre` value, applied one after another (each regex splits every piece the
// previous ones produced into matches and the gaps between them).
//
// Matching runs with PCRE2 (32-bit code units, Unicode properties) on a copy of the text's code
// points in which every non-ASCII whitespace code point is replaced by U+000B: llama.cpp does the
// same before running its std::regex, so `\s` means exactly its whitespace set (U+0009..U+000D,
// U+0020, U+0085, U+00A0, U+1680, U+2000..U+200A, U+2028, U+2029, U+202F, U+205F, U+3000) and
// whitespace never falls inside a literal range such as [　-。]. Unicode categories (\p{L},
// \p{N}, ...) come from PCRE2's tables; llama.cpp's own tables may differ for characters assigned
// in newer Unicode versions.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/base/status.h"

namespace moesplit::tokenizer {

class PreTokenizer {
 public:
  // Unimplemented naming `pre` and listing the supported values if unknown.
  static StatusOr<PreTokenizer> Create(std::string_view pre);
  // The supported `tokenizer.ggml.pre` values ("default" included).
  static std::vector<std::string> SupportedNames();

  PreTokenizer(PreTokenizer&&) noexcept;
  PreTokenizer& operator=(PreTokenizer&&) noexcept;
  ~PreTokenizer();

  // Splits `text` into words (UTF-8, not byte-encoded). Malformed UTF-8 bytes become U+FFFD in
  // the words, as in llama.cpp. Errors only if the regex engine runs out of resources.
  StatusOr<std::vector<std::string>> Split(std::string_view text) const;

  const std::string& name() const { return name_; }

 private:
  struct Regex;
  PreTokenizer() = default;
  std::string name_;
  std::vector<std::unique_ptr<Regex>> regexes_;  // applied in order
};

}  // namespace moesplit::tokenizer
