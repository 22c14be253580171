#include "core/tokenizer/tokenizer.h"

#include <algorithm>
#include <bitset>
#include <cstdio>
#include <cstdlib>

#include "core/tokenizer/unicode.h"
#include "core/tokenizer/vocab.h"

namespace moesplit::tokenizer {
namespace {

// A piece of the input after special-token partition: raw text [off, off + len) or one token.
struct Fragment {
  TokenId token = kNoToken;  // kNoToken: raw text
  size_t off = 0;
  size_t len = 0;
};

// Which bytes and adjacent byte pairs occur in a text: lets the partition skip, without a
// search, the (often hundreds of) special tokens that cannot occur.
class BytePairFilter {
 public:
  explicit BytePairFilter(std::string_view s) {
    for (size_t i = 0; i < s.size(); ++i) {
      bytes_.set(static_cast<uint8_t>(s[i]));
      if (i + 1 < s.size()) pairs_.set(Pair(s[i], s[i + 1]));
    }
  }
  bool MayContain(std::string_view t) const {
    if (t.size() == 1) return bytes_.test(static_cast<uint8_t>(t[0]));
    return t.size() > 1 && pairs_.test(Pair(t[0], t[1]));
  }

 private:
  static size_t Pair(char a, char b) {
    return (static_cast<size_t>(static_cast<uint8_t>(a)) << 8) | static_cast<uint8_t>(b);
  }
  std::bitset<256> bytes_;
  std::bitset<65536> pairs_;  // [first byte << 8 | second byte]
};

// llama.cpp's tokenizer_st_partition: for each special token, longest text first, cut every
// occurrence (leftmost first, non-overlapping) out of the raw fragments left so far. CONTROL and
// UNKNOWN tokens only with parse_special; USER_DEFINED tokens always.
std::vector<Fragment> PartitionSpecial(const Vocab& v, std::string_view text, bool parse_special) {
  std::vector<Fragment> frags;
  if (text.empty()) return frags;
  frags.push_back({kNoToken, 0, text.size()});
  const BytePairFilter filter(text);
  for (TokenId id : v.special_by_length) {
    if (!parse_special && (v.attr[id] & (kAttrControl | kAttrUnknown))) continue;
    const std::string& tok = v.text[id];
    if (!filter.MayContain(tok)) continue;
    std::vector<Fragment> next;
    bool found = false;
    for (const Fragment& f : frags) {
      if (f.token != kNoToken) {
        next.push_back(f);
        continue;
      }
      const std::string_view scope = text.substr(0, f.off + f.len);
      size_t cur = f.off;
      for (size_t hit; (hit = scope.find(tok, cur)) != std::string_view::npos;) {
        found = true;
        if (hit > cur) next.push_back({kNoToken, cur, hit - cur});
        next.push_back({id, 0, 0});
        cur = hit + tok.size();
      }
      if (cur < f.off + f.len) next.push_back({kNoToken, cur, f.off + f.len - cur});
    }
    if (found) frags = std::move(next);
  }
  return frags;
}

// SPM text preparation: optional leading space, then ' ' -> U+2581.
std::string EscapeSpaces(std::string_view raw, bool prefix_space) {
  std::string s;
  s.reserve(raw.size() + 8);
  if (prefix_space) s += "\xE2\x96\x81";
  for (char c : raw) {
    if (c == ' ') {
      s += "\xE2\x96\x81";
    } else {
      s += c;
    }
  }
  return s;
}

std::string ReplaceAll(std::string_view s, std::string_view from, std::string_view to) {
  std::string out;
  size_t pos = 0;
  for (size_t hit; (hit = s.find(from, pos)) != std::string_view::npos; pos = hit + from.size()) {
    out.append(s.substr(pos, hit - pos)).append(to);
  }
  return out.append(s.substr(pos));
}

// Byte-level characters -> bytes. A character outside GPT-2's map is written as llama.cpp does:
// "[UNK_BYTE_0x" + its UTF-8 in hex + the whole token text + "]".
std::string ByteLevelDecode(const std::string& text) {
  const ByteLevelMap& m = ByteLevelMap::Get();
  std::string out;
  size_t pos = 0;
  while (pos < text.size()) {
    const uint32_t cp = DecodeUtf8At(text, &pos);
    const int b = m.CodepointToByte(cp);
    if (b >= 0) {
      out.push_back(static_cast<char>(b));
      continue;
    }
    std::string utf8;
    AppendUtf8(cp, &utf8);
    out += "[UNK_BYTE_0x";
    for (char c : utf8) {
      char hex[4];
      std::snprintf(hex, sizeof(hex), "%02x", static_cast<uint8_t>(c));
      out += hex;
    }
    out += text + "]";
  }
  return out;
}

// llama.cpp's clean_up_tokenization_spaces, three in-place passes over the decoded bytes:
// " ?" " !" " ." " ," lose the space; " ' " loses both spaces; " 's" " 'm" " 're" " 've" lose
// the space. Written in place as llama.cpp does, so later checks see earlier edits identically.
void CleanSpaces(std::string* s) {
  std::string& t = *s;
  size_t n = t.size();
  size_t total = n ? 1 : 0;
  for (size_t i = 1; i < n; ++i) {
    const char x = t[i];
    if (t[i - 1] == ' ' && (x == '?' || x == '!' || x == '.' || x == ',')) --total;
    t[total++] = x;
  }
  n = total;
  total = n ? 1 : 0;
  for (size_t i = 1; i < n; ++i) {
    const char x = t[i];
    if (x == '\'' && i + 1 < n && t[i - 1] == ' ' && t[i + 1] == ' ') {
      --total;        // the space before
      t[++i] = '\0';  // and skip the space after
    }
    t[total++] = x;
  }
  n = total;
  total = n ? 1 : 0;
  for (size_t i = 1; i < n; ++i) {
    const char x = t[i];
    if (t[i - 1] == ' ' && x == '\'' && i + 1 < n) {
      const char x1 = t[i + 1];
      const char x2 = i + 2 < n ? t[i + 2] : '\0';
      if (x1 == 's' || x1 == 'm' || (x1 == 'r' && x2 == 'e') || (x1 == 'v' && x2 == 'e')) --total;
    }
    t[total++] = x;
  }
  t.resize(total);
}

}  // namespace

StatusOr<Tokenizer> Tokenizer::FromGguf(const gguf::GgufFile& file) {
  return FromMetadata(file.metadata(), file.path());
}

StatusOr<Tokenizer> Tokenizer::FromMetadata(const std::vector<gguf::KeyValue>& metadata,
                                            std::string_view source) {
  MOESPLIT_ASSIGN_OR_RETURN(Vocab v, LoadVocab(metadata, source));
  return Tokenizer(std::make_shared<const Vocab>(std::move(v)));
}

StatusOr<std::vector<TokenId>> Tokenizer::Encode(std::string_view text, bool add_special,
                                                 bool parse_special) const {
  const Vocab& v = *vocab_;
  std::vector<TokenId> out;
  out.reserve(text.size() / 3 + 2);
  if (add_special && v.add_bos) out.push_back(v.special.bos);
  bool prev_special = true;  // SPM: the input start counts as "after a special token"
  for (const Fragment& f : PartitionSpecial(v, text, parse_special)) {
    if (f.token != kNoToken) {
      out.push_back(f.token);
      prev_special = true;
      continue;
    }
    const std::string_view raw = text.substr(f.off, f.len);
    if (v.type == VocabType::kSpm) {
      SpmEncode(v, EscapeSpaces(raw, v.add_space_prefix && prev_special), &out);
      prev_special = false;
      continue;
    }
    MOESPLIT_ASSIGN_OR_RETURN(std::vector<std::string> words, v.pre_tokenizer->Split(raw));
    for (const std::string& w : words) BpeEncodeWord(v, w, &out);
  }
  if (add_special && v.add_eos) out.push_back(v.special.eos);
  return out;
}

std::string Tokenizer::TokenToPiece(TokenId id, bool render_special) const {
  const Vocab& v = *vocab_;
  MOESPLIT_CHECK(IsValid(id), "token id ", id, " outside the vocabulary of ", v.n_vocab());
  const uint32_t attr = v.attr[id];
  const std::string& text = v.text[id];
  if (attr & (kAttrUnknown | kAttrControl)) return render_special ? text : std::string();
  if (attr & kAttrUserDefined) return text;
  if (attr & kAttrNormal) {
    return v.type == VocabType::kSpm ? ReplaceAll(text, "\xE2\x96\x81", " ")
                                     : ByteLevelDecode(text);
  }
  if (attr & kAttrByte) {
    // "<0xXX>": the two hex digits at offset 3.
    const std::string hex = text.size() >= 5 ? text.substr(3, 2) : std::string("0");
    return std::string(1, static_cast<char>(std::strtol(hex.c_str(), nullptr, 16)));
  }
  return std::string();  // UNUSED, UNDEFINED
}

std::string Tokenizer::Decode(std::span<const TokenId> ids, bool remove_special,
                              bool render_special) const {
  const Vocab& v = *vocab_;
  bool strip_space = v.add_space_prefix;  // the space SPM put in front of the first word
  if (remove_special && v.add_bos && !ids.empty() && ids.front() == v.special.bos) {
    strip_space = false;
    ids = ids.subspan(1);
  }
  if (remove_special && v.add_eos && !ids.empty() && ids.back() == v.special.eos) {
    ids = ids.first(ids.size() - 1);
  }
  std::string out;
  for (TokenId id : ids) {
    std::string piece = TokenToPiece(id, render_special);
    if (strip_space && !piece.empty() && piece[0] == ' ') piece.erase(0, 1);
    strip_space = false;
    out += piece;
  }
  if (v.clean_spaces) CleanSpaces(&out);
  return out;
}

int32_t Tokenizer::n_vocab() const { return vocab_->n_vocab(); }
VocabType Tokenizer::type() const { return vocab_->type; }
const std::string& Tokenizer::model() const { return vocab_->model; }
const std::string& Tokenizer::pre() const { return vocab_->pre; }
const SpecialTokens& Tokenizer::special() const { return vocab_->special; }
bool Tokenizer::add_bos() const { return vocab_->add_bos; }
bool Tokenizer::add_eos() const { return vocab_->add_eos; }
bool Tokenizer::add_space_prefix() const { return vocab_->add_space_prefix; }
const std::vector<std::string>& Tokenizer::warnings() const { return vocab_->warnings; }

const std::string& Tokenizer::TokenText(TokenId id) const {
  MOESPLIT_CHECK(IsValid(id), "token id ", id, " outside the vocabulary of ", n_vocab());
  return vocab_->text[id];
}

uint32_t Tokenizer::Attributes(TokenId id) const {
  MOESPLIT_CHECK(IsValid(id), "token id ", id, " outside the vocabulary of ", n_vocab());
  return vocab_->attr[id];
}

bool Tokenizer::IsEog(TokenId id) const {
  return std::binary_search(vocab_->eog.begin(), vocab_->eog.end(), id);
}

std::optional<TokenId> Tokenizer::Find(std::string_view text) const {
  const TokenId id = vocab_->Find(text);
  return id == kNoToken ? std::nullopt : std::optional<TokenId>(id);
}

std::string StreamingDetokenizer::Push(TokenId id) {
  pending_ += tok_->TokenToPiece(id, render_special_);
  const size_t n = CompleteUtf8Prefix(pending_);
  std::string out = pending_.substr(0, n);
  pending_.erase(0, n);
  return out;
}

std::string StreamingDetokenizer::Flush() {
  std::string out;
  out.swap(pending_);
  return out;
}

}  // namespace moesplit::tokenizer
