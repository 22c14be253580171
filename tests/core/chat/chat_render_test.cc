// Render() against the models' own templates: every expected string below was produced by
// rendering the template file in testdata/ (see testdata/README.md) with python3-jinja2.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/chat/chat_template.h"

namespace moesplit::chat {
namespace {

// system + user + assistant (with reasoning) + user: the 3-turn conversation of every case.
std::vector<ChatMessage> Conv3() {
  return {
      {Role::kSystem, "You are a helpful assistant."},
      {Role::kUser, "Hello"},
      {Role::kAssistant, "<think>\nThe user says hello.\n</think>\n\nHi there! How can I help?"},
      {Role::kUser, "What is 2+2? "},
  };
}

// Conv3 + the final answer (rendered without a generation prompt).
std::vector<ChatMessage> Conv4() {
  std::vector<ChatMessage> m = Conv3();
  m.push_back({Role::kAssistant, "<think>\nSimple sum.\n</think>\n\n4"});
  return m;
}

ChatTemplate Named(const char* name) {
  auto t = ChatTemplateFromName(name);
  EXPECT_TRUE(t.ok()) << name;
  return *t;
}

// deepseek-v3-0324.jinja
TEST(ChatRenderTest, DeepseekV3) {
  const ChatTemplate t = Named("deepseek3");
  EXPECT_EQ(
      Render(t, Conv3(), true),
      "<｜begin▁of▁sentence｜>You are a helpful assistant.<｜User｜>Hello<｜Assistant｜><think>\n"
      "The user says hello.\n"
      "</think>\n"
      "\n"
      "Hi there! How can I help?<｜end▁of▁sentence｜><｜User｜>What is 2+2? <｜Assistant｜>");
  EXPECT_EQ(
      Render(t, Conv4(), false),
      "<｜begin▁of▁sentence｜>You are a helpful assistant.<｜User｜>Hello<｜Assistant｜><think>\n"
      "The user says hello.\n"
      "</think>\n"
      "\n"
      "Hi there! How can I help?<｜end▁of▁sentence｜><｜User｜>What is 2+2? "
      "<｜Assistant｜><think>\n"
      "Simple sum.\n"
      "</think>\n"
      "\n"
      "4<｜end▁of▁sentence｜>");
}

// deepseek-r1-distill-llama-8b.jinja; thinking off: deepseek-r1-distill-qwen-32b.jinja
TEST(ChatRenderTest, DeepseekR1StripsPastReasoning) {
  ChatTemplate t = Named("deepseek-r1");
  EXPECT_EQ(Render(t, Conv3(), true),
            "<｜begin▁of▁sentence｜>You are a helpful assistant.<｜User｜>Hello<｜Assistant｜>\n"
            "\n"
            "Hi there! How can I help?<｜end▁of▁sentence｜><｜User｜>What is 2+2? "
            "<｜Assistant｜><think>\n");
  EXPECT_EQ(Render(t, Conv4(), false),
            "<｜begin▁of▁sentence｜>You are a helpful assistant.<｜User｜>Hello<｜Assistant｜>\n"
            "\n"
            "Hi there! How can I help?<｜end▁of▁sentence｜><｜User｜>What is 2+2? <｜Assistant｜>\n"
            "\n"
            "4<｜end▁of▁sentence｜>");
  t.enable_thinking = false;
  EXPECT_EQ(Render(t, Conv3(), true),
            "<｜begin▁of▁sentence｜>You are a helpful assistant.<｜User｜>Hello<｜Assistant｜>\n"
            "\n"
            "Hi there! How can I help?<｜end▁of▁sentence｜><｜User｜>What is 2+2? "
            "<｜Assistant｜><think>\n"
            "</think>");
}

// deepseek-v3.1.jinja (thinking undefined = off, then thinking = true)
TEST(ChatRenderTest, DeepseekV31) {
  ChatTemplate t = Named("deepseek-v3.1");
  EXPECT_FALSE(t.enable_thinking);
  EXPECT_EQ(Render(t, Conv3(), true),
            "<｜begin▁of▁sentence｜>You are a helpful "
            "assistant.<｜User｜>Hello<｜Assistant｜><think></think>\n"
            "\n"
            "Hi there! How can I help?<｜end▁of▁sentence｜><｜User｜>What is 2+2? "
            "<｜Assistant｜><think></think>");
  EXPECT_EQ(Render(t, Conv4(), false),
            "<｜begin▁of▁sentence｜>You are a helpful "
            "assistant.<｜User｜>Hello<｜Assistant｜><think></think>\n"
            "\n"
            "Hi there! How can I help?<｜end▁of▁sentence｜><｜User｜>What is 2+2? "
            "<｜Assistant｜><think></think>\n"
            "\n"
            "4<｜end▁of▁sentence｜>");
  t.enable_thinking = true;
  EXPECT_EQ(Render(t, Conv3(), true),
            "<｜begin▁of▁sentence｜>You are a helpful "
            "assistant.<｜User｜>Hello<｜Assistant｜><think></think>\n"
            "\n"
            "Hi there! How can I help?<｜end▁of▁sentence｜><｜User｜>What is 2+2? "
            "<｜Assistant｜><think>");
}

// deepseek-v2.jinja
TEST(ChatRenderTest, DeepseekV2) {
  EXPECT_EQ(Render(Named("deepseek2"), Conv3(), true),
            "<｜begin▁of▁sentence｜>You are a helpful assistant.\n"
            "\n"
            "User: Hello\n"
            "\n"
            "Assistant: <think>\n"
            "The user says hello.\n"
            "</think>\n"
            "\n"
            "Hi there! How can I help?<｜end▁of▁sentence｜>User: What is 2+2? \n"
            "\n"
            "Assistant:");
}

// qwen3-0.6b.jinja: default, enable_thinking = false, and a final answer after the last query
TEST(ChatRenderTest, Qwen3) {
  ChatTemplate t = Named("qwen3");
  EXPECT_EQ(Render(t, Conv3(), true),
            "<|im_start|>system\n"
            "You are a helpful assistant.<|im_end|>\n"
            "<|im_start|>user\n"
            "Hello<|im_end|>\n"
            "<|im_start|>assistant\n"
            "Hi there! How can I help?<|im_end|>\n"
            "<|im_start|>user\n"
            "What is 2+2? <|im_end|>\n"
            "<|im_start|>assistant\n");
  EXPECT_EQ(Render(t, Conv4(), false),
            "<|im_start|>system\n"
            "You are a helpful assistant.<|im_end|>\n"
            "<|im_start|>user\n"
            "Hello<|im_end|>\n"
            "<|im_start|>assistant\n"
            "Hi there! How can I help?<|im_end|>\n"
            "<|im_start|>user\n"
            "What is 2+2? <|im_end|>\n"
            "<|im_start|>assistant\n"
            "<think>\n"
            "Simple sum.\n"
            "</think>\n"
            "\n"
            "4<|im_end|>\n");
  t.enable_thinking = false;
  EXPECT_EQ(Render(t, Conv3(), true),
            "<|im_start|>system\n"
            "You are a helpful assistant.<|im_end|>\n"
            "<|im_start|>user\n"
            "Hello<|im_end|>\n"
            "<|im_start|>assistant\n"
            "Hi there! How can I help?<|im_end|>\n"
            "<|im_start|>user\n"
            "What is 2+2? <|im_end|>\n"
            "<|im_start|>assistant\n"
            "<think>\n"
            "\n"
            "</think>\n"
            "\n");
}

// mixtral-8x7b-instruct-v1.jinja (no generation prompt in this template)
TEST(ChatRenderTest, MistralV1) {
  const ChatTemplate t = Named("mixtral");
  EXPECT_EQ(t.format, ChatFormat::kMistralV1);
  EXPECT_EQ(Render(t, Conv3(), true),
            "<s> [INST] You are a helpful assistant.\n"
            "\n"
            "Hello [/INST] <think>\n"
            "The user says hello.\n"
            "</think>\n"
            "\n"
            "Hi there! How can I help?</s> [INST] What is 2+2?  [/INST]");
  EXPECT_EQ(Render(t, Conv4(), false),
            "<s> [INST] You are a helpful assistant.\n"
            "\n"
            "Hello [/INST] <think>\n"
            "The user says hello.\n"
            "</think>\n"
            "\n"
            "Hi there! How can I help?</s> [INST] What is 2+2?  [/INST] <think>\n"
            "Simple sum.\n"
            "</think>\n"
            "\n"
            "4</s>");
}

// mixtral-8x7b-instruct-original.jinja (it rejects system messages; ours go into the first
// user turn as mistral-v1 does, which is not a Jinja oracle)
TEST(ChatRenderTest, Llama2MixtralOriginal) {
  const ChatTemplate t = Named("llama2");
  const std::vector<ChatMessage> c3 = Conv3();
  const std::vector<ChatMessage> conv(c3.begin() + 1, c3.end());
  EXPECT_EQ(Render(t, conv, true),
            "<s>[INST] Hello [/INST]<think>\n"
            "The user says hello.\n"
            "</think>\n"
            "\n"
            "Hi there! How can I help?</s>[INST] What is 2+2?  [/INST]");
  EXPECT_TRUE(
      Render(t, c3, true).starts_with("<s>[INST] You are a helpful assistant.\n\nHello [/INST]"));
}

// llama-3-8b-instruct.jinja (content |trim)
TEST(ChatRenderTest, Llama3) {
  EXPECT_EQ(Render(Named("llama3"), Conv3(), true),
            "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n"
            "\n"
            "You are a helpful assistant.<|eot_id|><|start_header_id|>user<|end_header_id|>\n"
            "\n"
            "Hello<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n"
            "\n"
            "<think>\n"
            "The user says hello.\n"
            "</think>\n"
            "\n"
            "Hi there! How can I help?<|eot_id|><|start_header_id|>user<|end_header_id|>\n"
            "\n"
            "What is 2+2?<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n"
            "\n");
}

TEST(ChatRenderTest, PlainChatmlKeepsReasoningAndHasNoBos) {
  ChatTemplate t = Named("chatml");
  t.bos_token = "<|endoftext|>";  // ignored: ChatML templates never emit BOS
  const std::vector<ChatMessage> conv = {{Role::kUser, "Hi"},
                                         {Role::kAssistant, "<think>x</think>y"}};
  EXPECT_EQ(Render(t, conv, true),
            "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n<think>x</think>y<|im_end|>\n"
            "<|im_start|>assistant\n");
}

TEST(ChatRenderTest, BosAndEosComeFromTheTemplateObject) {
  ChatTemplate t = Named("deepseek2");
  t.bos_token = "[B]";
  t.eos_token = "[E]";
  const std::vector<ChatMessage> conv = {{Role::kUser, "u"}, {Role::kAssistant, "a"}};
  EXPECT_EQ(Render(t, conv, false), "[B]User: u\n\nAssistant: a[E]");
}

TEST(ChatRenderTest, EmptyConversation) {
  EXPECT_EQ(Render(Named("deepseek3"), {}, true), "<｜begin▁of▁sentence｜><｜Assistant｜>");
  EXPECT_EQ(Render(Named("qwen3"), {}, false), "");
}

}  // namespace
}  // namespace moesplit::chat
