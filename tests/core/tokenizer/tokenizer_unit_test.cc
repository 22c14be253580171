// Unit tests: UTF-8 and byte-level helpers, pre-tokenizer splits, decoding (clean-up of spaces,
// SPM leading space), the streaming detokenizer, and load errors on crafted metadata.
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "core/gguf/gguf_file.h"
#include "core/tokenizer/pre_tokenizer.h"
#include "core/tokenizer/tokenizer.h"
#include "core/tokenizer/unicode.h"
#include "tests/testdata.h"

namespace moesplit::tokenizer {
namespace {

using gguf::KeyValue;
using gguf::Value;

TEST(Unicode, MalformedBytesDecodeToReplacementOneByteAtATime) {
  EXPECT_EQ(DecodeUtf8("a\xC3\xA9"), (std::vector<uint32_t>{'a', 0xE9}));
  // stray continuation, 0xFF, truncated 3-byte sequence (2 bytes -> 2 replacements)
  EXPECT_EQ(DecodeUtf8("\x80\xFF\xE4\xB8"),
            (std::vector<uint32_t>{0xFFFD, 0xFFFD, 0xFFFD, 0xFFFD}));
  // Like llama.cpp, no range check: F4 90 80 80 decodes to 0x110000, which encodes as U+FFFD.
  EXPECT_EQ(DecodeUtf8("\xF4\x90\x80\x80"), (std::vector<uint32_t>{0x110000}));
  std::string s;
  AppendUtf8(0x110000, &s);
  AppendUtf8(0x1F999, &s);
  EXPECT_EQ(s, "\xEF\xBF\xBD\xF0\x9F\xA6\x99");
}

TEST(Unicode, CompletePrefixHoldsBackOnlyUnfinishedSequences) {
  EXPECT_EQ(CompleteUtf8Prefix(""), 0u);
  EXPECT_EQ(CompleteUtf8Prefix("ab"), 2u);
  EXPECT_EQ(CompleteUtf8Prefix("a\xE4"), 1u);
  EXPECT_EQ(CompleteUtf8Prefix("a\xE4\xB8"), 1u);
  EXPECT_EQ(CompleteUtf8Prefix("a\xE4\xB8\xAD"), 4u);
  EXPECT_EQ(CompleteUtf8Prefix("\xF0\x9F\xA6"), 0u);
  EXPECT_EQ(CompleteUtf8Prefix("\x80\x80"), 2u);  // can never complete: not held
  EXPECT_EQ(CompleteUtf8Prefix("\xFF"), 1u);
}

TEST(Unicode, ByteLevelMapIsGpt2sAndReversible) {
  const ByteLevelMap& m = ByteLevelMap::Get();
  EXPECT_EQ(m.ByteToUtf8(' '), "\xC4\xA0");   // U+0120 'Ġ'
  EXPECT_EQ(m.ByteToUtf8('\n'), "\xC4\x8A");  // U+010A 'Ċ'
  EXPECT_EQ(m.ByteToUtf8('A'), "A");
  EXPECT_EQ(m.ByteToCodepoint(0xAD), 0x143u);  // the last remapped byte
  for (int b = 0; b < 256; ++b) EXPECT_EQ(m.CodepointToByte(m.ByteToCodepoint(b)), b);
  EXPECT_EQ(m.CodepointToByte(0x4E2D), -1);
  EXPECT_EQ(ByteLevelEncode("a b"),
            "a\xC4\xA0"
            "b");
}

std::vector<std::string> SplitWith(const std::string& pre, const std::string& text) {
  auto p = PreTokenizer::Create(pre);
  MOESPLIT_CHECK(p.ok(), p.status().ToString());
  auto words = p->Split(text);
  MOESPLIT_CHECK(words.ok(), words.status().ToString());
  return *words;
}

using Words = std::vector<std::string>;

TEST(PreTokenizer, RegexSplitsOfEachFamily) {
  // GPT-2: contractions, " ?letters", whitespace runs keep their last space for the next word.
  EXPECT_EQ(SplitWith("gpt-2", "I'm  here 2024!"), (Words{"I", "'m", " ", " here", " 2024", "!"}));
  // Llama-3: numbers in groups of up to 3 digits, case-insensitive contractions, newlines.
  EXPECT_EQ(SplitWith("llama-bpe", "1234567 I'LL\n\nx"),
            (Words{"123", "456", "7", " I", "'LL", "\n\n", "x"}));
  // Qwen2: single digits.
  EXPECT_EQ(SplitWith("qwen2", "x=42"), (Words{"x", "=", "4", "2"}));
  // DeepSeek-V3: digits by 3, CJK runs apart, punctuation glued to following ASCII letters.
  EXPECT_EQ(SplitWith("deepseek-v3", "12345 \xE4\xB8\xAD\xE6\x96\x87.net"),
            (Words{"123", "45", " ", "\xE4\xB8\xAD\xE6\x96\x87", ".net"}));
  // Non-ASCII whitespace (U+3000) is whitespace, as in llama.cpp.
  EXPECT_EQ(SplitWith("deepseek-v3",
                      "a\xE3\x80\x80"
                      "b"),
            (Words{"a",
                   "\xE3\x80\x80"
                   "b"}));
  EXPECT_EQ(SplitWith("deepseek-coder", "ab12\n"), (Words{"ab", "1", "2", "\n"}));
  // llama.cpp classifies ASCII with a fixed table in which '~' is not a symbol (\p{S}); its
  // own unicode_regex_split gives exactly these words for this text.
  EXPECT_EQ(SplitWith("deepseek-v3", "~\xC3\xA9 x~y a~~b ~~\xC3\xA9"),
            (Words{"~\xC3\xA9", " x", "~y", " a", "~", "~b", " ", "~", "~\xC3\xA9"}));
  EXPECT_EQ(SplitWith("default", ""), Words{});
}

TEST(PreTokenizer, UnknownNameListsSupported) {
  auto p = PreTokenizer::Create("klingon");
  ASSERT_FALSE(p.ok());
  EXPECT_NE(p.status().message().find("'klingon'"), std::string::npos);
  EXPECT_NE(p.status().message().find("deepseek-v3"), std::string::npos);
  const std::vector<std::string> names = PreTokenizer::SupportedNames();
  for (const char* n : {"deepseek-v3", "deepseek-llm", "deepseek-coder", "qwen2", "llama3",
                        "llama-bpe", "gpt-2", "default"}) {
    EXPECT_NE(std::find(names.begin(), names.end(), n), names.end()) << n;
  }
}

// A tiny byte-level BPE vocabulary: 256 byte tokens, merges "a b" -> "ab", "ab c" -> "abc",
// control tokens <s> </s>, and a user-defined token.
std::vector<KeyValue> TinyBpe() {
  std::vector<std::string> tokens;
  std::vector<int32_t> types;
  const ByteLevelMap& m = ByteLevelMap::Get();
  for (int b = 0; b < 256; ++b) {
    tokens.push_back(m.ByteToUtf8(static_cast<uint8_t>(b)));
    types.push_back(1);
  }
  for (const char* t : {"ab", "abc"}) tokens.push_back(t), types.push_back(1);    // 256, 257
  for (const char* t : {"<s>", "</s>"}) tokens.push_back(t), types.push_back(3);  // 258, 259
  tokens.push_back("<tool>"), types.push_back(4);                                 // 260
  return {
      {"tokenizer.ggml.model", Value::Str("gpt2")},
      {"tokenizer.ggml.pre", Value::Str("gpt-2")},
      {"tokenizer.ggml.tokens", Value::StrArray(tokens)},
      {"tokenizer.ggml.token_type", Value::I32Array(types)},
      {"tokenizer.ggml.merges", Value::StrArray({"a b", "ab c"})},
      {"tokenizer.ggml.bos_token_id", Value::U32(258)},
      {"tokenizer.ggml.eos_token_id", Value::U32(259)},
      {"tokenizer.ggml.add_bos_token", Value::Bool(true)},
  };
}

Tokenizer Load(const std::vector<KeyValue>& kv) {
  auto t = Tokenizer::FromMetadata(kv, "test");
  MOESPLIT_CHECK(t.ok(), t.status().ToString());
  return std::move(t).value();
}

TEST(Tokenizer, CraftedBpeMergesAndSpecials) {
  const Tokenizer tok = Load(TinyBpe());
  EXPECT_EQ(tok.n_vocab(), 261);
  EXPECT_TRUE(tok.IsEog(259));
  auto ids = tok.Encode("<s>abc abx<tool></s>", true, true);
  ASSERT_TRUE(ids.ok());
  // BOS, <s>, "abc", " " (U+0120), "ab", "x", <tool>, </s>
  EXPECT_EQ(*ids, (std::vector<TokenId>{258, 258, 257, 32, 256, 'x', 260, 259}));
  // Without parse_special control texts are text; the USER_DEFINED token is still matched.
  ids = tok.Encode("</s><tool>", false, false);
  ASSERT_TRUE(ids.ok());
  EXPECT_EQ(*ids, (std::vector<TokenId>{'<', '/', 's', '>', 260}));
  EXPECT_EQ(tok.TokenToPiece(258), "");
  EXPECT_EQ(tok.TokenToPiece(258, true), "<s>");
  EXPECT_EQ(tok.TokenToPiece(260), "<tool>");
  EXPECT_EQ(tok.TokenToPiece(32), " ");
  EXPECT_EQ(tok.Find("abc"), 257);
  EXPECT_EQ(tok.Find("zzz"), std::nullopt);
}

TEST(Tokenizer, LoadErrorsNameTheProblem) {
  const auto error_of = [](std::vector<KeyValue> kv) {
    auto t = Tokenizer::FromMetadata(kv, "model.gguf");
    return t.ok() ? std::string("OK") : t.status().ToString();
  };
  const auto set = [](std::vector<KeyValue> kv, const std::string& key, Value v) {
    for (KeyValue& e : kv) {
      if (e.key == key) {
        e.value = std::move(v);
        return kv;
      }
    }
    kv.push_back({key, std::move(v)});
    return kv;
  };
  const auto drop = [](std::vector<KeyValue> kv, const std::string& key) {
    std::erase_if(kv, [&](const KeyValue& e) { return e.key == key; });
    return kv;
  };
  const std::vector<KeyValue> ok = TinyBpe();
  EXPECT_EQ(error_of(ok), "OK");
  EXPECT_NE(error_of({}).find("tokenizer.ggml.tokens"), std::string::npos);
  EXPECT_NE(error_of(drop(ok, "tokenizer.ggml.model")).find("tokenizer.ggml.model"),
            std::string::npos);
  const std::string bert = error_of(set(ok, "tokenizer.ggml.model", Value::Str("bert")));
  EXPECT_NE(bert.find("'bert'"), std::string::npos) << bert;
  EXPECT_NE(bert.find("llama"), std::string::npos) << bert;
  const std::string pre = error_of(set(ok, "tokenizer.ggml.pre", Value::Str("nope")));
  EXPECT_NE(pre.find("'nope'"), std::string::npos) << pre;
  EXPECT_NE(pre.find("deepseek-v3"), std::string::npos) << pre;
  const std::string types =
      error_of(set(ok, "tokenizer.ggml.token_type", Value::I32Array({1, 1, 1})));
  EXPECT_NE(types.find("tokenizer.ggml.token_type has 3 entries"), std::string::npos) << types;
  EXPECT_NE(types.find("261"), std::string::npos) << types;
  EXPECT_NE(error_of(drop(ok, "tokenizer.ggml.merges")).find("tokenizer.ggml.merges"),
            std::string::npos);
  EXPECT_NE(
      error_of(set(ok, "tokenizer.ggml.tokens", Value::Str("x"))).find("tokenizer.ggml.tokens"),
      std::string::npos);
  const auto dup = drop(set(ok, "tokenizer.ggml.tokens", Value::StrArray({"a", "b", "a"})),
                        "tokenizer.ggml.token_type");
  EXPECT_NE(error_of(dup).find("'a' twice"), std::string::npos) << error_of(dup);
  // An id outside the vocabulary is ignored with a warning and the default kept, as llama.cpp
  // does (BPE's default BOS is 11).
  auto t = Tokenizer::FromMetadata(set(ok, "tokenizer.ggml.bos_token_id", Value::U32(9999)), "m");
  ASSERT_TRUE(t.ok());
  ASSERT_EQ(t->warnings().size(), 1u);
  EXPECT_NE(t->warnings()[0].find("bos_token_id = 9999"), std::string::npos);
  EXPECT_EQ(t->special().bos, 11);
}

class VocabTokenizer : public ::testing::Test {
 protected:
  static Tokenizer Open(const std::string& name) {
    auto f = gguf::GgufFile::Open(testing::TestDataPath("vocab/ggml-vocab-" + name + ".gguf"));
    MOESPLIT_CHECK(f.ok(), f.status().ToString());
    auto t = Tokenizer::FromGguf(**f);
    MOESPLIT_CHECK(t.ok(), t.status().ToString());
    return std::move(t).value();
  }
  static std::vector<TokenId> Enc(const Tokenizer& tok, const std::string& text, bool add = false) {
    auto ids = tok.Encode(text, add, true);
    MOESPLIT_CHECK(ids.ok(), ids.status().ToString());
    return *ids;
  }
  void SetUp() override { MOESPLIT_REQUIRE_TESTDATA(); }
};

// Ids from llama-tokenize --no-bos on the bytes "a\xFF" "b\xE4\xB8" (malformed UTF-8).
TEST_F(VocabTokenizer, MalformedUtf8AsLlamaCpp) {
  EXPECT_EQ(Enc(Open("gpt-2"),
                "a\xFF"
                "b\xE4\xB8"),
            (std::vector<TokenId>{64, 4210, 65, 6353}));
  EXPECT_EQ(Enc(Open("deepseek-llm"),
                "a\xFF"
                "b\xE4\xB8"),
            (std::vector<TokenId>{64, 10003, 65, 16211}));
  EXPECT_EQ(Enc(Open("llama-spm"),
                "a\xFF"
                "b\xE4\xB8"),
            (std::vector<TokenId>{263, 258, 101, 231, 187}));
}

TEST_F(VocabTokenizer, DecodeCleansSpacesWhereLlamaCppDoes) {
  const Tokenizer gpt2 = Open("gpt-2");
  const std::string text = "Hello , world ! it 's a ' quote ' .";
  EXPECT_EQ(gpt2.Decode(Enc(gpt2, text)), "Hello, world! it's a'quote '.");
  const Tokenizer ds = Open("deepseek-llm");  // deepseek: no clean-up, exact round trip
  EXPECT_EQ(ds.Decode(Enc(ds, text)), text);
}

TEST_F(VocabTokenizer, SpmDecodeDropsTheAddedSpace) {
  const Tokenizer spm = Open("llama-spm");
  EXPECT_TRUE(spm.add_space_prefix());
  EXPECT_EQ(spm.Decode(Enc(spm, "Hello world")), "Hello world");
  const std::vector<TokenId> with_bos = Enc(spm, "Hello world", /*add=*/true);
  EXPECT_EQ(with_bos.front(), 1);
  // As llama_detokenize: after a BOS the space is kept (its piece is the one stripped).
  EXPECT_EQ(spm.Decode(with_bos), " Hello world");
  EXPECT_EQ(spm.Decode(with_bos, /*remove_special=*/true), " Hello world");
  EXPECT_EQ(spm.Decode(with_bos, false, /*render_special=*/true), "<s> Hello world");
  EXPECT_EQ(spm.TokenToPiece(spm.Find("<0x0A>").value()), "\n");
}

// Multi-byte characters split over byte tokens come out whole, never as broken UTF-8.
TEST_F(VocabTokenizer, StreamingHoldsBackSplitCharacters) {
  for (const std::string name : {"gpt-2", "llama-spm"}) {
    const Tokenizer tok = Open(name);
    const std::string text = "\xF0\x9F\xA6\x99 llama \xEF\xBD\x9C \xE4\xB8\xAD\xE6\x96\x87";
    const std::vector<TokenId> ids = Enc(tok, text);
    StreamingDetokenizer d(tok, /*render_special=*/false);
    std::string out;
    int held = 0;
    for (TokenId id : ids) {
      const std::string chunk = d.Push(id);
      EXPECT_EQ(CompleteUtf8Prefix(chunk), chunk.size()) << name;
      for (uint32_t cp : DecodeUtf8(chunk)) EXPECT_NE(cp, kReplacementChar) << name;
      held += chunk.empty() && d.pending_bytes() > 0;
      out += chunk;
    }
    out += d.Flush();
    EXPECT_GT(held, 0) << name << ": expected some characters split across tokens";
    EXPECT_EQ(out, tok.type() == VocabType::kSpm ? " " + text : text) << name;
  }
}

TEST_F(VocabTokenizer, StreamingFlushAndSpecials) {
  const Tokenizer spm = Open("llama-spm");
  StreamingDetokenizer d(spm, /*render_special=*/false);
  EXPECT_EQ(d.Push(spm.Find("<0xE4>").value()), "");
  EXPECT_EQ(d.pending_bytes(), 1u);
  EXPECT_EQ(d.Flush(), "\xE4");  // an unfinished character is given out raw at the end
  EXPECT_EQ(d.Push(2), "");      // </s> hidden
  StreamingDetokenizer shown(spm, /*render_special=*/true);
  EXPECT_EQ(shown.Push(2), "</s>");
}

}  // namespace
}  // namespace moesplit::tokenizer
