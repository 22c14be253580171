// The loaded vocabulary behind a Tokenizer (internal to core/tokenizer) and the two merge
// algorithms that run on it.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "core/tokenizer/pre_tokenizer.h"
#include "core/tokenizer/tokenizer.h"

namespace moesplit::tokenizer {

// Hash that lets unordered_map<std::string, ...> be queried with a string_view.
struct StringHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
};
template <typename V>
using StringMap = std::unordered_map<std::string, V, StringHash, std::equal_to<>>;

// One BPE merge between two vocabulary tokens.
struct IdMerge {
  int32_t rank = 0;           // index in tokenizer.ggml.merges (lower merges first)
  TokenId merged = kNoToken;  // token of the concatenation, kNoToken if not in the vocabulary
};

struct Vocab {
  VocabType type = VocabType::kBpe;
  std::string model;  // tokenizer.ggml.model
  std::string pre;    // pre-tokenizer name

  std::vector<std::string> text;  // [n_vocab] token texts
  std::vector<float> score;       // [n_vocab] SPM merge priority (0 if absent)
  std::vector<uint32_t> attr;     // [n_vocab] TokenAttr bits
  StringMap<TokenId> text_to_id;  // n_vocab entries

  // BPE merges. By token ids, key (left << 32) | right; and by text (left + '\0' + right) for
  // symbols that are not vocabulary tokens (never for a well-formed vocabulary).
  std::unordered_map<uint64_t, IdMerge> id_merges;
  StringMap<int32_t> text_merges;
  // [256] the token of each single byte: BPE: its GPT-2 character; SPM: "<0xXX>", else the raw
  // one-byte text; kNoToken if neither exists.
  std::array<TokenId, 256> byte_token{};

  SpecialTokens special;
  bool add_bos = false;
  bool add_eos = false;
  bool add_space_prefix =
      false;  // SPM: prepend ' ' to text that starts the input or follows a special
  bool ignore_merges = false;  // BPE (llama3): a word that is a token is emitted whole
  bool clean_spaces = false;   // Decode: " ?" -> "?", " 's" -> "'s", ...

  std::optional<PreTokenizer> pre_tokenizer;  // BPE only
  // CONTROL / USER_DEFINED / UNKNOWN tokens, longest text first (ties: lower id first): the
  // order in which their texts are cut out of the input.
  std::vector<TokenId> special_by_length;
  std::vector<TokenId> eog;  // sorted ids that end generation
  std::vector<std::string> warnings;

  int32_t n_vocab() const { return static_cast<int32_t>(text.size()); }
  TokenId Find(std::string_view s) const {
    auto it = text_to_id.find(s);
    return it == text_to_id.end() ? kNoToken : it->second;
  }
};

// Builds the vocabulary from metadata (vocab.cc).
StatusOr<Vocab> LoadVocab(const std::vector<gguf::KeyValue>& metadata, std::string_view source);

// Byte-level BPE of one pre-tokenized word (raw UTF-8 bytes; the GPT-2 byte mapping is applied
// inside); appends its tokens to `out` (bpe.cc).
void BpeEncodeWord(const Vocab& v, std::string_view word, std::vector<TokenId>* out);

// SentencePiece-style encoding of text whose spaces are already '▁' (spm.cc).
void SpmEncode(const Vocab& v, std::string_view text, std::vector<TokenId>* out);

}  // namespace moesplit::tokenizer
