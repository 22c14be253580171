// Render() per format and SplitReasoning(). Each RenderX mirrors one model template's
// handling of system / user / assistant messages (tool calls are not supported here).
#include <string>

#include "core/chat/chat_template.h"

namespace moesplit::chat {
namespace {

constexpr std::string_view kDsEos = "<｜end▁of▁sentence｜>";
constexpr std::string_view kDsUser = "<｜User｜>";
constexpr std::string_view kDsAssistant = "<｜Assistant｜>";
constexpr std::string_view kThinkOpen = "<think>";
constexpr std::string_view kThinkClose = "</think>";

// Python's str.strip(chars) family, as the Jinja templates call them.
std::string_view LStrip(std::string_view s, std::string_view chars) {
  const size_t b = s.find_first_not_of(chars);
  return b == std::string_view::npos ? std::string_view() : s.substr(b);
}
std::string_view RStrip(std::string_view s, std::string_view chars) {
  const size_t e = s.find_last_not_of(chars);
  return e == std::string_view::npos ? std::string_view() : s.substr(0, e + 1);
}
std::string_view Strip(std::string_view s, std::string_view chars) {
  return LStrip(RStrip(s, chars), chars);
}
constexpr std::string_view kSpace = " \t\n\r\f\v";  // Jinja's |trim (Python str.strip())

// s.split(sep)[-1]: the text after the last sep (all of s if none).
std::string_view AfterLast(std::string_view s, std::string_view sep) {
  const size_t i = s.rfind(sep);
  return i == std::string_view::npos ? s : s.substr(i + sep.size());
}
// s.split(sep)[0]: the text before the first sep.
std::string_view BeforeFirst(std::string_view s, std::string_view sep) {
  return s.substr(0, s.find(sep));
}

// DeepSeek V3 / R1 / V3.1: all system messages, joined by "\n\n", go first after BOS.
std::string DeepseekSystem(std::span<const ChatMessage> msgs) {
  std::string sys;
  bool first = true;
  for (const ChatMessage& m : msgs) {
    if (m.role != Role::kSystem) continue;
    if (!first) sys += "\n\n";
    sys += m.content;
    first = false;
  }
  return sys;
}

// deepseek3 and deepseek-r1. V3: '<｜Assistant｜>' + content + EOS per answer. R1: the same
// with content.split('</think>')[-1], and the generation prompt opens the reasoning.
std::string RenderDeepseek(const ChatTemplate& t, std::span<const ChatMessage> msgs, bool gen) {
  const bool r1 = t.format == ChatFormat::kDeepseekR1;
  std::string out = t.bos_token + DeepseekSystem(msgs);
  for (const ChatMessage& m : msgs) {
    if (m.role == Role::kUser) {
      out += kDsUser;
      out += m.content;
    } else if (m.role == Role::kAssistant) {
      out += kDsAssistant;
      out += r1 ? AfterLast(m.content, kThinkClose) : std::string_view(m.content);
      out += kDsEos;
    }
  }
  if (gen) {
    out += kDsAssistant;
    if (r1) out += t.enable_thinking ? "<think>\n" : "<think>\n</think>";
  }
  return out;
}

// deepseek-v3.1: the turn opener "<｜Assistant｜>" + "</think>" (or "<think>" when thinking)
// follows a user message; answers keep only the text after the first "</think>".
std::string RenderDeepseekV31(const ChatTemplate& t, std::span<const ChatMessage> msgs, bool gen) {
  std::string out = t.bos_token + DeepseekSystem(msgs);
  bool last_user = false;
  for (const ChatMessage& m : msgs) {
    if (m.role == Role::kUser) {
      out += kDsUser;
      out += m.content;
      last_user = true;
    } else if (m.role == Role::kAssistant) {
      if (last_user) out += std::string(kDsAssistant) + "<think></think>";
      last_user = false;
      const size_t close = m.content.find(kThinkClose);
      std::string_view content = m.content;
      if (close != std::string::npos) content = content.substr(close + kThinkClose.size());
      out += content;
      out += kDsEos;
    }
  }
  if (gen && last_user) {
    out += kDsAssistant;
    out += t.enable_thinking ? "<think>" : "<think></think>";
  }
  return out;
}

// deepseek2: system + "\n\n", "User: " + u + "\n\n", "Assistant: " + a + EOS; "Assistant:".
std::string RenderDeepseek2(const ChatTemplate& t, std::span<const ChatMessage> msgs, bool gen) {
  std::string out = t.bos_token;
  for (const ChatMessage& m : msgs) {
    if (m.role == Role::kSystem) out += m.content + "\n\n";
    if (m.role == Role::kUser) out += "User: " + m.content + "\n\n";
    if (m.role == Role::kAssistant) out += "Assistant: " + m.content + t.eos_token;
  }
  if (gen) out += "Assistant:";
  return out;
}

// chatml and qwen3. Qwen3 splits "<think>r</think>c" answers: before the last user message
// only c.lstrip('\n') is kept; after it (a conversation ending in an assistant turn) the
// answer is rewritten as "<think>\n" + r.strip('\n') + "\n</think>\n\n" + c.lstrip('\n').
std::string RenderChatml(const ChatTemplate& t, std::span<const ChatMessage> msgs, bool gen) {
  const bool qwen3 = t.format == ChatFormat::kQwen3;
  size_t last_query = msgs.empty() ? 0 : msgs.size() - 1;
  for (size_t i = msgs.size(); i-- > 0;) {
    if (msgs[i].role == Role::kUser) {
      last_query = i;
      break;
    }
  }
  std::string out;  // no BOS: the ChatML templates do not emit bos_token
  for (size_t i = 0; i < msgs.size(); ++i) {
    const ChatMessage& m = msgs[i];
    out += "<|im_start|>" + std::string(RoleName(m.role)) + "\n";
    if (!qwen3 || m.role != Role::kAssistant) {
      out += m.content + "<|im_end|>\n";
      continue;
    }
    std::string_view content = m.content;
    std::string_view reasoning;
    if (content.find(kThinkClose) != std::string_view::npos) {
      reasoning =
          LStrip(AfterLast(RStrip(BeforeFirst(content, kThinkClose), "\n"), kThinkOpen), "\n");
      content = LStrip(AfterLast(content, kThinkClose), "\n");
    }
    const bool last = i + 1 == msgs.size();
    if (i > last_query && (last || !reasoning.empty())) {
      out += "<think>\n" + std::string(Strip(reasoning, "\n")) + "\n</think>\n\n";
      content = LStrip(content, "\n");
    }
    out += std::string(content) + "<|im_end|>\n";
  }
  if (gen) {
    out += "<|im_start|>assistant\n";
    if (qwen3 && !t.enable_thinking) out += "<think>\n\n</think>\n\n";
  }
  return out;
}

// mistral-v1 (Mixtral's current template): BOS, ' [INST] ' + [system + '\n\n'] + u + ' [/INST]',
// ' ' + a + EOS. llama2 (Mixtral's original): '[INST] ' + u + ' [/INST]', a + EOS. Neither has
// a generation prompt. A system message (which the original template rejects) is prepended to
// the next user message with "\n\n", as mistral-v1 does for the first one.
std::string RenderMistral(const ChatTemplate& t, std::span<const ChatMessage> msgs) {
  const bool v1 = t.format == ChatFormat::kMistralV1;
  std::string out = t.bos_token;
  std::string pending_system;
  for (const ChatMessage& m : msgs) {
    if (m.role == Role::kSystem) {
      pending_system += m.content + "\n\n";
    } else if (m.role == Role::kUser) {
      out += v1 ? " [INST] " : "[INST] ";
      out += pending_system + m.content + " [/INST]";
      pending_system.clear();
    } else {
      out += (v1 ? " " : "") + m.content + t.eos_token;
    }
  }
  return out;
}

// llama3: BOS, then per message header + content|trim + "<|eot_id|>".
std::string RenderLlama3(const ChatTemplate& t, std::span<const ChatMessage> msgs, bool gen) {
  std::string out = t.bos_token;
  for (const ChatMessage& m : msgs) {
    out += "<|start_header_id|>" + std::string(RoleName(m.role)) + "<|end_header_id|>\n\n";
    out += std::string(Strip(m.content, kSpace)) + "<|eot_id|>";
  }
  if (gen) out += "<|start_header_id|>assistant<|end_header_id|>\n\n";
  return out;
}

// kimi-k2, as llama.cpp's built-in renderer writes it: each message is role opener + content +
// "<|im_end|>", with no separators. With a system message first this equals Moonshot's Jinja;
// without one the Jinja inserts "You are Kimi, ..." and llama.cpp's built-in does not. We follow
// the built-in (llama_chat_apply_template, llama-server --no-jinja) so our prompts are
// byte-identical to a renderer that has no Jinja engine either, as the other formats here are.
std::string RenderKimiK2(std::span<const ChatMessage> msgs, bool gen) {
  std::string out;  // no BOS: the template does not emit bos_token
  for (const ChatMessage& m : msgs) {
    switch (m.role) {
      case Role::kSystem:
        out += "<|im_system|>system<|im_middle|>";
        break;
      case Role::kUser:
        out += "<|im_user|>user<|im_middle|>";
        break;
      case Role::kAssistant:
        out += "<|im_assistant|>assistant<|im_middle|>";
        break;
    }
    out += m.content + "<|im_end|>";
  }
  if (gen) out += "<|im_assistant|>assistant<|im_middle|>";
  return out;
}

}  // namespace

std::string Render(const ChatTemplate& t, std::span<const ChatMessage> msgs, bool gen) {
  switch (t.format) {
    case ChatFormat::kDeepseek3:
    case ChatFormat::kDeepseekR1:
      return RenderDeepseek(t, msgs, gen);
    case ChatFormat::kDeepseekV31:
      return RenderDeepseekV31(t, msgs, gen);
    case ChatFormat::kDeepseek2:
      return RenderDeepseek2(t, msgs, gen);
    case ChatFormat::kQwen3:
    case ChatFormat::kChatml:
      return RenderChatml(t, msgs, gen);
    case ChatFormat::kMistralV1:
    case ChatFormat::kLlama2:
      return RenderMistral(t, msgs);
    case ChatFormat::kLlama3:
      return RenderLlama3(t, msgs, gen);
    case ChatFormat::kKimiK2:
      return RenderKimiK2(msgs, gen);
  }
  MOESPLIT_CHECK(false, "unknown ChatFormat ", static_cast<int>(t.format));
  return {};
}

ReasoningSplit SplitReasoning(const ChatTemplate& t, std::string_view text) {
  if (!IsThinkingModel(t)) return {"", std::string(text), true};
  bool open = PromptOpensReasoning(t);
  std::string_view rest = text;
  const std::string_view lead = LStrip(rest, kSpace);
  if (lead.starts_with(kThinkOpen)) {
    rest = lead.substr(kThinkOpen.size());
    open = true;
  }
  const size_t close = rest.find(kThinkClose);
  if (close == std::string_view::npos) {
    if (!open) return {"", std::string(text), true};
    return {std::string(Strip(rest, "\n")), "", false};  // still thinking (or cut off)
  }
  // "</think>" without an opening: the prompt opened it (R1's older templates did not say so).
  return {std::string(Strip(rest.substr(0, close), "\n")),
          std::string(LStrip(rest.substr(close + kThinkClose.size()), kSpace)), true};
}

}  // namespace moesplit::chat
