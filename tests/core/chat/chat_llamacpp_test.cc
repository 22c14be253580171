// DeepSeek-V3.1 prompts as llama.cpp's template engine renders them: the expected strings come
// from llama-server 0a50d9909 (/apply-template with --jinja and testdata/deepseek-v3.1.jinja,
// the copy of the template llama.cpp ships; testdata/llamacpp_v31_oracle.py), for the default
// and for each chat_template_kwargs setting of `thinking` / `enable_thinking`.
//
// llama.cpp leaves the BOS text out of the rendering because its tokenizer adds BOS; moesplit
// renders the BOS text and tokenizes without adding one (chat_template.h), so the expected
// string here is BOS + llama.cpp's.
//
// Kimi-K2 (at the end): llama.cpp's built-in "kimi-k2" renderer, which llama.cpp also picks for
// Moonshot's Jinja templates when run without --jinja (testdata/kimi_k2_oracle.c prints them).
#include <gtest/gtest.h>

#include <fstream>
#include <iterator>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "core/chat/chat_template.h"

namespace moesplit::chat {
namespace {

const std::string kTestData = std::string(MOESPLIT_SOURCE_DIR) + "/tests/core/chat/testdata/";

std::vector<ChatMessage> Conversation(const std::string& name) {
  const ChatMessage sys{Role::kSystem, "You are a helpful assistant."};
  const ChatMessage u1{Role::kUser, "Hello"};
  const ChatMessage a1{Role::kAssistant, "Hi there! How can I help?"};
  const ChatMessage a1_reasoning{
      Role::kAssistant, "<think>\nThe user says hello.\n</think>\n\nHi there! How can I help?"};
  const ChatMessage u2{Role::kUser, "What is 2+2? "};
  if (name == "user_only") return {u1};
  if (name == "system_user") return {sys, u1};
  if (name == "three_turns") return {sys, u1, a1, u2};
  if (name == "reasoning_in_history") return {sys, u1, a1_reasoning, u2};
  if (name == "two_systems") return {sys, {Role::kSystem, "Be brief."}, u1};
  ADD_FAILURE() << "no conversation " << name;
  return {};
}

struct OracleCase {
  std::string conversation;
  TemplateKwargs kwargs;  // the request's chat_template_kwargs
  std::string llama_cpp;  // /apply-template's "prompt"
};

// clang-format off
const std::vector<OracleCase> kCases = {
    {"user_only", {std::nullopt, std::nullopt}, "<｜User｜>Hello<｜Assistant｜><think>"},
    {"user_only", {false, std::nullopt}, "<｜User｜>Hello<｜Assistant｜><think></think>"},
    {"user_only", {true, std::nullopt}, "<｜User｜>Hello<｜Assistant｜><think>"},
    {"user_only", {std::nullopt, true}, "<｜User｜>Hello<｜Assistant｜><think>"},
    {"user_only", {std::nullopt, false}, "<｜User｜>Hello<｜Assistant｜><think></think>"},
    {"user_only", {false, true}, "<｜User｜>Hello<｜Assistant｜><think></think>"},
    {"user_only", {true, false}, "<｜User｜>Hello<｜Assistant｜><think>"},
    {"system_user", {std::nullopt, std::nullopt}, "You are a helpful assistant.<｜User｜>Hello<｜Assistant｜><think>"},
    {"system_user", {false, std::nullopt}, "You are a helpful assistant.<｜User｜>Hello<｜Assistant｜><think></think>"},
    {"system_user", {true, std::nullopt}, "You are a helpful assistant.<｜User｜>Hello<｜Assistant｜><think>"},
    {"system_user", {std::nullopt, true}, "You are a helpful assistant.<｜User｜>Hello<｜Assistant｜><think>"},
    {"system_user", {std::nullopt, false}, "You are a helpful assistant.<｜User｜>Hello<｜Assistant｜><think></think>"},
    {"system_user", {false, true}, "You are a helpful assistant.<｜User｜>Hello<｜Assistant｜><think></think>"},
    {"system_user", {true, false}, "You are a helpful assistant.<｜User｜>Hello<｜Assistant｜><think>"},
    {"three_turns", {std::nullopt, std::nullopt}, "You are a helpful assistant.<｜User｜>Hello<｜Assistant｜><think></think>Hi there! How can I help?<｜end▁of▁sentence｜><｜User｜>What is 2+2? <｜Assistant｜><think>"},
    {"three_turns", {false, std::nullopt}, "You are a helpful assistant.<｜User｜>Hello<｜Assistant｜><think></think>Hi there! How can I help?<｜end▁of▁sentence｜><｜User｜>What is 2+2? <｜Assistant｜><think></think>"},
    {"three_turns", {true, std::nullopt}, "You are a helpful assistant.<｜User｜>Hello<｜Assistant｜><think></think>Hi there! How can I help?<｜end▁of▁sentence｜><｜User｜>What is 2+2? <｜Assistant｜><think>"},
    {"three_turns", {std::nullopt, true}, "You are a helpful assistant.<｜User｜>Hello<｜Assistant｜><think></think>Hi there! How can I help?<｜end▁of▁sentence｜><｜User｜>What is 2+2? <｜Assistant｜><think>"},
    {"three_turns", {std::nullopt, false}, "You are a helpful assistant.<｜User｜>Hello<｜Assistant｜><think></think>Hi there! How can I help?<｜end▁of▁sentence｜><｜User｜>What is 2+2? <｜Assistant｜><think></think>"},
    {"three_turns", {false, true}, "You are a helpful assistant.<｜User｜>Hello<｜Assistant｜><think></think>Hi there! How can I help?<｜end▁of▁sentence｜><｜User｜>What is 2+2? <｜Assistant｜><think></think>"},
    {"three_turns", {true, false}, "You are a helpful assistant.<｜User｜>Hello<｜Assistant｜><think></think>Hi there! How can I help?<｜end▁of▁sentence｜><｜User｜>What is 2+2? <｜Assistant｜><think>"},
    {"reasoning_in_history", {std::nullopt, std::nullopt}, "You are a helpful assistant.<｜User｜>Hello<｜Assistant｜><think></think>\n\nHi there! How can I help?<｜end▁of▁sentence｜><｜User｜>What is 2+2? <｜Assistant｜><think>"},
    {"reasoning_in_history", {false, std::nullopt}, "You are a helpful assistant.<｜User｜>Hello<｜Assistant｜><think></think>\n\nHi there! How can I help?<｜end▁of▁sentence｜><｜User｜>What is 2+2? <｜Assistant｜><think></think>"},
    {"reasoning_in_history", {true, std::nullopt}, "You are a helpful assistant.<｜User｜>Hello<｜Assistant｜><think></think>\n\nHi there! How can I help?<｜end▁of▁sentence｜><｜User｜>What is 2+2? <｜Assistant｜><think>"},
    {"reasoning_in_history", {std::nullopt, true}, "You are a helpful assistant.<｜User｜>Hello<｜Assistant｜><think></think>\n\nHi there! How can I help?<｜end▁of▁sentence｜><｜User｜>What is 2+2? <｜Assistant｜><think>"},
    {"reasoning_in_history", {std::nullopt, false}, "You are a helpful assistant.<｜User｜>Hello<｜Assistant｜><think></think>\n\nHi there! How can I help?<｜end▁of▁sentence｜><｜User｜>What is 2+2? <｜Assistant｜><think></think>"},
    {"reasoning_in_history", {false, true}, "You are a helpful assistant.<｜User｜>Hello<｜Assistant｜><think></think>\n\nHi there! How can I help?<｜end▁of▁sentence｜><｜User｜>What is 2+2? <｜Assistant｜><think></think>"},
    {"reasoning_in_history", {true, false}, "You are a helpful assistant.<｜User｜>Hello<｜Assistant｜><think></think>\n\nHi there! How can I help?<｜end▁of▁sentence｜><｜User｜>What is 2+2? <｜Assistant｜><think>"},
    {"two_systems", {std::nullopt, std::nullopt}, "You are a helpful assistant.\n\nBe brief.<｜User｜>Hello<｜Assistant｜><think>"},
    {"two_systems", {false, std::nullopt}, "You are a helpful assistant.\n\nBe brief.<｜User｜>Hello<｜Assistant｜><think></think>"},
    {"two_systems", {true, std::nullopt}, "You are a helpful assistant.\n\nBe brief.<｜User｜>Hello<｜Assistant｜><think>"},
    {"two_systems", {std::nullopt, true}, "You are a helpful assistant.\n\nBe brief.<｜User｜>Hello<｜Assistant｜><think>"},
    {"two_systems", {std::nullopt, false}, "You are a helpful assistant.\n\nBe brief.<｜User｜>Hello<｜Assistant｜><think></think>"},
    {"two_systems", {false, true}, "You are a helpful assistant.\n\nBe brief.<｜User｜>Hello<｜Assistant｜><think></think>"},
    {"two_systems", {true, false}, "You are a helpful assistant.\n\nBe brief.<｜User｜>Hello<｜Assistant｜><think>"},
};
// clang-format on

// The format DetectChatTemplate finds in a template file of testdata/.
StatusOr<ChatTemplate> DetectTestFile(const std::string& name) {
  std::ifstream f(kTestData + name, std::ios::binary);
  const std::string src((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  if (src.empty()) return NotFoundError(kTestData, name, " is missing or empty");
  return DetectChatTemplate(src);
}

TEST(ChatLlamaCppOracle, DeepseekV31AsLlamaServerRendersIt) {
  StatusOr<ChatTemplate> detected = DetectTestFile("deepseek-v3.1.jinja");
  ASSERT_TRUE(detected.ok()) << detected.status().ToString();
  ASSERT_EQ(detected->format, ChatFormat::kDeepseekV31);
  ASSERT_EQ(kCases.size(), 35u);
  for (const OracleCase& c : kCases) {
    const ChatTemplate t = WithKwargs(*detected, c.kwargs);
    EXPECT_EQ(Render(t, Conversation(c.conversation), /*add_generation_prompt=*/true),
              detected->bos_token + c.llama_cpp)
        << c.conversation << " thinking=" << (c.kwargs.thinking ? *c.kwargs.thinking : -1)
        << " enable_thinking=" << (c.kwargs.enable_thinking ? *c.kwargs.enable_thinking : -1);
    // The reasoning block is open after the prompt exactly when llama.cpp's prompt ends in it.
    EXPECT_EQ(PromptOpensReasoning(t), c.llama_cpp.ends_with("<think>")) << c.conversation;
  }
}

// Kwargs reach only the formats whose templates read them; a request's kwargs override the
// server's defaults field by field.
TEST(ChatLlamaCppOracle, KwargsScopeAndMerge) {
  ChatTemplate v31 = *ChatTemplateFromName("deepseek-v3.1");
  EXPECT_FALSE(v31.enable_thinking);  // DeepSeek's template: thinking undefined -> false
  EXPECT_TRUE(WithKwargs(v31, {.thinking = true}).enable_thinking);
  EXPECT_TRUE(WithKwargs(v31, {.enable_thinking = true}).enable_thinking);
  EXPECT_FALSE(WithKwargs(v31, {.thinking = false, .enable_thinking = true}).enable_thinking);
  ChatTemplate q3 = *ChatTemplateFromName("qwen3");
  EXPECT_TRUE(WithKwargs(q3, {.thinking = false}).enable_thinking);  // Qwen3 reads no `thinking`
  EXPECT_FALSE(WithKwargs(q3, {.enable_thinking = false}).enable_thinking);
  ChatTemplate v3 = *ChatTemplateFromName("deepseek3");
  EXPECT_EQ(WithKwargs(v3, {.thinking = false, .enable_thinking = false}).enable_thinking,
            v3.enable_thinking);
  const TemplateKwargs m =
      MergeKwargs({.thinking = true, .enable_thinking = false}, {.enable_thinking = true});
  EXPECT_EQ(m.thinking, std::optional<bool>(true));
  EXPECT_EQ(m.enable_thinking, std::optional<bool>(true));
}

// DeepSeek's original V3.1 template reads no enable_thinking (its first lines are below):
// llama-server's default enable_thinking = true does not reach it, so thinking stays off.
TEST(ChatLlamaCppOracle, DetectedDefaultFollowsTheTemplateText) {
  std::ifstream f(kTestData + "deepseek-v3.1.jinja", std::ios::binary);
  std::string src((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  EXPECT_TRUE(DetectChatTemplate(src)->enable_thinking);
  const size_t body = src.find("{%- set ns = namespace(");
  ASSERT_NE(body, std::string::npos);
  const std::string original =
      "{% if not add_generation_prompt is defined %}{% set add_generation_prompt = false %}"
      "{% endif %}{% if not thinking is defined %}{% set thinking = false %}{% endif %}" +
      src.substr(body);
  StatusOr<ChatTemplate> detected = DetectChatTemplate(original);
  ASSERT_TRUE(detected.ok());
  EXPECT_EQ(detected->format, ChatFormat::kDeepseekV31);
  EXPECT_FALSE(detected->enable_thinking);
}

// The expected bytes are llama_chat_apply_template's output (llama.cpp 0a50d9909, libllama built
// from that commit) for the template name "kimi-k2" and, identically, for the Jinja source in
// testdata/kimi-k2-instruct.jinja: testdata/kimi_k2_oracle.c prints them.
constexpr char kKimiSystem[] =
    "<|im_system|>system<|im_middle|>You are a helpful assistant.<|im_end|>";
constexpr char kKimiHistory[] =
    "<|im_user|>user<|im_middle|>Hello<|im_end|>"
    "<|im_assistant|>assistant<|im_middle|>Hi there! How can I help?<|im_end|>"
    "<|im_user|>user<|im_middle|>What is 2+2? <|im_end|>";
constexpr char kKimiGen[] = "<|im_assistant|>assistant<|im_middle|>";

TEST(ChatLlamaCppOracle, KimiK2AsLlamaCppBuiltInRendersIt) {
  StatusOr<ChatTemplate> detected = DetectTestFile("kimi-k2-instruct.jinja");
  ASSERT_TRUE(detected.ok()) << detected.status().ToString();
  ASSERT_EQ(detected->format, ChatFormat::kKimiK2);
  StatusOr<ChatTemplate> named = ChatTemplateFromName("kimi-k2");
  ASSERT_TRUE(named.ok()) << named.status().ToString();
  for (ChatTemplate t : {*detected, *named}) {
    t.bos_token = "[BOS]";  // Kimi's vocabulary has one; the template never emits it
    const std::vector<ChatMessage> conv = Conversation("three_turns");
    const std::string sys_hist = std::string(kKimiSystem) + kKimiHistory;
    EXPECT_EQ(Render(t, conv, /*add_generation_prompt=*/true), sys_hist + kKimiGen);
    EXPECT_EQ(Render(t, conv, /*add_generation_prompt=*/false), sys_hist);
    std::vector<ChatMessage> answered = conv;
    answered.push_back({Role::kAssistant, "4"});
    EXPECT_EQ(Render(t, answered, false), sys_hist + kKimiGen + "4<|im_end|>");
    // No system message: llama.cpp adds none (Moonshot's Jinja would add "You are Kimi, ...").
    EXPECT_EQ(Render(t, std::span(conv).subspan(1), true), kKimiHistory + std::string(kKimiGen));
    EXPECT_EQ(Render(t, {}, true), kKimiGen);
    EXPECT_EQ(EndOfTurn(t), "<|im_end|>");  // llama.cpp's stop text for this format
    EXPECT_FALSE(IsThinkingModel(t));
  }
}

// llama.cpp's marker is the generation prompt's text; ChatML's <|im_start|> is tested first, as
// in llama.cpp, so a template with both stays ChatML.
TEST(ChatLlamaCppOracle, KimiK2DetectedByLlamaCppsMarker) {
  const std::string snippet =
      "{%- for message in messages -%}<|im_user|>user<|im_middle|>{{ message['content'] }}"
      "<|im_end|>{%- endfor -%}{%- if add_generation_prompt -%}"
      "<|im_assistant|>assistant<|im_middle|>{%- endif -%}";
  StatusOr<ChatTemplate> t = DetectChatTemplate(snippet);
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  EXPECT_EQ(t->format, ChatFormat::kKimiK2);
  EXPECT_EQ(t->bos_token, "");
  EXPECT_EQ(t->eos_token, "<|im_end|>");
  EXPECT_FALSE(DetectChatTemplate("<|im_user|>user<|im_middle|>{{ content }}<|im_end|>").ok());
  EXPECT_EQ(DetectChatTemplate("<|im_start|>" + snippet)->format, ChatFormat::kChatml);
}

}  // namespace
}  // namespace moesplit::chat
