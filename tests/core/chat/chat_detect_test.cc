// DetectChatTemplate on the models' real templates (testdata/, sources in its README.md) and on
// the templates `moesplit make-model` writes; names, errors, reasoning split.
#include <gtest/gtest.h>

#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "core/chat/chat_template.h"
#include "core/synth/model_spec.h"

namespace moesplit::chat {
namespace {

std::string ReadTemplate(const std::string& name) {
  const std::string path = std::string(MOESPLIT_SOURCE_DIR) + "/tests/core/chat/testdata/" + name;
  std::ifstream f(path, std::ios::binary);
  EXPECT_TRUE(f.good()) << path;
  return std::string(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
}

ChatFormat Detected(const std::string& file) {
  auto t = DetectChatTemplate(ReadTemplate(file));
  EXPECT_TRUE(t.ok()) << file << ": " << t.status().ToString();
  return t.ok() ? t->format : ChatFormat::kChatml;
}

TEST(ChatDetectTest, RealModelTemplates) {
  EXPECT_EQ(Detected("deepseek-v3-0324.jinja"), ChatFormat::kDeepseek3);
  EXPECT_EQ(Detected("deepseek-r1-distill-llama-8b.jinja"), ChatFormat::kDeepseekR1);
  EXPECT_EQ(Detected("deepseek-r1-distill-qwen-32b.jinja"), ChatFormat::kDeepseekR1);
  EXPECT_EQ(Detected("deepseek-v3.1.jinja"), ChatFormat::kDeepseekV31);
  EXPECT_EQ(Detected("deepseek-v2.jinja"), ChatFormat::kDeepseek2);
  EXPECT_EQ(Detected("qwen3-0.6b.jinja"), ChatFormat::kQwen3);
  EXPECT_EQ(Detected("mixtral-8x7b-instruct-v1.jinja"), ChatFormat::kMistralV1);
  EXPECT_EQ(Detected("mixtral-8x7b-instruct-original.jinja"), ChatFormat::kLlama2);
  EXPECT_EQ(Detected("llama-3-8b-instruct.jinja"), ChatFormat::kLlama3);
  EXPECT_EQ(Detected("llama-3.1-8b-instruct.jinja"), ChatFormat::kLlama3);
  EXPECT_EQ(Detected("kimi-k2-instruct.jinja"), ChatFormat::kKimiK2);
}

TEST(ChatDetectTest, DetectedTemplatesCarryTheModelsSpecialTokens) {
  auto t = DetectChatTemplate(ReadTemplate("deepseek-v3-0324.jinja"));
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(t->bos_token, "<｜begin▁of▁sentence｜>");
  EXPECT_EQ(t->eos_token, "<｜end▁of▁sentence｜>");
  auto q = DetectChatTemplate(ReadTemplate("qwen3-0.6b.jinja"));
  ASSERT_TRUE(q.ok());
  EXPECT_TRUE(q->enable_thinking);
  EXPECT_EQ(EndOfTurn(*q), "<|im_end|>");
}

// Every make-model preset that writes tokenizer.chat_template must be recognised, and
// rendering must agree with what its (simple) template produces: the expected strings were
// rendered from core/synth/vocab.cc's templates with python3-jinja2 (bos "<B>", eos "<E>").
TEST(ChatDetectTest, MakeModelPresets) {
  const std::vector<ChatMessage> conv = {
      {Role::kSystem, "S"}, {Role::kUser, "U1"}, {Role::kAssistant, "A1"}, {Role::kUser, "U2"}};
  const std::vector<ChatMessage> no_system(conv.begin() + 1, conv.end());
  int checked = 0;
  for (const std::string& preset : synth::PresetNames()) {
    auto hp = synth::FindPreset(preset);
    ASSERT_TRUE(hp.ok());
    if (!hp->chat_template) continue;
    auto spec = synth::BuildModelSpec({.preset = preset, .layers = 0});
    ASSERT_TRUE(spec.ok()) << preset << ": " << spec.status().ToString();
    for (const auto& kv : spec->metadata) {
      if (kv.key != "tokenizer.chat_template") continue;
      auto src = kv.value.AsString();
      ASSERT_TRUE(src.ok());
      auto t = DetectChatTemplate(*src);
      ASSERT_TRUE(t.ok()) << preset << ": " << t.status().ToString();
      t->bos_token = "<B>";
      t->eos_token = "<E>";
      switch (hp->vocab) {
        case synth::VocabStyle::kDeepseek:
        case synth::VocabStyle::kDsTiny:
          EXPECT_EQ(t->format, ChatFormat::kDeepseek3) << preset;
          EXPECT_EQ(
              Render(*t, conv, true),
              "<B>S<｜User｜>U1<｜Assistant｜>A1<｜end▁of▁sentence｜><｜User｜>U2<｜Assistant｜>");
          break;
        case synth::VocabStyle::kQwen:
          EXPECT_EQ(t->format, ChatFormat::kChatml) << preset;
          EXPECT_EQ(Render(*t, conv, true),
                    "<|im_start|>system\nS<|im_end|>\n<|im_start|>user\nU1<|im_end|>\n"
                    "<|im_start|>assistant\nA1<|im_end|>\n<|im_start|>user\nU2<|im_end|>\n"
                    "<|im_start|>assistant\n");
          break;
        case synth::VocabStyle::kKimi:
          ADD_FAILURE() << preset << ": the Kimi vocabulary carries no chat template";
          break;
        case synth::VocabStyle::kLlama:
          EXPECT_EQ(t->format, ChatFormat::kLlama2) << preset;
          EXPECT_EQ(Render(*t, no_system, true), "<B>[INST] U1 [/INST]A1<E>[INST] U2 [/INST]");
          break;
      }
      ++checked;
    }
  }
  EXPECT_GE(checked, 3);
}

TEST(ChatDetectTest, UnknownTemplateErrorNamesTheStartAndTheFlag) {
  const std::string src = "{% for m in messages %}<start_of_turn>{{ m.content }}{% endfor %}";
  auto t = DetectChatTemplate(src);
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.status().code(), StatusCode::kInvalidArgument);
  const std::string& msg = t.status().message();
  EXPECT_NE(msg.find("{% for m in messages %}<start_of_turn>"), std::string::npos) << msg;
  EXPECT_NE(msg.find("--chat-template"), std::string::npos) << msg;
  EXPECT_NE(msg.find("deepseek3"), std::string::npos) << msg;
  EXPECT_NE(msg.find("qwen3"), std::string::npos) << msg;
  EXPECT_FALSE(DetectChatTemplate("").ok());
  // Mistral v7 is recognised as Mistral but not supported: still a clear error.
  auto v7 = DetectChatTemplate("{{ bos_token }}[SYSTEM_PROMPT]{{ x }}[/SYSTEM_PROMPT][INST]");
  ASSERT_FALSE(v7.ok());
  EXPECT_NE(v7.status().message().find("Mistral"), std::string::npos);
}

TEST(ChatDetectTest, NamesRoundTrip) {
  for (std::string_view name : ChatTemplateNames()) {
    auto t = ChatTemplateFromName(name);
    ASSERT_TRUE(t.ok()) << name;
    if (name != "mixtral") {
      EXPECT_EQ(ChatFormatName(t->format), name);
    }
    auto d = DetectChatTemplate(name);  // a template that is just a name
    ASSERT_TRUE(d.ok());
    EXPECT_EQ(d->format, t->format);
  }
  // Named explicitly so that dropping it fails here. Last in the list: chat_template_fuzz picks a
  // template by index, and appending keeps the committed seeds on the templates they were made for.
  auto kimi = ChatTemplateFromName("kimi-k2");
  ASSERT_TRUE(kimi.ok()) << kimi.status().ToString();
  EXPECT_EQ(kimi->format, ChatFormat::kKimiK2);
  EXPECT_STREQ(ChatFormatName(ChatFormat::kKimiK2), "kimi-k2");
  EXPECT_EQ(ChatTemplateNames().back(), "kimi-k2");
  auto bad = ChatTemplateFromName("vicuna");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("llama3"), std::string::npos);
  EXPECT_NE(bad.status().message().find("kimi-k2"), std::string::npos);
}

TEST(ChatDetectTest, Roles) {
  EXPECT_EQ(*ParseRole("assistant"), Role::kAssistant);
  EXPECT_STREQ(RoleName(Role::kSystem), "system");
  EXPECT_FALSE(ParseRole("tool").ok());
}

TEST(ChatReasoningTest, ThinkingHelpers) {
  auto r1 = *ChatTemplateFromName("deepseek-r1");
  auto q3 = *ChatTemplateFromName("qwen3");
  auto v3 = *ChatTemplateFromName("deepseek3");
  auto v31 = *ChatTemplateFromName("deepseek-v3.1");
  EXPECT_TRUE(IsThinkingModel(r1));
  EXPECT_TRUE(IsThinkingModel(q3));
  EXPECT_TRUE(IsThinkingModel(v31));
  EXPECT_FALSE(IsThinkingModel(v3));
  EXPECT_TRUE(PromptOpensReasoning(r1));
  EXPECT_FALSE(PromptOpensReasoning(q3));
  EXPECT_FALSE(PromptOpensReasoning(v31));  // thinking off by default
  v31.enable_thinking = true;
  EXPECT_TRUE(PromptOpensReasoning(v31));
  r1.enable_thinking = false;
  EXPECT_FALSE(PromptOpensReasoning(r1));
}

TEST(ChatReasoningTest, SplitR1Answer) {
  const auto r1 = *ChatTemplateFromName("deepseek-r1");
  // The prompt ended in "<think>\n": the answer starts inside the reasoning.
  ReasoningSplit s = SplitReasoning(r1, "Let me add.\n2+2=4\n</think>\n\nThe answer is 4.");
  EXPECT_EQ(s.reasoning, "Let me add.\n2+2=4");
  EXPECT_EQ(s.content, "The answer is 4.");
  EXPECT_TRUE(s.reasoning_done);
  s = SplitReasoning(r1, "Still thinking about");  // cut off / streaming
  EXPECT_EQ(s.reasoning, "Still thinking about");
  EXPECT_EQ(s.content, "");
  EXPECT_FALSE(s.reasoning_done);
  s = SplitReasoning(r1, "<think>\nx\n</think>y");  // an older prompt without "<think>"
  EXPECT_EQ(s.reasoning, "x");
  EXPECT_EQ(s.content, "y");
}

TEST(ChatReasoningTest, SplitQwen3Answer) {
  const auto q3 = *ChatTemplateFromName("qwen3");
  ReasoningSplit s = SplitReasoning(q3, "<think>\nhmm\n</think>\n\nHello!");
  EXPECT_EQ(s.reasoning, "hmm");
  EXPECT_EQ(s.content, "Hello!");
  s = SplitReasoning(q3, "<think>\n\n</think>\n\nNo thinking.");  // enable_thinking = false
  EXPECT_EQ(s.reasoning, "");
  EXPECT_EQ(s.content, "No thinking.");
  s = SplitReasoning(q3, "Just an answer.");
  EXPECT_EQ(s.reasoning, "");
  EXPECT_EQ(s.content, "Just an answer.");
  EXPECT_TRUE(s.reasoning_done);
  s = SplitReasoning(q3, "<think>\npartial");
  EXPECT_EQ(s.reasoning, "partial");
  EXPECT_FALSE(s.reasoning_done);
}

TEST(ChatReasoningTest, NonThinkingModelsKeepEverything) {
  const auto v3 = *ChatTemplateFromName("deepseek3");
  const ReasoningSplit s = SplitReasoning(v3, "<think>a</think>b");
  EXPECT_EQ(s.reasoning, "");
  EXPECT_EQ(s.content, "<think>a</think>b");
}

}  // namespace
}  // namespace moesplit::chat
