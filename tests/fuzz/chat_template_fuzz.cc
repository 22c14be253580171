// libFuzzer entry point for the chat templates: the first byte picks the template (every name
// ChatTemplateNames() lists), whether thinking is on and whether the generation prompt is
// appended; the rest is a message list, each message a role byte and its content up to the next
// 0x00 byte. Role bytes name system / user / assistant, "tool" (not a role we render: ParseRole
// must refuse it) or a role name taken from the content. The whole rest is also tried as a
// model's Jinja source (DetectChatTemplate), and every content through SplitReasoning.
// Render must keep every user message's text (Llama 3 trims it) and add a bounded amount of
// template text per message; SplitReasoning must give back no more than it was given.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/chat/chat_template.h"

namespace chat = moesplit::chat;

namespace {

constexpr std::string_view kRoleNames[] = {"system", "user", "assistant", "tool"};

// Splits `rest` into messages; roles that ParseRole refuses are dropped (after checking that
// refusing is what happens to "tool" and to anything that is not one of the three names).
std::vector<chat::ChatMessage> Messages(std::string_view rest) {
  std::vector<chat::ChatMessage> msgs;
  while (!rest.empty()) {
    const uint8_t head = static_cast<uint8_t>(rest[0]);
    rest.remove_prefix(1);
    const size_t end = rest.find('\0');
    const std::string_view content = rest.substr(0, end);
    rest = end == std::string_view::npos ? std::string_view() : rest.substr(end + 1);
    const std::string_view name = (head & 4) != 0 ? content : kRoleNames[head & 3];
    moesplit::StatusOr<chat::Role> role = chat::ParseRole(name);
    const bool known = name == "system" || name == "user" || name == "assistant";
    if (role.ok() != known) __builtin_trap();
    if (!role.ok()) {
      if (role.status().message().empty()) __builtin_trap();
      continue;
    }
    if (chat::RoleName(*role) != name) __builtin_trap();
    msgs.push_back({*role, std::string(content)});
  }
  return msgs;
}

void CheckSplit(const chat::ChatTemplate& t, std::string_view text) {
  const chat::ReasoningSplit s = chat::SplitReasoning(t, text);
  if (s.reasoning.size() + s.content.size() > text.size()) __builtin_trap();
  if (!chat::IsThinkingModel(t) && (s.content != text || !s.reasoning.empty())) __builtin_trap();
}

std::string_view Trimmed(std::string_view s) {
  constexpr std::string_view kSpace = " \t\n\r\f\v";
  const size_t b = s.find_first_not_of(kSpace);
  if (b == std::string_view::npos) return {};
  return s.substr(b, s.find_last_not_of(kSpace) - b + 1);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const auto names = chat::ChatTemplateNames();
  auto tmpl = chat::ChatTemplateFromName(names[(data[0] & 0x3f) % names.size()]);
  if (!tmpl.ok()) __builtin_trap();  // every listed name must load
  chat::ChatTemplate t = *tmpl;
  t.enable_thinking = (data[0] & 0x40) != 0;
  const bool gen = (data[0] & 0x80) != 0;
  const std::string_view rest(reinterpret_cast<const char*>(data) + 1, size - 1);

  const std::vector<chat::ChatMessage> msgs = Messages(rest);
  const std::string out = chat::Render(t, msgs, gen);
  // Template text per message (role headers, BOS / EOS, <think> blocks) is < 128 bytes.
  size_t content_bytes = 0;
  for (const chat::ChatMessage& m : msgs) content_bytes += m.content.size();
  if (out.size() > content_bytes + 128 * (msgs.size() + 2)) __builtin_trap();
  for (const chat::ChatMessage& m : msgs) {
    if (m.role != chat::Role::kUser) continue;
    const std::string_view want =
        t.format == chat::ChatFormat::kLlama3 ? Trimmed(m.content) : std::string_view(m.content);
    if (out.find(want) == std::string::npos) __builtin_trap();
  }
  for (const chat::ChatMessage& m : msgs) CheckSplit(t, m.content);
  CheckSplit(t, rest);
  (void)chat::EndOfTurn(t);
  (void)chat::PromptOpensReasoning(t);
  // Request kwargs (chat_template_kwargs) change only whether the model thinks.
  const chat::ChatTemplate k = chat::WithKwargs(t, {.thinking = gen, .enable_thinking = !gen});
  if (k.format != t.format || k.bos_token != t.bos_token || k.eos_token != t.eos_token) {
    __builtin_trap();
  }
  if (!chat::IsThinkingModel(t) && k.enable_thinking != t.enable_thinking) __builtin_trap();
  if (t.format == chat::ChatFormat::kDeepseekV31 && k.enable_thinking != gen) __builtin_trap();

  // The rest as a model's tokenizer.chat_template: a template or an error that names it.
  auto detected = chat::DetectChatTemplate(rest);
  if (detected.ok()) {
    (void)chat::Render(*detected, msgs, gen);
  } else if (detected.status().message().empty()) {
    __builtin_trap();
  }
  return 0;
}
