// Kimi-K2's pre-tokenizer ("kimi-k2") against llama.cpp: a small byte-level BPE vocabulary made
// with llama.cpp's gguf-py (tests/core/tokenizer/data/make_kimi_vocab.py) and the ids llama.cpp
// 0a50d9909 gives for 87 strings (Han, kana, Hangul, digits, contractions, whitespace runs,
// combining marks, emoji, mixed scripts; data/tok_oracle.c over llama.cpp's C API).
#include <gtest/gtest.h>

#include <fstream>
#include <iterator>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "core/gguf/gguf_file.h"
#include "core/synth/model_spec.h"
#include "core/tokenizer/pre_tokenizer.h"
#include "core/tokenizer/tokenizer.h"

namespace moesplit::tokenizer {
namespace {

const std::string kData = std::string(MOESPLIT_SOURCE_DIR) + "/tests/core/tokenizer/data/";

std::string ReadAll(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
}

struct Case {
  std::string text;
  std::vector<TokenId> ids;
};

// .inp: cases each followed by "\n__ggml_vocab_test__\n"; .out: one line " id id ..." per case.
std::vector<Case> ReadCases(const std::string& gguf_path) {
  const std::string in = ReadAll(gguf_path + ".inp"), out = ReadAll(gguf_path + ".out");
  const std::string sep = "\n__ggml_vocab_test__\n";
  std::vector<Case> cases;
  for (size_t pos = 0, hit; (hit = in.find(sep, pos)) != std::string::npos;
       pos = hit + sep.size()) {
    cases.push_back({in.substr(pos, hit - pos), {}});
  }
  std::istringstream lines(out);
  std::string line;
  size_t n_lines = 0;
  for (Case& c : cases) {
    if (!std::getline(lines, line)) break;
    ++n_lines;
    std::istringstream ids(line);
    for (TokenId id; ids >> id;) c.ids.push_back(id);
  }
  EXPECT_EQ(n_lines, cases.size()) << ".out has fewer lines than .inp has cases";
  return cases;
}

std::string Ids(const std::vector<TokenId>& ids) {
  std::string s;
  for (TokenId id : ids) s += " " + std::to_string(id);
  return s;
}

class KimiK2Vocab : public ::testing::Test {
 protected:
  void SetUp() override {
    path_ = kData + "kimi-k2-mini.gguf";
    auto file = gguf::GgufFile::Open(path_);
    ASSERT_TRUE(file.ok()) << file.status().ToString();
    auto tok = Tokenizer::FromGguf(**file);
    ASSERT_TRUE(tok.ok()) << tok.status().ToString();
    tok_ = std::make_unique<Tokenizer>(std::move(tok).value());
    cases_ = ReadCases(path_);
  }
  std::string path_;
  std::unique_ptr<Tokenizer> tok_;
  std::vector<Case> cases_;
};

TEST_F(KimiK2Vocab, AllCasesMatchLlamaCpp) {
  ASSERT_EQ(cases_.size(), 87u);
  int matched = 0;
  for (size_t i = 0; i < cases_.size(); ++i) {
    auto ids = tok_->Encode(cases_[i].text, /*add_special=*/false, /*parse_special=*/false);
    ASSERT_TRUE(ids.ok()) << ids.status().ToString();
    EXPECT_EQ(Ids(*ids), Ids(cases_[i].ids)) << "case " << i << ": '" << cases_[i].text << "'";
    matched += *ids == cases_[i].ids;
  }
  EXPECT_EQ(matched, 87);
}

TEST_F(KimiK2Vocab, PiecesRoundTrip) {
  for (size_t i = 0; i < cases_.size(); ++i) {
    std::string text;
    for (TokenId id : cases_[i].ids) text += tok_->TokenToPiece(id);
    EXPECT_EQ(text, cases_[i].text) << "case " << i;
  }
}

// The make-model preset's own vocabulary (163840 ids: learned merges, pads, Kimi's special ids):
// kimi-k2-preset.out holds llama.cpp's ids for the same 87 strings on the file
// `moesplit make-model --preset kimi-k2 --layers 1 --quant Q8_0` wrote (llama.cpp 0a50d9909
// loaded and ran that file, tok_oracle.c tokenized with it).
TEST(KimiK2Preset, VocabularyTokenizesAsLlamaCpp) {
  auto spec = synth::BuildModelSpec({.preset = "kimi-k2", .layers = 1});
  ASSERT_TRUE(spec.ok()) << spec.status().ToString();
  auto tok = Tokenizer::FromMetadata(spec->metadata, "kimi-k2 preset");
  ASSERT_TRUE(tok.ok()) << tok.status().ToString();
  EXPECT_EQ(tok->special().bos, 163584);
  const std::string in = ReadAll(kData + "kimi-k2-mini.gguf.inp");
  std::istringstream out(ReadAll(kData + "kimi-k2-preset.out"));
  const std::string sep = "\n__ggml_vocab_test__\n";
  int n = 0, matched = 0;
  std::string line;
  for (size_t pos = 0, hit; (hit = in.find(sep, pos)) != std::string::npos;
       pos = hit + sep.size(), ++n) {
    ASSERT_TRUE(std::getline(out, line)) << "case " << n;
    std::vector<TokenId> want;
    std::istringstream ids(line);
    for (TokenId id; ids >> id;) want.push_back(id);
    auto got = tok->Encode(in.substr(pos, hit - pos), /*add_special=*/false,
                           /*parse_special=*/false);
    ASSERT_TRUE(got.ok());
    EXPECT_EQ(Ids(*got), Ids(want)) << "case " << n;
    matched += *got == want;
  }
  EXPECT_EQ(n, 87);
  EXPECT_EQ(matched, 87);
}

// Word boundaries of llama.cpp's hand-written Kimi-K2 splitter (unicode.cpp), derived by hand
// from its rules: fixed Han ranges first, then an optional non-letter lead + non-Han letters of
// any case (no marks) + a contraction, digits by three, punctuation runs, whitespace runs.
TEST(KimiK2PreTokenizer, WordsAsLlamaCppSplitter) {
  auto pre = PreTokenizer::Create("kimi-k2");
  ASSERT_TRUE(pre.ok()) << pre.status().ToString();
  // tests/fuzz/tokenizer_corpus/kimi_k2_han_letters picks it by index: it stays last.
  EXPECT_EQ(PreTokenizer::SupportedNames().back(), "kimi-k2");
  const struct {
    std::string text;
    std::vector<std::string> words;
  } cases[] = {
      {"HelloWorld", {"HelloWorld"}},  // the original regex would split at the case change
      {"AI\u6a21\u578bKimi-K2\u6709384\u4e2a\u4e13\u5bb6",
       {"AI", "\u6a21\u578b", "Kimi", "-K", "2", "\u6709", "384", "\u4e2a\u4e13\u5bb6"}},
      {"it's DON'T x'", {"it's", " DON'T", " x", "'"}},
      {"e\u0301x", {"e", "\u0301x"}},  // a combining mark is not part of a letter run
      {"a \u4e2d", {"a", " ", "\u4e2d"}},
      {"1234567", {"123", "456", "7"}},
      {"  x", {" ", " x"}},
      {"!!!\n\nx", {"!!!\n\n", "x"}},
      {"a\u3000b", {"a", "\u3000b"}},  // U+3000 is whitespace, and a lead before a letter
      {"\U0002B81E\u4e00", {"\U0002B81E\u4e00"}},  // unassigned, but inside a Han range
      {" \n \n x", {" \n \n", " x"}},
  };
  for (const auto& c : cases) {
    auto words = pre->Split(c.text);
    ASSERT_TRUE(words.ok());
    EXPECT_EQ(*words, c.words) << "'" << c.text << "'";
  }
}

}  // namespace
}  // namespace moesplit::tokenizer
