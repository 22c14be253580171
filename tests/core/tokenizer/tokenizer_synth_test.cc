// Tokenizers of the synthetic make-model presets and of the llama.cpp-made tiny model, checked
// against llama.cpp's llama-tokenize; and the `moesplit tokenize` command.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "apps/cmd_tokenize.h"
#include "core/gguf/gguf_file.h"
#include "core/synth/model_spec.h"
#include "core/tokenizer/tokenizer.h"
#include "tests/testdata.h"

namespace moesplit::tokenizer {
namespace {

// Texts and the ids llama-tokenize (llama.cpp 0a50d9909, add_special and parse_special on) gave
// for them with the files `moesplit make-model --preset P -o P.gguf` writes.
const std::vector<std::string> kTexts = {
    "MoE test: 42 experts!",
    "Hello world, it's 1234567 o'clock.  I'LL see\n\n\tyou",
    "  leading and trailing spaces   ",
    "na\303\257ve caf\303\251 \342\200\224 \344\270\255\346\226\207\345\255\227\347\254\246 "
    "\343\201\262\343\202\211\343\201\214\343\201\252 "
    "\343\202\253\343\202\277\343\202\253\343\203\212 \355\225\234\352\265\255\354\226\264 "
    "\360\237\246\231!",
    "~abc ~\303\251 x~y $100+200=300",
    "line1\r\nline2\n\n\nend",
    "<\357\275\234begin\342\226\201of\342\226\201sentence\357\275\234>Hi<"
    "\357\275\234end\342\226\201of\342\226\201sentence\357\275\234>",
    "<|im_start|>user\nhi<|im_end|><|endoftext|>",
    "<s>[INST] hi [/INST]</s>",
    "",
};
// llama-tokenize -m ds-tiny.gguf -f TEXT --no-escape --ids
const std::vector<std::vector<TokenId>> kDsTiny = {
    {0, 79, 113, 71, 277, 432, 118, 60, 34, 54, 52, 262, 923, 431, 822, 35},
    {0,  74,  425, 610, 280, 691, 599, 46, 266, 118, 41, 117, 34,  51,  52, 53, 54, 55,  56,
     57, 272, 41,  373, 113, 372, 48,  34, 292, 41,  78, 78,  276, 418, 12, 12, 11, 123, 694},
    {0,   34,  269, 103, 313, 531, 105, 258, 651, 277, 116,
     318, 110, 531, 105, 276, 114, 312, 432, 34,  34,  34},
    {0,   648, 197, 177, 860, 260, 315, 197, 171, 34,  228, 130, 150, 34,  230, 186, 175,
     232, 152, 137, 231, 175, 153, 233, 174, 168, 34,  229, 131, 180, 229, 132, 139, 229,
     131, 142, 229, 131, 172, 34,  229, 132, 173, 229, 132, 193, 229, 132, 173, 229, 133,
     140, 34,  239, 151, 158, 236, 183, 175, 238, 152, 182, 34,  242, 161, 168, 155, 35},
    {0,  128, 311, 101, 34, 128, 197, 171, 281, 128, 123, 34,
     38, 51,  50,  50,  45, 52,  50,  50,  63,  53,  50,  50},
    {0, 110, 531, 103, 51, 15, 12, 110, 531, 103, 52, 12, 12, 12, 427, 102},
    {0, 0, 74, 107, 1},
    {0,   62, 126, 530, 97,  797, 327, 118, 126, 64,  848, 431, 12,  500, 62, 126,
     530, 97, 427, 102, 126, 64,  62,  126, 427, 402, 459, 437, 118, 126, 64},
    {0,  62, 117, 64, 93, 75, 80, 85, 86, 95, 265, 107,
     34, 93, 49,  75, 80, 85, 86, 95, 62, 49, 117, 64},
    {0},
};
// llama-tokenize -m qwen3moe-tiny.gguf -f TEXT --no-escape --ids
const std::vector<std::vector<TokenId>> kQwen3MoeTiny = {
    {80, 114, 72, 573, 61, 35, 55, 53, 374, 36},
    {75, 490, 328, 270, 266, 111, 103, 47, 396, 42, 118, 35,  52,  53,  54,  55, 56,  57,  58, 290,
     42, 102, 328, 413, 49,  35,  35,  76, 42,  79, 79,  264, 104, 104, 331, 12, 124, 114, 120},
    {35, 35, 310, 307, 360, 291, 259, 117, 647, 111, 360, 264, 115, 649, 1002},
    {113, 100, 198, 178, 530, 289, 100, 105, 198, 172, 35,  229, 131, 151, 35,  231, 187, 176,
     233, 153, 138, 232, 176, 154, 234, 175, 169, 35,  230, 132, 181, 230, 133, 140, 230, 132,
     143, 230, 132, 173, 35,  230, 133, 174, 230, 133, 194, 230, 133, 174, 230, 134, 141, 35,
     240, 152, 159, 237, 184, 176, 239, 153, 183, 35,  243, 162, 169, 156, 36},
    {129, 100, 101, 102, 35, 129, 198, 172, 35, 123, 129, 124, 35,
     39,  52,  51,  51,  46, 53,  51,  51,  64, 54,  51,  51},
    {111, 267, 104, 52, 16, 13, 111, 267, 104, 53, 331, 13, 271, 103},
    {63,  242, 192, 159, 101, 104, 106, 267, 229, 153, 132, 114, 105, 229, 153, 132,
     118, 271, 368, 680, 242, 192, 159, 65,  75,  108, 63,  242, 192, 159, 271, 103,
     229, 153, 132, 114, 105, 229, 153, 132, 118, 271, 368, 680, 242, 192, 159, 65},
    {1, 350, 262, 13, 309, 2, 0},
    {63, 118, 65, 94, 76, 81, 86, 87, 96, 35, 309, 539, 50, 76, 81, 86, 87, 96, 63, 50, 118, 65},
    {},
};
// llama-tokenize -m mixtral-tiny.gguf -f TEXT --no-escape --ids
const std::vector<std::vector<TokenId>> kMixtralTiny = {
    {0, 79, 113, 71, 572, 60, 34, 54, 52, 373, 35},
    {0,  74,  489, 327, 269, 265, 110, 102, 46, 395, 41, 117, 34,  587, 53,  54, 595, 57,  289,
     41, 101, 327, 412, 48,  34,  34,  75,  41, 78,  78, 263, 103, 103, 330, 11, 123, 113, 119},
    {0, 34, 34, 309, 306, 359, 290, 258, 116, 646, 110, 359, 263, 114, 648, 1001},
    {0,   112, 99,  197, 177, 529, 288, 99,  104, 197, 171, 34,  228, 130, 150, 34,  230, 186,
     175, 232, 152, 137, 231, 175, 153, 233, 174, 168, 34,  229, 131, 180, 229, 132, 139, 229,
     131, 142, 229, 131, 172, 34,  229, 132, 173, 229, 132, 193, 229, 132, 173, 229, 133, 140,
     34,  239, 151, 158, 236, 183, 175, 238, 152, 182, 34,  242, 161, 168, 155, 35},
    {0,  128, 99, 100, 101, 34, 128, 197, 171, 34, 122, 128, 123,
     34, 38,  51, 50,  50,  45, 52,  50,  50,  63, 53,  50,  50},
    {0, 110, 266, 103, 51, 15, 12, 110, 266, 103, 52, 330, 12, 270, 102},
    {0,   62,  241, 191, 158, 100, 103, 105, 266, 228, 152, 131, 113, 104, 228, 152, 131,
     117, 270, 367, 679, 241, 191, 158, 64,  74,  107, 62,  241, 191, 158, 270, 102, 228,
     152, 131, 113, 104, 228, 152, 131, 117, 270, 367, 679, 241, 191, 158, 64},
    {0,  62,  126, 734, 97, 282, 311, 118, 126, 64,  349, 261, 12,  308, 62,  126, 734,
     97, 270, 102, 126, 64, 62,  126, 270, 102, 113, 104, 366, 122, 118, 126, 64},
    {0, 0, 93, 75, 80, 85, 86, 95, 34, 308, 538, 49, 75, 80, 85, 86, 95, 1},
    {0},
};

Tokenizer PresetTokenizer(const std::string& preset) {
  auto spec = synth::BuildModelSpec({.preset = preset});
  MOESPLIT_CHECK(spec.ok(), spec.status().ToString());
  auto tok = Tokenizer::FromMetadata(spec->metadata, preset);
  MOESPLIT_CHECK(tok.ok(), tok.status().ToString());
  return std::move(tok).value();
}

void ExpectLikeLlamaTokenize(const Tokenizer& tok, const std::vector<std::vector<TokenId>>& want) {
  ASSERT_EQ(want.size(), kTexts.size());
  for (size_t i = 0; i < kTexts.size(); ++i) {
    auto ids = tok.Encode(kTexts[i], /*add_special=*/true, /*parse_special=*/true);
    ASSERT_TRUE(ids.ok()) << ids.status().ToString();
    EXPECT_EQ(*ids, want[i]) << "text " << i << ": '" << kTexts[i] << "'";
    // Pieces, special tokens rendered, give the text back (after the BOS the model adds).
    std::string back;
    for (size_t k = tok.add_bos() ? 1 : 0; k < ids->size(); ++k) {
      back += tok.TokenToPiece((*ids)[k], /*render_special=*/true);
    }
    EXPECT_EQ(back, kTexts[i]) << "text " << i;
  }
}

TEST(SynthTokenizer, DsTinyIsDeepseekV3LikeLlamaCpp) {
  const Tokenizer tok = PresetTokenizer("ds-tiny");
  EXPECT_EQ(tok.pre(), "deepseek-v3");
  EXPECT_EQ(tok.n_vocab(), 1024);
  EXPECT_EQ(tok.special().bos, 0);
  EXPECT_EQ(tok.special().eos, 1);
  EXPECT_TRUE(tok.IsEog(1));
  EXPECT_FALSE(tok.IsEog(0));
  ExpectLikeLlamaTokenize(tok, kDsTiny);
}

TEST(SynthTokenizer, Qwen3MoeTinyIsQwen2LikeLlamaCpp) {
  const Tokenizer tok = PresetTokenizer("qwen3moe-tiny");
  EXPECT_EQ(tok.pre(), "qwen2");
  EXPECT_FALSE(tok.add_bos());
  ExpectLikeLlamaTokenize(tok, kQwen3MoeTiny);
}

TEST(SynthTokenizer, MixtralTinyIsLlamaBpeLikeLlamaCpp) {
  const Tokenizer tok = PresetTokenizer("mixtral-tiny");
  EXPECT_EQ(tok.pre(), "llama-bpe");
  EXPECT_TRUE(tok.add_bos());
  ExpectLikeLlamaTokenize(tok, kMixtralTiny);
}

// shared/testdata/models/README: seqA = BOS + llama.cpp's tokenization of the prompt.
TEST(OracleModel, DsTinyPromptIsSeqA) {
  MOESPLIT_REQUIRE_TESTDATA();
  auto file = gguf::GgufFile::Open(testing::TestDataPath("models/ds-tiny-Q4_K_M.gguf"));
  ASSERT_TRUE(file.ok()) << file.status().ToString();
  auto tok = Tokenizer::FromGguf(**file);
  ASSERT_TRUE(tok.ok()) << tok.status().ToString();
  auto ids = tok->Encode("MoE test: 42 experts!", /*add_special=*/true, /*parse_special=*/true);
  ASSERT_TRUE(ids.ok());
  const std::vector<TokenId> seq_a = {0,  79, 113, 71,  277, 432, 118, 60,
                                      34, 54, 52,  262, 923, 431, 822, 35};
  EXPECT_EQ(*ids, seq_a);
  EXPECT_EQ(tok->Decode(*ids, /*remove_special=*/true), "MoE test: 42 experts!");
  EXPECT_EQ(
      tok->Decode(*ids, false, /*render_special=*/true),
      "<\357\275\234begin\342\226\201of\342\226\201sentence\357\275\234>MoE test: 42 experts!");
}

// --- the tokenize command ---------------------------------------------------------------------

struct CliResult {
  int code;
  std::string out, err;
};

CliResult RunCli(const app::TokenizeArgs& args) {
  std::ostringstream out, err;
  const int code = app::RunTokenize(args, out, err);
  return {code, out.str(), err.str()};
}

class TokenizeCommand : public ::testing::Test {
 protected:
  void SetUp() override {
    MOESPLIT_REQUIRE_TESTDATA();
    args_.model = testing::TestDataPath("models/ds-tiny-Q4_K_M.gguf");
  }
  app::TokenizeArgs args_;
};

TEST_F(TokenizeCommand, PrintsIdsWithOptionalBos) {
  args_.prompt = "MoE test: 42 experts!";
  args_.has_prompt = true;
  CliResult r = RunCli(args_);
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out, "79, 113, 71, 277, 432, 118, 60, 34, 54, 52, 262, 923, 431, 822, 35\n");
  args_.add_bos = true;
  r = RunCli(args_);
  EXPECT_EQ(r.out, "0, 79, 113, 71, 277, 432, 118, 60, 34, 54, 52, 262, 923, 431, 822, 35\n");
}

TEST_F(TokenizeCommand, PiecesAndSpecialParsing) {
  args_.prompt = "<\357\275\234end\342\226\201of\342\226\201sentence\357\275\234> 42";
  args_.has_prompt = true;
  args_.pieces = true;
  CliResult r = RunCli(args_);
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out,
            "1 '<\357\275\234end\342\226\201of\342\226\201sentence\357\275\234>'\n34 ' '\n54 "
            "'4'\n52 '2'\n");
  args_.no_parse_special = true;
  r = RunCli(args_);
  EXPECT_EQ(r.out.find("1 '<"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("62 '<'"), std::string::npos) << r.out;
}

TEST_F(TokenizeCommand, ReadsTextFile) {
  const std::string path = testing::ScratchDir() + "/tokenize_input.txt";
  std::ofstream(path, std::ios::binary) << "MoE test: 42 experts!";
  args_.file = path;
  CliResult r = RunCli(args_);
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out, "79, 113, 71, 277, 432, 118, 60, 34, 54, 52, 262, 923, 431, 822, 35\n");
}

TEST_F(TokenizeCommand, Errors) {
  CliResult r = RunCli(args_);  // neither -p nor -f
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("exactly one of -p TEXT or -f TEXT_FILE"), std::string::npos) << r.err;
  args_.has_prompt = true;
  args_.file = "/nonexistent/text.txt";
  r = RunCli(args_);  // both
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("both"), std::string::npos) << r.err;
  args_.has_prompt = false;
  r = RunCli(args_);  // missing text file
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("/nonexistent/text.txt"), std::string::npos) << r.err;
  args_.file.clear();
  args_.has_prompt = true;
  args_.model = "/nonexistent/model.gguf";
  r = RunCli(args_);  // missing model
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("/nonexistent/model.gguf"), std::string::npos) << r.err;
  args_.model.clear();
  r = RunCli(args_);
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("-m FILE"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace moesplit::tokenizer
