// libFuzzer entry point for the tokenizer: the first byte picks the pre-tokenizer (every name
// PreTokenizer::SupportedNames() lists, over one small byte-level BPE vocabulary) and whether
// special-token texts are parsed; the rest is the text. Any bytes must encode without a crash to
// valid ids; the streaming detokenizer must emit only complete UTF-8 sequences, hold back at most
// 3 bytes, and give back exactly the input when the input is UTF-8 (byte-level BPE is lossless
// then; malformed bytes become U+FFFD in the pre-tokenizer, as in llama.cpp).
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/gguf/gguf_file.h"
#include "core/tokenizer/pre_tokenizer.h"
#include "core/tokenizer/tokenizer.h"
#include "core/tokenizer/unicode.h"

namespace {

using moesplit::gguf::KeyValue;
using moesplit::gguf::Value;
namespace tok = moesplit::tokenizer;

// 256 byte tokens, merges that build "ab", "abc", " the" and "12", two control tokens and a
// user-defined one: small enough to load per pre-tokenizer once, rich enough that merges,
// special-token matching and user-defined matching all run.
std::vector<KeyValue> Vocabulary(const std::string& pre) {
  std::vector<std::string> tokens;
  std::vector<int32_t> types;
  const tok::ByteLevelMap& m = tok::ByteLevelMap::Get();
  for (int b = 0; b < 256; ++b) {
    tokens.push_back(m.ByteToUtf8(static_cast<uint8_t>(b)));
    types.push_back(1);
  }
  const std::string sp = m.ByteToUtf8(' ');  // "Ġ"
  for (const std::string& t : {std::string("ab"), std::string("abc"), sp + "t", sp + "th",
                               sp + "the", std::string("12")}) {
    tokens.push_back(t), types.push_back(1);
  }
  for (const char* t : {"<s>", "</s>"}) tokens.push_back(t), types.push_back(3);
  tokens.push_back("<tool>"), types.push_back(4);
  return {
      {"tokenizer.ggml.model", Value::Str("gpt2")},
      {"tokenizer.ggml.pre", Value::Str(pre)},
      {"tokenizer.ggml.tokens", Value::StrArray(tokens)},
      {"tokenizer.ggml.token_type", Value::I32Array(types)},
      {"tokenizer.ggml.merges",
       Value::StrArray({"a b", "ab c", sp + " t", sp + "t h", sp + "th e", "1 2"})},
      {"tokenizer.ggml.bos_token_id", Value::U32(262)},
      {"tokenizer.ggml.eos_token_id", Value::U32(263)},
      {"tokenizer.ggml.add_bos_token", Value::Bool(true)},
  };
}

const std::vector<std::unique_ptr<tok::Tokenizer>>& Tokenizers() {
  static const auto* all = [] {
    auto* v = new std::vector<std::unique_ptr<tok::Tokenizer>>;
    for (const std::string& pre : tok::PreTokenizer::SupportedNames()) {
      auto t = tok::Tokenizer::FromMetadata(Vocabulary(pre), "tokenizer_fuzz");
      if (!t.ok()) __builtin_trap();  // every supported name must load
      v->push_back(std::make_unique<tok::Tokenizer>(std::move(t).value()));
    }
    return v;
  }();
  return *all;
}

// The tokenizer's own UTF-8 reading gives the input back: no malformed byte, no value beyond
// U+10FFFF.
bool IsUtf8(std::string_view s) {
  std::string again;
  for (uint32_t cp : tok::DecodeUtf8(s)) tok::AppendUtf8(cp, &again);
  return again == s;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const auto& all = Tokenizers();
  const tok::Tokenizer& t = *all[(data[0] & 0x7f) % all.size()];
  const bool special = (data[0] & 0x80) != 0;
  const std::string_view text(reinterpret_cast<const char*>(data) + 1, size - 1);
  auto ids = t.Encode(text, /*add_special=*/false, /*parse_special=*/special);
  if (!ids.ok()) {
    // Documented: only the regex engine's resource limits on pathological input.
    if (ids.status().code() != moesplit::StatusCode::kResourceExhausted) __builtin_trap();
    return 0;
  }
  std::string streamed;
  tok::StreamingDetokenizer d(t, /*render_special=*/special);
  for (tok::TokenId id : *ids) {
    if (!t.IsValid(id)) __builtin_trap();
    const std::string piece = d.Push(id);
    if (tok::CompleteUtf8Prefix(piece) != piece.size()) __builtin_trap();
    if (d.pending_bytes() > 3) __builtin_trap();
    streamed += piece;
  }
  streamed += d.Flush();
  if (d.pending_bytes() != 0) __builtin_trap();
  // Control tokens parsed from the text render as their text again (render_special), so the
  // round trip holds with and without special parsing.
  if (IsUtf8(text) && streamed != text) __builtin_trap();
  (void)t.Decode(*ids, /*remove_special=*/false, /*render_special=*/special);
  (void)t.Encode(text, /*add_special=*/true, special);
  return 0;
}
