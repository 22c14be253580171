// Chat templates: a conversation -> the prompt string the model was trained on.
//
// We do not run Jinja. Like llama.cpp's built-in templates (src/llama-chat.cpp), we recognise
// the model's `tokenizer.chat_template` by distinctive substrings and render the format in C++.
// The rendering follows the real templates exactly for system / user / assistant messages
// (tests compare with the Jinja output of the models' own templates), including their BOS text:
// tokenize the result with special-token parsing ON and WITHOUT adding another BOS.
//
// Formats (name: models; what a system S, user U, assistant A turn and the generation prompt
// G become; BOS/EOS stand for the texts of the model's tokens):
//   deepseek3: DeepSeek-V3, V3-0324.
//     BOS S <｜User｜>U <｜Assistant｜>A EOS ... G = <｜Assistant｜>
//   deepseek-r1: DeepSeek-R1 and its distills. As deepseek3, but a past A keeps only the text
//     after its last "</think>", and G = <｜Assistant｜><think>\n
//   deepseek-v3.1: DeepSeek-V3.1 (hybrid). <｜Assistant｜><think></think> opens an answer;
//     G = <｜Assistant｜><think></think>, or <｜Assistant｜><think> with thinking on (the
//     template's `thinking` variable; see TemplateKwargs).
//   deepseek2: DeepSeek-V2, V2-Lite.  BOS S\n\n User: U\n\n Assistant: A EOS ... G = Assistant:
//   qwen3: Qwen3, Qwen3-MoE. ChatML; past answers lose their <think> block;
//     enable_thinking = false appends <think>\n\n</think>\n\n to G.
//   chatml: plain ChatML.  <|im_start|>role\n content<|im_end|>\n ... G = <|im_start|>assistant\n
//   mistral-v1 (alias mixtral): Mixtral-8x7B-Instruct's current template.
//     BOS " [INST] " S\n\n U " [/INST]" " " A EOS ... (no G)
//   llama2: Mixtral's original template.  BOS "[INST] " U " [/INST]" A EOS ... (no G)
//   llama3: Llama-3.x.  BOS <|start_header_id|>role<|end_header_id|>\n\n content<|eot_id|> ...
//     G = <|start_header_id|>assistant<|end_header_id|>\n\n
//   kimi-k2: Kimi-K2-Instruct, as llama.cpp's built-in renderer writes it (no BOS; unlike
//     Moonshot's Jinja, no default system message when the conversation has none).
//     <|im_system|>system<|im_middle|>S<|im_end|> <|im_user|>user<|im_middle|>U<|im_end|>
//     <|im_assistant|>assistant<|im_middle|>A<|im_end|> ...
//     G = <|im_assistant|>assistant<|im_middle|>
// (Spaces between the pieces above are for reading only, except inside quotes.)
#pragma once

#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/base/status.h"

