// Tokenizer built from a GGUF file's tokenizer.ggml.* metadata, reproducing llama.cpp's
// tokenization and detokenization token for token:
//   * model "gpt2": byte-level BPE — special-token partition, pre-tokenizer regexes chosen by
//     tokenizer.ggml.pre (pre_tokenizer.h), GPT-2 byte-to-unicode mapping, merges by rank;
//   * model "llama": SentencePiece-style — ' ' -> U+2581 '▁', optional leading space
//     (add_space_prefix), greedy merges by token score, <0xXX> byte fallback.
//
//   MOESPLIT_ASSIGN_OR_RETURN(Tokenizer tok, Tokenizer::FromGguf(file));
//   MOESPLIT_ASSIGN_OR_RETURN(std::vector<TokenId> ids, tok.Encode("Hello", true, true));
//   std::string text = tok.Decode(ids);
//
// A Tokenizer is immutable after loading; copies share the vocabulary and every method may be
// called from several threads at once.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/base/status.h"
#include "core/gguf/gguf_file.h"
#include "core/gguf/gguf_value.h"

namespace moesplit::tokenizer {

using TokenId = int32_t;
inline constexpr TokenId kNoToken = -1;

enum class VocabType { kBpe, kSpm };

// Values of tokenizer.ggml.token_type (llama.cpp's llama_token_type).
enum class TokenType : int32_t {
  kUndefined = 0,
  kNormal = 1,
  kUnknown = 2,
  kControl = 3,
  kUserDefined = 4,
  kUnused = 5,
  kByte = 6,
};

// Attribute bits of a token (llama.cpp's llama_token_attr): the token type, plus CONTROL added to
// end-of-generation / FIM tokens recognised by their text and UNUSED added to control tokens
// whose text contains "unused", as llama.cpp does at load time.
enum TokenAttr : uint32_t {
  kAttrUndefined = 0,
  kAttrUnknown = 1u << 0,
  kAttrUnused = 1u << 1,
  kAttrNormal = 1u << 2,
  kAttrControl = 1u << 3,
  kAttrUserDefined = 1u << 4,
  kAttrByte = 1u << 5,
};

// Special token ids; kNoToken where the model has none.
struct SpecialTokens {
  TokenId bos = kNoToken;
  TokenId eos = kNoToken;
  TokenId eot = kNoToken;  // end of turn (key, or found by text such as "<|im_end|>")
  TokenId eom = kNoToken;
  TokenId unk = kNoToken;
  TokenId sep = kNoToken;
  TokenId pad = kNoToken;
  TokenId mask = kNoToken;
  TokenId fim_pre = kNoToken;
  TokenId fim_suf = kNoToken;
  TokenId fim_mid = kNoToken;
  TokenId fim_pad = kNoToken;
  TokenId fim_rep = kNoToken;
  TokenId fim_sep = kNoToken;
};

struct Vocab;  // the loaded vocabulary (vocab.h, internal)

class Tokenizer {
 public:
  // Loads from the model's metadata. Errors (naming the file and key): missing
  // tokenizer.ggml.model / .tokens (/ .merges for gpt2), an unsupported model or pre-tokenizer
  // (naming the value and listing the supported ones), array lengths that disagree with the token
  // count, duplicate token texts, a BOS/EOS id outside the vocabulary while it is needed.
  static StatusOr<Tokenizer> FromGguf(const gguf::GgufFile& file);
  // Same from a metadata list (tests, tools); `source` names it in error messages.
  static StatusOr<Tokenizer> FromMetadata(const std::vector<gguf::KeyValue>& metadata,
                                          std::string_view source);

  // Text -> token ids, as llama_tokenize(text, add_special, parse_special):
  //  add_special: prepend BOS if add_bos_token (and append EOS if add_eos_token);
  //  parse_special: special-token texts (CONTROL / UNKNOWN types) in `text` become those tokens;
  //    USER_DEFINED tokens are always matched as whole tokens.
  // Errors only for resource exhaustion of the regex engine on pathological input.
  StatusOr<std::vector<TokenId>> Encode(std::string_view text, bool add_special,
                                        bool parse_special) const;

  // The bytes one token stands for (llama_token_to_piece with lstrip 0): byte-level BPE
  // characters mapped back to bytes, SPM '▁' -> ' ' and <0xXX> -> that byte. CONTROL and
  // UNKNOWN tokens give their text only when `render_special`, else ""; UNUSED/UNDEFINED give "".
  // The result may be an incomplete UTF-8 sequence. CHECKs 0 <= id < n_vocab().
  std::string TokenToPiece(TokenId id, bool render_special = false) const;

  // Token ids -> text, as llama_detokenize(remove_special, unparse_special): concatenated pieces,
  // for SPM without the space added in front of the first word, and with the vocabulary's
  // clean-up of spaces before punctuation where llama.cpp applies it (gpt-2, llama3, default).
  // CHECKs every id.
  std::string Decode(std::span<const TokenId> ids, bool remove_special = false,
                     bool render_special = false) const;

  int32_t n_vocab() const;
  VocabType type() const;
  const std::string& model() const;  // tokenizer.ggml.model
  const std::string& pre() const;    // pre-tokenizer used ("default" for SPM)
  const SpecialTokens& special() const;
  bool add_bos() const;
  bool add_eos() const;
  bool add_space_prefix() const;
  // Text as stored in the vocabulary (byte-level characters / '▁' not converted).
  const std::string& TokenText(TokenId id) const;
  uint32_t Attributes(TokenId id) const;  // TokenAttr bits
  bool IsEog(TokenId id) const;           // ends generation (EOS, EOT, EOM, <|im_end|>, ...)
  bool IsValid(TokenId id) const { return id >= 0 && id < n_vocab(); }
  // The id of the token whose text is exactly `text`, if any.
  std::optional<TokenId> Find(std::string_view text) const;
  // Notes from loading (e.g. an out-of-range optional special id that was ignored).
  const std::vector<std::string>& warnings() const;

 private:
  explicit Tokenizer(std::shared_ptr<const Vocab> v) : vocab_(std::move(v)) {}
  std::shared_ptr<const Vocab> vocab_;
};

// Turns a stream of token ids into text for display, emitting only complete UTF-8 characters:
// a character whose bytes are split across tokens (byte-fallback or byte-level pieces) is held
// back until its last byte arrives.
//
//   StreamingDetokenizer d(tok, /*render_special=*/false);
//   for (TokenId id : generated) std::cout << d.Push(id) << std::flush;
//   std::cout << d.Flush();
class StreamingDetokenizer {
 public:
  StreamingDetokenizer(const Tokenizer& tok, bool render_special)
      : tok_(&tok), render_special_(render_special) {}

  // The text that became complete with token `id` (possibly "").
  std::string Push(TokenId id);
  // Everything still held back (an incomplete sequence is emitted as its raw bytes); resets.
  std::string Flush();
  // Bytes held back now (0..3).
  size_t pending_bytes() const { return pending_.size(); }

 private:
  const Tokenizer* tok_;
  bool render_special_;
  std::string pending_;  // [0..3] bytes of an incomplete UTF-8 sequence
};

}  // namespace moesplit::tokenizer
