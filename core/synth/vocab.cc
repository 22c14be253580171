#include "core/synth/vocab.h"

#include <map>
#include <utility>

#include "core/base/status.h"

namespace moesplit::synth {
namespace {

// Appends the UTF-8 encoding of code point cp (< 0x800 suffices for GPT-2's map: max U+0143).
void AppendUtf8(uint32_t cp, std::string* out) {
  if (cp < 0x80) {
    out->push_back(static_cast<char>(cp));
  } else {
    MOESPLIT_CHECK(cp < 0x800);
    out->push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

enum class CharClass { kLetter, kDigit, kSpace, kOtherSpace, kPunct };

CharClass ClassOf(unsigned char c) {
  if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c >= 0x80) return CharClass::kLetter;
  if (c >= '0' && c <= '9') return CharClass::kDigit;
  if (c == ' ') return CharClass::kSpace;
  if (c == '\n' || c == '\t' || c == '\r') return CharClass::kOtherSpace;
  return CharClass::kPunct;
}

// GPT-2-like pre-split: " word", " 123", " ;;", runs of whitespace. Returns piece -> count.
std::map<std::string, int64_t> SplitWords(std::string_view text) {
  std::map<std::string, int64_t> counts;
  size_t i = 0;
  while (i < text.size()) {
    size_t start = i;
    CharClass c = ClassOf(text[i]);
    if (c == CharClass::kSpace && i + 1 < text.size() &&
        ClassOf(text[i + 1]) != CharClass::kSpace &&
        ClassOf(text[i + 1]) != CharClass::kOtherSpace) {
      c = ClassOf(text[++i]);  // the space leads the next word
    } else if (c == CharClass::kSpace) {
      c = CharClass::kOtherSpace;  // whitespace runs mix spaces and newlines
    }
    while (i < text.size()) {
      CharClass ci = ClassOf(text[i]);
      if (c == CharClass::kOtherSpace ? (ci != CharClass::kSpace && ci != CharClass::kOtherSpace)
                                      : ci != c) {
        break;
      }
      ++i;
    }
    ++counts[std::string(text.substr(start, i - start))];
  }
  return counts;
}

struct Word {
  std::vector<std::string> symbols;  // byte-unicode pieces
  int64_t count = 0;
};

using Pair = std::pair<std::string, std::string>;

// The most frequent adjacent pair; ties go to the smallest pair (map order). False if none.
bool BestPair(const std::vector<Word>& words, Pair* best) {
  std::map<Pair, int64_t> counts;
  for (const Word& w : words) {
    for (size_t k = 0; k + 1 < w.symbols.size(); ++k) {
      counts[{w.symbols[k], w.symbols[k + 1]}] += w.count;
    }
  }
  int64_t best_count = 0;
  for (const auto& [pair, n] : counts) {
    if (n > best_count) {
      best_count = n;
      *best = pair;
    }
  }
  return best_count > 0;
}

void ApplyMerge(const Pair& p, std::vector<Word>* words) {
  for (Word& w : *words) {
    std::vector<std::string> out;
    out.reserve(w.symbols.size());
    for (size_t k = 0; k < w.symbols.size(); ++k) {
      if (k + 1 < w.symbols.size() && w.symbols[k] == p.first && w.symbols[k + 1] == p.second) {
        out.push_back(p.first + p.second);
        ++k;
      } else {
        out.push_back(w.symbols[k]);
      }
    }
    w.symbols = std::move(out);
  }
}

// The oracle's merges: "Ġ"+[a-z], "Ġ"+[A-Z], then [a-z][a-z], then "Ġ"[a-z] [a-z] ...
std::vector<std::string> DsTinyMerges(int64_t max_merges) {
  const std::string g = ByteToUnicode(' ');
  std::vector<std::string> m;
  for (char c = 'a'; c <= 'z'; ++c) m.push_back(g + " " + c);
  for (char c = 'A'; c <= 'Z'; ++c) m.push_back(g + " " + c);
  for (char a = 'a'; a <= 'z'; ++a) {
    for (char b = 'a'; b <= 'z'; ++b) m.push_back(std::string{a, ' ', b});
  }
  for (char a = 'a'; a <= 'z'; ++a) {
    for (char b = 'a'; b <= 'z'; ++b) m.push_back(g + a + " " + b);
  }
  if (static_cast<int64_t>(m.size()) > max_merges) m.resize(max_merges);
  return m;
}

struct StyleInfo {
  std::vector<std::string> lead;   // ids 0..
  std::vector<std::string> trail;  // the last ids
};

StyleInfo SpecialsOf(VocabStyle style) {
  switch (style) {
    case VocabStyle::kDsTiny:
      return {{"<｜begin▁of▁sentence｜>", "<｜end▁of▁sentence｜>"}, {}};
    case VocabStyle::kDeepseek:
      return {{"<｜begin▁of▁sentence｜>", "<｜end▁of▁sentence｜>"},
              {"<｜User｜>", "<｜Assistant｜>"}};
    case VocabStyle::kQwen:
      return {{"<|endoftext|>", "<|im_start|>", "<|im_end|>"}, {}};
    case VocabStyle::kLlama:
      return {{"<s>", "</s>"}, {}};
    case VocabStyle::kKimi: {
      // Kimi-K2 keeps its special tokens in the last 256 ids (tokenizer_config.json:
      // [BOS] 163584 of 163840, [EOS] +1, <|im_end|> +2, <|im_user|> +3, <|im_assistant|> +4,
      // <|start_header_id|> +6, <|end_header_id|> +7, [EOT] +9, <|im_system|> +10,
      // <|im_middle|> +17); the other ids get placeholder names of ours.
      std::vector<std::string> trail(256);
      for (size_t i = 0; i < trail.size(); ++i) {
        trail[i] = "<|moesplit_reserved_" + std::to_string(i) + "|>";
      }
      const std::pair<int, const char*> named[] = {{0, "[BOS]"},
                                                   {1, "[EOS]"},
                                                   {2, "<|im_end|>"},
                                                   {3, "<|im_user|>"},
                                                   {4, "<|im_assistant|>"},
                                                   {6, "<|start_header_id|>"},
                                                   {7, "<|end_header_id|>"},
                                                   {9, "[EOT]"},
                                                   {10, "<|im_system|>"},
                                                   {17, "<|im_middle|>"}};
      for (const auto& [at, text] : named) trail[at] = text;
      return {{}, std::move(trail)};
    }
  }
  return {};
}

constexpr const char* kDeepseekTemplate =
    "{% if not add_generation_prompt is defined %}{% set add_generation_prompt = false %}"
    "{% endif %}{{ bos_token }}{% for message in messages %}"
    "{% if message['role'] == 'system' %}{{ message['content'] }}"
    "{% elif message['role'] == 'user' %}{{ '<｜User｜>' + message['content'] }}"
    "{% elif message['role'] == 'assistant' %}"
    "{{ '<｜Assistant｜>' + message['content'] + '<｜end▁of▁sentence｜>' }}{% endif %}"
    "{% endfor %}{% if add_generation_prompt %}{{ '<｜Assistant｜>' }}{% endif %}";
constexpr const char* kQwenTemplate =
    "{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\\n' + "
    "message['content'] + '<|im_end|>' + '\\n' }}{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}";
constexpr const char* kMixtralTemplate =
    "{{ bos_token }}{% for message in messages %}{% if message['role'] == 'user' %}"
    "{{ '[INST] ' + message['content'] + ' [/INST]' }}"
    "{% elif message['role'] == 'assistant' %}{{ message['content'] + eos_token }}{% endif %}"
    "{% endfor %}";

void SetStyleFields(VocabStyle style, bool with_chat_template, Vocab* v) {
  switch (style) {
    case VocabStyle::kDsTiny:
    case VocabStyle::kDeepseek:
      v->pre = "deepseek-v3";
      v->bos = 0, v->eos = 1, v->pad = 1, v->add_bos = true, v->add_eos = false;
      if (with_chat_template) v->chat_template = kDeepseekTemplate;
      break;
    case VocabStyle::kQwen:
      v->pre = "qwen2";
      v->bos = 0, v->eos = 2, v->pad = 0, v->add_bos = false;
      if (with_chat_template) v->chat_template = kQwenTemplate;
      break;
    case VocabStyle::kLlama:
      v->pre = "llama-bpe";
      v->bos = 0, v->eos = 1, v->add_bos = true;
      if (with_chat_template) v->chat_template = kMixtralTemplate;
      break;
    case VocabStyle::kKimi:
      v->pre = "kimi-k2";  // BOS / EOS ids: set by BuildVocab (the last 256 ids)
      break;
  }
}

}  // namespace

std::string ByteToUnicode(uint8_t b) {
  // Printable bytes map to themselves; the other 68 get U+0100.. in byte order.
  auto printable = [](int x) {
    return (x >= 33 && x <= 126) || (x >= 161 && x <= 172) || x >= 174;
  };
  std::string out;
  if (printable(b)) {
    AppendUtf8(b, &out);
    return out;
  }
  uint32_t n = 0;
  for (int x = 0; x < b; ++x) n += printable(x) ? 0 : 1;
  AppendUtf8(256 + n, &out);
  return out;
}

std::vector<std::string> LearnMerges(std::string_view text, int64_t max_merges) {
  std::vector<Word> words;
  for (const auto& [piece, count] : SplitWords(text)) {
    Word w;
    w.count = count;
    for (unsigned char c : piece) w.symbols.push_back(ByteToUnicode(c));
    words.push_back(std::move(w));
  }
  std::vector<std::string> merges;
  Pair best;
  while (static_cast<int64_t>(merges.size()) < max_merges && BestPair(words, &best)) {
    merges.push_back(best.first + " " + best.second);
    ApplyMerge(best, &words);
  }
  return merges;
}

Vocab BuildVocab(VocabStyle style, int64_t n_vocab, bool with_chat_template) {
  Vocab v;
  SetStyleFields(style, with_chat_template, &v);
  const StyleInfo sp = SpecialsOf(style);
  const int64_t n_fixed = static_cast<int64_t>(sp.lead.size() + sp.trail.size()) + 256;
  MOESPLIT_CHECK(n_vocab >= n_fixed, "vocab ", n_vocab, " < ", n_fixed);
  for (const std::string& s : sp.lead)
    v.tokens.push_back(s), v.token_types.push_back(kTokenControl);
  for (int b = 0; b < 256; ++b) {
    v.tokens.push_back(ByteToUnicode(static_cast<uint8_t>(b)));
    v.token_types.push_back(kTokenNormal);
  }
  const int64_t max_merges = n_vocab - n_fixed;
  v.merges = style == VocabStyle::kDsTiny ? DsTinyMerges(max_merges)
                                          : LearnMerges(TrainingCorpus(), max_merges);
  // A merge whose result already exists (from another split) adds no token.
  std::map<std::string, bool> seen;
  for (const std::string& t : v.tokens) seen[t] = true;
  for (const std::string& m : v.merges) {
    const size_t sp_pos = m.find(' ');
    std::string tok = m.substr(0, sp_pos) + m.substr(sp_pos + 1);
    if (seen[tok]) continue;
    seen[tok] = true;
    v.tokens.push_back(std::move(tok));
    v.token_types.push_back(kTokenNormal);
  }
  const int64_t pad_until = n_vocab - static_cast<int64_t>(sp.trail.size());
  while (static_cast<int64_t>(v.tokens.size()) < pad_until) {
    v.tokens.push_back("[PAD" + std::to_string(v.tokens.size()) + "]");
    v.token_types.push_back(kTokenUnused);
  }
  for (const std::string& s : sp.trail)
    v.tokens.push_back(s), v.token_types.push_back(kTokenControl);
  MOESPLIT_CHECK(static_cast<int64_t>(v.tokens.size()) == n_vocab);
  if (style == VocabStyle::kKimi) {
    v.bos = static_cast<uint32_t>(n_vocab - 256), v.eos = v.bos + 1;
  }
  return v;
}

}  // namespace moesplit::synth
