// llama.cpp's tokenizer test vectors (shared/testdata/vocab): every case of the four vocab files
// must tokenize to exactly the recorded ids, and the ids must detokenize back to the text.
#include <gtest/gtest.h>

#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "core/gguf/gguf_file.h"
#include "core/tokenizer/tokenizer.h"
#include "tests/testdata.h"

namespace moesplit::tokenizer {
namespace {

struct VocabCase {
  std::string text;
  std::vector<TokenId> ids;
};

// .inp: cases each followed by "\n__ggml_vocab_test__\n"; .out: one line of " id id ..." per case.
std::vector<VocabCase> ReadCases(const std::string& gguf_path) {
  const std::vector<uint8_t> inp = testing::ReadFileBytes(gguf_path + ".inp");
  const std::vector<uint8_t> outp = testing::ReadFileBytes(gguf_path + ".out");
  const std::string in(inp.begin(), inp.end()), out(outp.begin(), outp.end());
  const std::string sep = "\n__ggml_vocab_test__\n";
  std::vector<VocabCase> cases;
  for (size_t pos = 0, hit; (hit = in.find(sep, pos)) != std::string::npos;
       pos = hit + sep.size()) {
    cases.push_back({in.substr(pos, hit - pos), {}});
  }
  std::istringstream lines(out);
  std::string line;
  for (VocabCase& c : cases) {
    if (!std::getline(lines, line)) break;
    std::istringstream ids(line);
    for (TokenId id; ids >> id;) c.ids.push_back(id);
  }
  return cases;
}

class VocabFile : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    MOESPLIT_REQUIRE_TESTDATA();
    path_ = testing::TestDataPath("vocab/ggml-vocab-" + GetParam() + ".gguf");
    auto file = gguf::GgufFile::Open(path_);
    ASSERT_TRUE(file.ok()) << file.status().ToString();
    auto tok = Tokenizer::FromGguf(**file);
    ASSERT_TRUE(tok.ok()) << tok.status().ToString();
    tok_ = std::make_unique<Tokenizer>(std::move(tok).value());
    cases_ = ReadCases(path_);
  }
  std::string path_;
  std::unique_ptr<Tokenizer> tok_;
  std::vector<VocabCase> cases_;
};

std::string Ids(const std::vector<TokenId>& ids) {
  std::string s;
  for (TokenId id : ids) s += " " + std::to_string(id);
  return s;
}

TEST_P(VocabFile, AllCasesMatchLlamaCpp) {
  ASSERT_EQ(cases_.size(), 46u);
  int matched = 0;
  for (size_t i = 0; i < cases_.size(); ++i) {
    const VocabCase& c = cases_[i];
    auto ids = tok_->Encode(c.text, /*add_special=*/false, /*parse_special=*/false);
    ASSERT_TRUE(ids.ok()) << ids.status().ToString();
    EXPECT_EQ(Ids(*ids), Ids(c.ids)) << "case " << i << ": '" << c.text << "'";
    matched += *ids == c.ids;
  }
  EXPECT_EQ(matched, 46);
}

// Concatenated pieces give back the input bytes exactly (SPM: minus the added leading space).
TEST_P(VocabFile, PiecesRoundTrip) {
  for (size_t i = 0; i < cases_.size(); ++i) {
    const VocabCase& c = cases_[i];
    std::string text;
    for (TokenId id : c.ids) text += tok_->TokenToPiece(id);
    if (tok_->type() == VocabType::kSpm && !text.empty()) {
      ASSERT_EQ(text[0], ' ') << "case " << i;
      text.erase(0, 1);
    }
    EXPECT_EQ(text, c.text) << "case " << i;
  }
}

INSTANTIATE_TEST_SUITE_P(LlamaCppVocabs, VocabFile,
                         ::testing::Values("deepseek-llm", "deepseek-coder", "gpt-2", "llama-spm"),
                         [](const auto& info) {
                           std::string n = info.param;
                           for (char& c : n) c = (c == '-') ? '_' : c;
                           return n;
                         });

}  // namespace
}  // namespace moesplit::tokenizer
