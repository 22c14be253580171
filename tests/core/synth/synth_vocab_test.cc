// The toy BPE vocabulary: byte map, learned merges, layout and special tokens.
#include <gtest/gtest.h>

#include <set>
#include <string>

#include "core/synth/vocab.h"

namespace moesplit::synth {
namespace {

TEST(SynthVocab, ByteToUnicodeIsGpt2Map) {
  EXPECT_EQ(ByteToUnicode('A'), "A");
  EXPECT_EQ(ByteToUnicode(' '), "Ġ");   // U+0120
  EXPECT_EQ(ByteToUnicode('\n'), "Ċ");  // U+010A
  EXPECT_EQ(ByteToUnicode(0), "Ā");     // U+0100
  EXPECT_EQ(ByteToUnicode(0xAD), "Ń");  // U+0143, the last remapped byte
  std::set<std::string> all;
  for (int b = 0; b < 256; ++b) all.insert(ByteToUnicode(static_cast<uint8_t>(b)));
  EXPECT_EQ(all.size(), 256u);
}

TEST(SynthVocab, LearnedMergesAreDeterministicAndFrequent) {
  const auto a = LearnMerges("the cat the hat the mat", 5);
  EXPECT_EQ(a, LearnMerges("the cat the hat the mat", 5));
  ASSERT_EQ(a.size(), 5u);
  // "Ġ t", "Ġ h"... the most frequent pair across " the" x2 and " cat" ... is "a t" (3x) or
  // "Ġ t"/"t h"/"h e" (3x): ties go to the smallest pair in byte-string order.
  EXPECT_EQ(a[0], "a t");
  EXPECT_LE(LearnMerges("ab", 100).size(), 1u);
}

TEST(SynthVocab, DeepseekLayout) {
  const Vocab v = BuildVocab(VocabStyle::kDeepseek, 129280, true);
  ASSERT_EQ(v.tokens.size(), 129280u);
  ASSERT_EQ(v.token_types.size(), v.tokens.size());
  EXPECT_EQ(v.tokens[0], "<｜begin▁of▁sentence｜>");
  EXPECT_EQ(v.tokens[2], ByteToUnicode(0));
  EXPECT_EQ(v.tokens.back(), "<｜Assistant｜>");
  EXPECT_EQ(v.token_types.back(), kTokenControl);
  EXPECT_GT(v.merges.size(), 500u);  // the corpus is a few KB
  std::set<std::string> unique(v.tokens.begin(), v.tokens.end());
  EXPECT_EQ(unique.size(), v.tokens.size());
  EXPECT_NE(v.chat_template.find("<｜User｜>"), std::string::npos);
}

TEST(SynthVocab, KimiLayout) {
  const Vocab v = BuildVocab(VocabStyle::kKimi, 163840, true);
  ASSERT_EQ(v.tokens.size(), 163840u);
  EXPECT_EQ(v.pre, "kimi-k2");
  EXPECT_EQ(v.tokens[0], ByteToUnicode(0));
  EXPECT_EQ(v.bos, 163584u);
  EXPECT_EQ(v.eos, 163585u);
  EXPECT_EQ(v.tokens[163584], "[BOS]");
  EXPECT_EQ(v.tokens[163586], "<|im_end|>");
  EXPECT_EQ(v.tokens[163594], "<|im_system|>");
  EXPECT_EQ(v.tokens[163601], "<|im_middle|>");
  EXPECT_EQ(v.token_types[163584], kTokenControl);
  EXPECT_EQ(v.token_types[163583], kTokenUnused);  // the pads end where the specials start
  std::set<std::string> unique(v.tokens.begin(), v.tokens.end());
  EXPECT_EQ(unique.size(), v.tokens.size());
  EXPECT_TRUE(v.chat_template.empty());  // no Kimi template we could render
}

TEST(SynthVocab, TinyVocabsAreFull) {
  for (VocabStyle s : {VocabStyle::kDsTiny, VocabStyle::kQwen, VocabStyle::kLlama}) {
    const Vocab v = BuildVocab(s, 1024, true);
    EXPECT_EQ(v.tokens.size(), 1024u);
    std::set<std::string> unique(v.tokens.begin(), v.tokens.end());
    EXPECT_EQ(unique.size(), 1024u);
  }
  EXPECT_EQ(BuildVocab(VocabStyle::kDsTiny, 1024, false).merges.size(), 766u);
}

}  // namespace
}  // namespace moesplit::synth
