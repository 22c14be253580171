#include "core/chat/chat_template.h"

#include <array>
#include <utility>

namespace moesplit::chat {
namespace {

// DeepSeek's special tokens use U+FF5C (fullwidth '|') and U+2581 (lower block) in UTF-8.
constexpr std::string_view kDsBos = "<｜begin▁of▁sentence｜>";
constexpr std::string_view kDsEos = "<｜end▁of▁sentence｜>";
constexpr std::string_view kDsUser = "<｜User｜>";
constexpr std::string_view kDsAssistant = "<｜Assistant｜>";

struct FormatInfo {
  ChatFormat format;
  std::string_view name;
  std::string_view bos;
  std::string_view eos;
};

constexpr std::array<FormatInfo, 10> kFormats = {{
    {ChatFormat::kDeepseek3, "deepseek3", kDsBos, kDsEos},
    {ChatFormat::kDeepseekR1, "deepseek-r1", kDsBos, kDsEos},
    {ChatFormat::kDeepseekV31, "deepseek-v3.1", kDsBos, kDsEos},
    {ChatFormat::kDeepseek2, "deepseek2", kDsBos, kDsEos},
    {ChatFormat::kQwen3, "qwen3", "", "<|im_end|>"},
    {ChatFormat::kChatml, "chatml", "", "<|im_end|>"},
    {ChatFormat::kMistralV1, "mistral-v1", "<s>", "</s>"},
    {ChatFormat::kLlama2, "llama2", "<s>", "</s>"},
    {ChatFormat::kLlama3, "llama3", "<|begin_of_text|>", "<|eot_id|>"},
    // Kimi-K2's template emits no BOS, and a turn ends in <|im_end|> (llama.cpp's stop token for
    // this format), not in the vocabulary's "[EOS]".
    {ChatFormat::kKimiK2, "kimi-k2", "", "<|im_end|>"},
}};

constexpr std::array<std::string_view, 11> kNames = {
    "deepseek3",  "deepseek-r1", "deepseek-v3.1", "deepseek2", "qwen3",  "chatml",
    "mistral-v1", "mixtral",     "llama2",        "llama3",    "kimi-k2"};

const FormatInfo& InfoOf(ChatFormat f) {
  for (const FormatInfo& info : kFormats) {
    if (info.format == f) return info;
  }
  MOESPLIT_CHECK(false, "unknown ChatFormat ", static_cast<int>(f));
  return kFormats[0];
}

ChatTemplate MakeTemplate(ChatFormat f) {
  const FormatInfo& info = InfoOf(f);
  ChatTemplate t{f, std::string(info.bos), std::string(info.eos), true};
  t.enable_thinking = f != ChatFormat::kDeepseekV31;  // V3.1's template: thinking = false
  return t;
}

std::string NameList() {
  std::string s;
  for (std::string_view n : kNames) s += (s.empty() ? "" : ", ") + std::string(n);
  return s;
}

bool Contains(std::string_view s, std::string_view needle) {
  return s.find(needle) != std::string_view::npos;
}

}  // namespace

StatusOr<Role> ParseRole(std::string_view name) {
  if (name == "system") return Role::kSystem;
  if (name == "user") return Role::kUser;
  if (name == "assistant") return Role::kAssistant;
  return InvalidArgumentError("unknown chat role \"", name,
                              "\": expected system, user or assistant");
}

const char* RoleName(Role role) {
  switch (role) {
    case Role::kSystem:
      return "system";
    case Role::kUser:
      return "user";
    case Role::kAssistant:
      return "assistant";
  }
  return "?";
}

std::span<const std::string_view> ChatTemplateNames() { return kNames; }

const char* ChatFormatName(ChatFormat format) { return InfoOf(format).name.data(); }

StatusOr<ChatTemplate> ChatTemplateFromName(std::string_view name) {
  if (name == "mixtral") return MakeTemplate(ChatFormat::kMistralV1);
  for (const FormatInfo& info : kFormats) {
    if (info.name == name) return MakeTemplate(info.format);
  }
  return InvalidArgumentError("unknown chat template name \"", name, "\"; known: ", NameList());
}

StatusOr<ChatTemplate> DetectChatTemplate(std::string_view src) {
  // A template that is only a name (llama.cpp allows that too).
  if (auto named = ChatTemplateFromName(src); named.ok()) return named;
  auto unsupported = [&](std::string_view what) -> Status {
    std::string head(src.substr(0, 80));
    for (char& ch : head) {
      if (ch == '\n' || ch == '\r') ch = ' ';
    }
    return InvalidArgumentError("unsupported chat template", what.empty() ? "" : " (", what,
                                what.empty() ? "" : ")", ": tokenizer.chat_template starts with \"",
                                head, src.size() > 80 ? "..." : "",
                                "\"; pass --chat-template NAME with one of: ", NameList());
  };
  if (src.empty()) return unsupported("the model has no chat template");
  if (Contains(src, "<|im_start|>")) {
    if (Contains(src, "<|im_sep|>") || Contains(src, "<end_of_utterance>")) {
      return unsupported("ChatML variant (Phi-4 / SmolVLM)");
    }
    // Qwen3 (and QwQ) reason inside <think>; plain ChatML (Qwen2.5, synthetic models) does not.
    const bool thinking = Contains(src, "<think>") || Contains(src, "enable_thinking");
    return MakeTemplate(thinking ? ChatFormat::kQwen3 : ChatFormat::kChatml);
  }
  if (src.starts_with("mistral") || Contains(src, "[INST]")) {
    if (Contains(src, "[SYSTEM_PROMPT]") || Contains(src, "[AVAILABLE_TOOLS]")) {
      return unsupported("Mistral v3 / v7 template");
    }
    if (Contains(src, "<<SYS>>")) return unsupported("Llama-2 template with <<SYS>>");
    // Mixtral-8x7B-Instruct's current template puts a space before [INST] and the system
    // message into the first turn: ' [INST] ' + system_message + ...
    if (Contains(src, "' [INST] ' + system_message")) return MakeTemplate(ChatFormat::kMistralV1);
    return MakeTemplate(ChatFormat::kLlama2);
  }
  if (Contains(src, "<|start_header_id|>") && Contains(src, "<|end_header_id|>")) {
    return MakeTemplate(ChatFormat::kLlama3);
  }
  if (Contains(src, "'Assistant: ' + message['content'] + eos_token")) {
    return MakeTemplate(ChatFormat::kDeepseek2);
  }
  if (Contains(src, kDsAssistant) && Contains(src, kDsUser) && Contains(src, kDsEos)) {
    // V3.1 (and later hybrids) switch on a `thinking` variable; R1 strips "...</think>" from
    // past answers; V3 has neither.
    if (Contains(src, "not thinking")) {
      ChatTemplate t = MakeTemplate(ChatFormat::kDeepseekV31);
      t.enable_thinking = Contains(src, "enable_thinking");
      return t;
    }
    if (Contains(src, "</think>")) return MakeTemplate(ChatFormat::kDeepseekR1);
    return MakeTemplate(ChatFormat::kDeepseek3);
  }
  // llama.cpp's marker for Kimi-K2, tested after the formats above as it does: the string is the
  // generation prompt of every Moonshot K2 template (the original, the tool-calling Instruct
  // update and K2-Thinking), which llama.cpp's built-in renderer treats alike.
  if (Contains(src, "<|im_assistant|>assistant<|im_middle|>")) {
    return MakeTemplate(ChatFormat::kKimiK2);
  }
  return unsupported("");
}

bool IsThinkingModel(const ChatTemplate& t) {
  return t.format == ChatFormat::kDeepseekR1 || t.format == ChatFormat::kDeepseekV31 ||
         t.format == ChatFormat::kQwen3;
}

bool PromptOpensReasoning(const ChatTemplate& t) {
  return (t.format == ChatFormat::kDeepseekR1 || t.format == ChatFormat::kDeepseekV31) &&
         t.enable_thinking;
}

TemplateKwargs MergeKwargs(const TemplateKwargs& base, const TemplateKwargs& over) {
  return {over.thinking ? over.thinking : base.thinking,
          over.enable_thinking ? over.enable_thinking : base.enable_thinking};
}

ChatTemplate WithKwargs(ChatTemplate t, const TemplateKwargs& kw) {
  if (!IsThinkingModel(t)) return t;
  if (kw.enable_thinking) t.enable_thinking = *kw.enable_thinking;
  if (t.format == ChatFormat::kDeepseekV31 && kw.thinking) t.enable_thinking = *kw.thinking;
  return t;
}

std::string_view EndOfTurn(const ChatTemplate& t) { return InfoOf(t.format).eos; }

}  // namespace moesplit::chat