namespace moesplit::chat {

enum class Role { kSystem, kUser, kAssistant };

struct ChatMessage {
  Role role;
  std::string content;  // for assistant turns: the generated text, reasoning included
};

StatusOr<Role> ParseRole(std::string_view name);  // "system" | "user" | "assistant"
const char* RoleName(Role role);

enum class ChatFormat {
  kDeepseek3,
  kDeepseekR1,
  kDeepseekV31,
  kDeepseek2,
  kQwen3,
  kChatml,
  kMistralV1,
  kLlama2,
  kLlama3,
  kKimiK2,
};

struct ChatTemplate {
  ChatFormat format;
  // Texts of the model's BOS / EOS tokens as the template's bos_token / eos_token. Set from the
  // format by the factories; a caller with the vocabulary may overwrite them. Formats whose
  // template does not emit them (ChatML / Qwen3: no BOS) ignore them.
  std::string bos_token;
  std::string eos_token;
  // Whether the model should reason first (qwen3, deepseek-r1, deepseek-v3.1). Defaults follow
  // the templates: true for qwen3 / deepseek-r1; for deepseek-v3.1 false by name, and when
  // detected, what llama-server renders by default (see DetectChatTemplate).
  bool enable_thinking = true;
};

// Template variables that a request's `chat_template_kwargs` object (llama-server's field) or
// the command line (`--chat-template-kwargs JSON`, `--reasoning on|off`) sets. Only the two that
// change what we render are kept; a template ignores a variable it does not read, as Jinja does.
//  * thinking: DeepSeek-V3.1's switch; wins over enable_thinking there.
//  * enable_thinking: Qwen3's switch (and deepseek-r1's here); for DeepSeek-V3.1 it is used when
//    `thinking` is not given, as the copy of the V3.1 template that llama.cpp ships does
//    ("if not thinking is defined: set thinking = enable_thinking").
struct TemplateKwargs {
  std::optional<bool> thinking;
  std::optional<bool> enable_thinking;
};

// `over`'s values where set, else `base`'s (a request's kwargs over the server's defaults).
TemplateKwargs MergeKwargs(const TemplateKwargs& base, const TemplateKwargs& over);
// The template with the kwargs applied to enable_thinking (formats that do not think: as is).
ChatTemplate WithKwargs(ChatTemplate tmpl, const TemplateKwargs& kwargs);

// The names ChatTemplateFromName accepts (also listed in DetectChatTemplate's error).
std::span<const std::string_view> ChatTemplateNames();
// "deepseek3", ..., as listed above, and "mixtral" (= mistral-v1). InvalidArgument with the
// list of names for anything else.
StatusOr<ChatTemplate> ChatTemplateFromName(std::string_view name);
const char* ChatFormatName(ChatFormat format);

// Recognises a GGUF `tokenizer.chat_template` (Jinja source) by its distinctive substrings, as
// llama.cpp's llm_chat_detect_template does. deepseek-v3.1's thinking default is llama-server's:
// it passes enable_thinking = true (--reasoning auto), which turns thinking on only where the
// template reads enable_thinking (llama.cpp's copy does, DeepSeek's original does not). A template
// that is itself a format name is that format. Unknown -> InvalidArgument naming the template's
// first characters and
// `--chat-template NAME`.
StatusOr<ChatTemplate> DetectChatTemplate(std::string_view jinja_source);

// The prompt for `messages`; add_generation_prompt appends the opening of the assistant's turn.
std::string Render(const ChatTemplate& tmpl, std::span<const ChatMessage> messages,
                   bool add_generation_prompt);

// True for formats whose models emit reasoning between <think> and </think>.
bool IsThinkingModel(const ChatTemplate& tmpl);
// True if the generation prompt ends inside the reasoning block (deepseek-r1's "<think>\n",
// deepseek-v3.1 with thinking): generated text is reasoning until "</think>" appears.
bool PromptOpensReasoning(const ChatTemplate& tmpl);
// The text that ends the assistant's turn ("<｜end▁of▁sentence｜>", "<|im_end|>", "<|eot_id|>",
// "</s>"; Kimi-K2: "<|im_end|>", not its vocabulary's EOS "[EOS]"): a stop string when the
// vocabulary's EOG tokens are not enough.
std::string_view EndOfTurn(const ChatTemplate& tmpl);

// A generated answer split into its reasoning and the final content.
struct ReasoningSplit {
  std::string reasoning;  // without <think> / </think>, outer newlines trimmed
  std::string content;    // after </think>, leading whitespace trimmed
  bool reasoning_done;    // false while the reasoning block is still open (no "</think>" yet)
};
// For thinking formats: a leading "<think>" (after whitespace) opens reasoning, and so does a
// prompt that opened it (PromptOpensReasoning); "</think>" closes it. Non-thinking formats and
// answers without reasoning return everything as content.
ReasoningSplit SplitReasoning(const ChatTemplate& tmpl, std::string_view generated);

}  // namespace moesplit::chat
