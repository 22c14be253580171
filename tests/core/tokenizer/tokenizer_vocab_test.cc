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
  for (TokenId id : ids) {
    s += ' ';
    s += std::to_string(id);
  }
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

// Special-token parsing and BOS as llama-tokenize does them (add_special = true): with
// parse_special, CONTROL token texts become those tokens (SPM then adds its leading space to the
// text after each special token, e.g. "</s> there" -> 2, "▁", "▁there"); without, they
// are plain text.
struct SpecialCase {
  std::string vocab;
  int text;
  std::vector<TokenId> parsed;
  std::vector<TokenId> unparsed;
};

const std::vector<std::string> kSpecialTexts = {
    "<s>Hi</s> there<s>",
    "<|endoftext|>Hello<|endoftext|>",
    "<\357\275\234begin\342\226\201of\342\226\201sentence\357\275\234>Hello "
    "<\357\275\234fim\342\226\201hole\357\275\234>x",
    " Hello  world",
};
// llama-tokenize -m ggml-vocab-VOCAB.gguf -f TEXT --no-escape --ids [--no-parse-special]
const std::vector<SpecialCase> kSpecialCases = {
    {"llama-spm",
     0,
     {1, 1, 6324, 2, 29871, 727, 1},
     {1, 529, 29879, 29958, 18567, 829, 29879, 29958, 727, 29966, 29879, 29958}},
    {"llama-spm",
     1,
     {1, 529, 29989, 355, 974, 726, 29989, 29958, 10994, 29966, 29989, 355, 974, 726, 29989, 29958},
     {1, 529, 29989, 355, 974, 726, 29989, 29958, 10994, 29966, 29989, 355, 974, 726, 29989,
      29958}},
    {"llama-spm",
     2,
     {1,   529, 242, 192, 159,   463, 310,   10541, 242, 192, 159,   29958, 10994,
      529, 242, 192, 159, 29888, 326, 16188, 242,   192, 159, 29958, 29916},
     {1,   529, 242, 192, 159,   463, 310,   10541, 242, 192, 159,   29958, 10994,
      529, 242, 192, 159, 29888, 326, 16188, 242,   192, 159, 29958, 29916}},
    {"llama-spm", 3, {1, 29871, 15043, 29871, 3186}, {1, 29871, 15043, 29871, 3186}},
    {"gpt-2",
     0,
     {27, 82, 29, 17250, 3556, 82, 29, 612, 27, 82, 29},
     {27, 82, 29, 17250, 3556, 82, 29, 612, 27, 82, 29}},
    {"gpt-2",
     1,
     {50256, 15496, 50256},
     {27, 91, 437, 1659, 5239, 91, 29, 15496, 27, 91, 437, 1659, 5239, 91, 29}},
    {"gpt-2",
     2,
     {27,    171,  121, 250, 27471, 5008, 223, 1659, 5008, 223,   34086, 594, 171, 121, 250, 29,
      15496, 1279, 171, 121, 250,   69,   320, 5008, 223,  13207, 171,   121, 250, 29,  87},
     {27,    171,  121, 250, 27471, 5008, 223, 1659, 5008, 223,   34086, 594, 171, 121, 250, 29,
      15496, 1279, 171, 121, 250,   69,   320, 5008, 223,  13207, 171,   121, 250, 29,  87}},
    {"gpt-2", 3, {18435, 220, 995}, {18435, 220, 995}},
    {"deepseek-llm",
     0,
     {100000, 27, 82, 29, 11007, 535, 82, 29, 745, 27, 82, 29},
     {100000, 27, 82, 29, 11007, 535, 82, 29, 745, 27, 82, 29}},
    {"deepseek-llm",
     1,
     {100000, 27, 91, 409, 994, 822, 66325, 17464, 27, 91, 409, 994, 822, 66325},
     {100000, 27, 91, 409, 994, 822, 66325, 17464, 27, 91, 409, 994, 822, 66325}},
    {"deepseek-llm",
     2,
     {100000, 100000, 17464, 459, 68940, 237, 69, 309, 11009, 210, 19413, 68940, 237, 29, 87},
     {100000, 27,  68940, 237, 951, 11009, 210,   994, 11009, 210,   53582, 68940, 237, 29,
      17464,  459, 68940, 237, 69,  309,   11009, 210, 19413, 68940, 237,   29,    87}},
    {"deepseek-llm", 3, {100000, 37727, 207, 1843}, {100000, 37727, 207, 1843}},
    {"deepseek-coder",
     0,
     {32013, 27, 82, 29, 11041, 27, 14, 82, 29, 741, 27, 82, 29},
     {32013, 27, 82, 29, 11041, 27, 14, 82, 29, 741, 27, 82, 29}},
    {"deepseek-coder",
     1,
     {32013, 27, 91, 408, 990, 818, 91, 29, 17535, 27, 91, 408, 990, 818, 91, 29},
     {32013, 27, 91, 408, 990, 818, 91, 29, 17535, 27, 91, 408, 990, 818, 91, 29}},
    {"deepseek-coder",
     2,
     {32013, 32013, 17535, 207, 32015, 87},
     {32013, 27,   169, 121, 237, 946, 11028, 210,   990, 11028, 210, 18119, 720, 169, 121, 237, 29,
      17535, 1013, 169, 121, 237, 69,  308,   11028, 210, 19496, 169, 121,   237, 29,  87}},
    {"deepseek-coder", 3, {32013, 414, 9489, 207, 1835}, {32013, 414, 9489, 207, 1835}},
};

TEST(LlamaCppVocabs, SpecialTokensAndBosAsLlamaTokenize) {
  MOESPLIT_REQUIRE_TESTDATA();
  std::string loaded;
  std::unique_ptr<gguf::GgufFile> file;
  std::unique_ptr<Tokenizer> tok;
  for (const SpecialCase& c : kSpecialCases) {
    if (c.vocab != loaded) {
      auto f = gguf::GgufFile::Open(testing::TestDataPath("vocab/ggml-vocab-" + c.vocab + ".gguf"));
      ASSERT_TRUE(f.ok()) << f.status().ToString();
      auto t = Tokenizer::FromGguf(**f);
      ASSERT_TRUE(t.ok()) << t.status().ToString();
      tok = std::make_unique<Tokenizer>(std::move(t).value());
      loaded = c.vocab;
    }
    const std::string& text = kSpecialTexts[c.text];
    auto parsed = tok->Encode(text, /*add_special=*/true, /*parse_special=*/true);
    auto unparsed = tok->Encode(text, /*add_special=*/true, /*parse_special=*/false);
    ASSERT_TRUE(parsed.ok() && unparsed.ok());
    EXPECT_EQ(Ids(*parsed), Ids(c.parsed)) << c.vocab << " '" << text << "'";
    EXPECT_EQ(Ids(*unparsed), Ids(c.unparsed)) << c.vocab << " '" << text << "' unparsed";
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
