// Loading tokenizer.ggml.* metadata into a Vocab with llama.cpp's defaults and load-time
// adjustments (src/llama-vocab.cpp, llama_vocab::impl::load), for the "gpt2" and "llama" models.
#include "core/tokenizer/vocab.h"

#include <algorithm>
#include <cstdio>
#include <unordered_map>

#include "core/tokenizer/unicode.h"

namespace moesplit::tokenizer {
namespace {

// Typed, optional access to the metadata; errors name the source and the key.
class Meta {
 public:
  Meta(const std::vector<gguf::KeyValue>& kvs, std::string_view source) : source_(source) {
    for (const gguf::KeyValue& kv : kvs) index_.emplace(kv.key, &kv.value);
  }
  const gguf::Value* Find(std::string_view key) const {
    auto it = index_.find(key);
    return it == index_.end() ? nullptr : it->second;
  }
  Status Error(std::string_view key, const Status& s) const {
    return Status(s.code(), StrCat(source_, ": ", key, ": ", s.message()));
  }
  StatusOr<std::optional<std::string>> String(std::string_view key) const {
    const gguf::Value* v = Find(key);
    if (!v) return std::optional<std::string>();
    auto s = v->AsString();
    if (!s.ok()) return Error(key, s.status());
    return std::optional<std::string>(std::string(*s));
  }
  StatusOr<std::optional<bool>> Bool(std::string_view key) const {
    const gguf::Value* v = Find(key);
    if (!v) return std::optional<bool>();
    auto b = v->AsBool();
    if (!b.ok()) return Error(key, b.status());
    return std::optional<bool>(*b);
  }
  StatusOr<std::optional<int64_t>> Int(std::string_view key) const {
    const gguf::Value* v = Find(key);
    if (!v) return std::optional<int64_t>();
    auto i = v->AsInt();
    if (!i.ok()) return Error(key, i.status());
    return std::optional<int64_t>(*i);
  }
  // nullptr if absent; an error if present but not an array.
  StatusOr<const gguf::Array*> Array(std::string_view key) const {
    const gguf::Value* v = Find(key);
    if (!v) return static_cast<const gguf::Array*>(nullptr);
    auto a = v->AsArray();
    if (!a.ok()) return Error(key, a.status());
    return *a;
  }
  const std::string& source() const { return source_; }

 private:
  std::string source_;
  std::unordered_map<std::string_view, const gguf::Value*> index_;
};

constexpr std::string_view kTokensKey = "tokenizer.ggml.tokens";

uint32_t AttrFromType(int64_t type) {
  switch (static_cast<TokenType>(type)) {
    case TokenType::kUnknown:
      return kAttrUnknown;
    case TokenType::kUnused:
      return kAttrUnused;
    case TokenType::kNormal:
      return kAttrNormal;
    case TokenType::kControl:
      return kAttrControl;
    case TokenType::kUserDefined:
      return kAttrUserDefined;
    case TokenType::kByte:
      return kAttrByte;
    default:
      return kAttrUndefined;
  }
}

// tokens, scores, token_type -> text / score / attr / text_to_id.
Status ReadTokens(const Meta& m, Vocab* v) {
  MOESPLIT_ASSIGN_OR_RETURN(const gguf::Array* tokens, m.Array(kTokensKey));
  if (!tokens)
    return NotFoundError(m.source(), ": no ", kTokensKey, " (not a model with a vocabulary?)");
  const size_t n = tokens->items.size();
  if (n == 0) return InvalidArgumentError(m.source(), ": ", kTokensKey, " is empty");
  MOESPLIT_ASSIGN_OR_RETURN(const gguf::Array* scores, m.Array("tokenizer.ggml.scores"));
  MOESPLIT_ASSIGN_OR_RETURN(const gguf::Array* types, m.Array("tokenizer.ggml.token_type"));
  for (auto [arr, key] : {std::pair{scores, "tokenizer.ggml.scores"},
                          std::pair{types, "tokenizer.ggml.token_type"}}) {
    if (arr && arr->items.size() != n) {
      return InvalidArgumentError(m.source(), ": ", key, " has ", arr->items.size(),
                                  " entries but ", kTokensKey, " has ", n,
                                  "; the file's vocabulary is inconsistent");
    }
  }
  v->text.resize(n);
  v->score.assign(n, 0.0f);
  v->attr.assign(n, kAttrNormal);
  v->text_to_id.reserve(n);
  for (size_t i = 0; i < n; ++i) {
    auto s = tokens->items[i].AsString();
    if (!s.ok()) return m.Error(StrCat(kTokensKey, "[", i, "]"), s.status());
    // llama.cpp renames empty tokens so that they stay distinct.
    v->text[i] = s->empty() ? StrCat("[EMPTY_", i, "]") : std::string(*s);
    if (scores) {
      auto f = scores->items[i].AsFloat();
      if (!f.ok()) return m.Error(StrCat("tokenizer.ggml.scores[", i, "]"), f.status());
      v->score[i] = static_cast<float>(*f);
    }
    if (types) {
      auto t = types->items[i].AsInt();
      if (!t.ok()) return m.Error(StrCat("tokenizer.ggml.token_type[", i, "]"), t.status());
      v->attr[i] = AttrFromType(*t);
    }
    auto [it, inserted] = v->text_to_id.emplace(v->text[i], static_cast<TokenId>(i));
    if (!inserted) {
      return InvalidArgumentError(m.source(), ": ", kTokensKey, " has the text '", v->text[i],
                                  "' twice (ids ", it->second, " and ", i, ")");
    }
  }
  return Status::Ok();
}

// tokenizer.ggml.merges: "left right" split at the first space after the first byte; the first
// occurrence of a pair keeps its rank.
Status ReadMerges(const Meta& m, Vocab* v) {
  MOESPLIT_ASSIGN_OR_RETURN(const gguf::Array* merges, m.Array("tokenizer.ggml.merges"));
  // llama.cpp accepts a Kimi-K2 vocabulary without merges (its converter does write them).
  if (!merges && v->pre == "kimi-k2") return Status::Ok();
  if (!merges) {
    return NotFoundError(m.source(),
                         ": tokenizer.ggml.model is 'gpt2' but tokenizer.ggml.merges is missing");
  }
  v->id_merges.reserve(merges->items.size());
  for (size_t i = 0; i < merges->items.size(); ++i) {
    auto s = merges->items[i].AsString();
    if (!s.ok()) return m.Error(StrCat("tokenizer.ggml.merges[", i, "]"), s.status());
    const std::string_view line = *s;
    const size_t sp = line.size() > 1 ? line.find(' ', 1) : std::string_view::npos;
    if (sp == std::string_view::npos) continue;  // never matches a pair of non-empty symbols
    const std::string_view left = line.substr(0, sp), right = line.substr(sp + 1);
    const auto rank = static_cast<int32_t>(i);
    v->text_merges.emplace(StrCat(left, std::string_view("\0", 1), right), rank);
    const TokenId l = v->Find(left), r = v->Find(right);
    if (l == kNoToken || r == kNoToken) continue;
    const uint64_t key = (static_cast<uint64_t>(l) << 32) | static_cast<uint32_t>(r);
    v->id_merges.emplace(key, IdMerge{rank, v->Find(StrCat(left, right))});
  }
  return Status::Ok();
}

// Model type, pre-tokenizer and llama.cpp's per-type defaults (before the metadata overrides).
Status ApplyModelDefaults(const Meta& m, Vocab* v) {
  MOESPLIT_ASSIGN_OR_RETURN(auto model, m.String("tokenizer.ggml.model"));
  if (!model) return NotFoundError(m.source(), ": no tokenizer.ggml.model");
  v->model = *model;
  SpecialTokens& sp = v->special;
  if (v->model == "llama") {
    v->type = VocabType::kSpm;
    v->pre = "default";
    sp.bos = 1, sp.eos = 2, sp.unk = 0;
    v->add_space_prefix = true, v->add_bos = true;
    return Status::Ok();
  }
  if (v->model != "gpt2") {
    return UnimplementedError(m.source(), ": tokenizer.ggml.model '", v->model,
                              "' is not supported; supported: gpt2 (byte-level BPE), llama "
                              "(SentencePiece)");
  }
  v->type = VocabType::kBpe;
  sp.bos = 11, sp.eos = 11;
  MOESPLIT_ASSIGN_OR_RETURN(auto pre, m.String("tokenizer.ggml.pre"));
  v->pre = pre && !pre->empty() ? *pre : "default";
  if (!pre || pre->empty()) v->warnings.push_back("no tokenizer.ggml.pre: using 'default'");
  auto p = PreTokenizer::Create(v->pre);
  if (!p.ok()) return Status(p.status().code(), StrCat(m.source(), ": ", p.status().message()));
  v->pre = p->name();
  v->pre_tokenizer.emplace(std::move(p).value());
  v->clean_spaces = true;
  const std::string& n = v->pre;
  if (n == "llama3" || n == "llama-v3" || n == "llama-bpe") v->ignore_merges = v->add_bos = true;
  if (n.starts_with("deepseek-") || n == "qwen2" || n == "kimi-k2") v->clean_spaces = false;
  return ReadMerges(m, v);
}

// Special ids and add_* flags from the metadata. An id outside the vocabulary is ignored with a
// warning (as llama.cpp), except BOS/EOS when they would be added.
Status ReadSpecialIds(const Meta& m, Vocab* v) {
  SpecialTokens& sp = v->special;
  const std::pair<const char*, TokenId*> keys[] = {
      {"bos_token_id", &sp.bos},         {"eos_token_id", &sp.eos},
      {"eot_token_id", &sp.eot},         {"eom_token_id", &sp.eom},
      {"unknown_token_id", &sp.unk},     {"seperator_token_id", &sp.sep},
      {"padding_token_id", &sp.pad},     {"mask_token_id", &sp.mask},
      {"fim_pre_token_id", &sp.fim_pre}, {"fim_suf_token_id", &sp.fim_suf},
      {"fim_mid_token_id", &sp.fim_mid}, {"fim_pad_token_id", &sp.fim_pad},
      {"fim_rep_token_id", &sp.fim_rep}, {"fim_sep_token_id", &sp.fim_sep},
      {"prefix_token_id", &sp.fim_pre},  {"suffix_token_id", &sp.fim_suf},
      {"middle_token_id", &sp.fim_mid},
  };
  for (auto [name, id] : keys) {
    const std::string key = StrCat("tokenizer.ggml.", name);
    MOESPLIT_ASSIGN_OR_RETURN(auto value, m.Int(key));
    if (!value) continue;
    if (*value < 0 || *value >= v->n_vocab()) {
      v->warnings.push_back(StrCat(key, " = ", *value, " is outside the vocabulary (", v->n_vocab(),
                                   " tokens); using ", *id));
      continue;
    }
    *id = static_cast<TokenId>(*value);
  }
  MOESPLIT_ASSIGN_OR_RETURN(auto add_bos, m.Bool("tokenizer.ggml.add_bos_token"));
  MOESPLIT_ASSIGN_OR_RETURN(auto add_eos, m.Bool("tokenizer.ggml.add_eos_token"));
  MOESPLIT_ASSIGN_OR_RETURN(auto prefix, m.Bool("tokenizer.ggml.add_space_prefix"));
  if (add_bos) v->add_bos = *add_bos;
  if (add_eos) v->add_eos = *add_eos;
  if (prefix) v->add_space_prefix = *prefix;
  for (auto [on, id, what] : {std::tuple{v->add_bos, sp.bos, "bos_token_id"},
                              std::tuple{v->add_eos, sp.eos, "eos_token_id"}}) {
    if (on && (id < 0 || id >= v->n_vocab())) {
      return InvalidArgumentError(m.source(), ": tokenizer.ggml.", what, " ", id,
                                  " is outside the vocabulary (", v->n_vocab(),
                                  " tokens) but the model asks to add it");
    }
  }
  return Status::Ok();
}

// llama.cpp recognises some special tokens by their text when no key names them, and marks them
// (and every end-of-generation token) CONTROL. Among several candidates we take the lowest id.
void DetectSpecialByText(Vocab* v) {
  SpecialTokens& sp = v->special;
  const std::pair<TokenId*, std::vector<std::string_view>> by_text[] = {
      {&sp.eot,
       {"<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>", "<|endoftext|>", "<|end_of_text|>",
        "<EOT>", "_<EOT>", "[EOT]", "<｜end▁of▁sentence｜>", "<end_of_utterance>"}},
      {&sp.eom, {"<|eom_id|>"}},
      {&sp.fim_pre,
       {"<|fim_prefix|>", "<fim-prefix>", "<fim_prefix>", "<｜fim▁begin｜>", "<PRE>", "▁<PRE>",
        "<|code_prefix|>", "<|prefix|>"}},
      {&sp.fim_suf,
       {"<|fim_suffix|>", "<fim-suffix>", "<fim_suffix>", "<｜fim▁hole｜>", "<SUF>", "▁<SUF>",
        "<|code_suffix|>", "<|suffix|>"}},
      {&sp.fim_mid,
       {"<|fim_middle|>", "<fim-middle>", "<fim_middle>", "<｜fim▁end｜>", "<MID>", "▁<MID>",
        "<|code_middle|>", "<|middle|>"}},
      {&sp.fim_pad, {"<|fim_pad|>", "<fim-pad>", "<fim_pad>", "<PAD>", "[PAD]"}},
      {&sp.fim_rep, {"<|fim_repo|>", "<|repo_name|>", "<fim-repo>", "<REPO>", "<reponame>"}},
      {&sp.fim_sep, {"<|file_sep|>"}},
  };
  for (const auto& [slot, texts] : by_text) {
    if (*slot != kNoToken) continue;
    for (std::string_view t : texts) {
      const TokenId id = v->Find(t);
      if (id != kNoToken && (*slot == kNoToken || id < *slot)) *slot = id;
    }
    if (*slot != kNoToken) v->attr[*slot] |= kAttrControl;
  }
  static constexpr std::string_view kEogTexts[] = {"<|eot_id|>",
                                                   "<|im_end|>",
                                                   "<|end|>",
                                                   "<|return|>",
                                                   "<|call|>",
                                                   "<|flush|>",
                                                   "<|calls|>",
                                                   "<end_of_turn>",
                                                   "<|endoftext|>",
                                                   "</s>",
                                                   "<|eom_id|>",
                                                   "<EOT>",
                                                   "_<EOT>",
                                                   "[EOT]",
                                                   "[EOS]",
                                                   "<|end_of_text|>",
                                                   "<end_of_utterance>",
                                                   "<eos>",
                                                   "<turn|>",
                                                   "<|tool_response>",
                                                   "<｜end▁of▁sentence｜>"};
  std::vector<TokenId> eog;
  for (TokenId id : {sp.fim_pad, sp.fim_rep, sp.fim_sep, sp.eos, sp.eot, sp.eom}) {
    if (id != kNoToken) eog.push_back(id);
  }
  for (std::string_view t : kEogTexts) {
    const TokenId id = v->Find(t);
    if (id == kNoToken) continue;
    eog.push_back(id);
    v->attr[id] |= kAttrControl;
  }
  std::sort(eog.begin(), eog.end());
  eog.erase(std::unique(eog.begin(), eog.end()), eog.end());
  v->eog = std::move(eog);
  for (TokenId id = 0; id < v->n_vocab(); ++id) {
    if ((v->attr[id] & kAttrControl) && v->text[id].find("unused") != std::string::npos) {
      v->attr[id] |= kAttrUnused;
    }
  }
}

void BuildCaches(Vocab* v) {
  for (TokenId id = 0; id < v->n_vocab(); ++id) {
    if (v->attr[id] & (kAttrControl | kAttrUserDefined | kAttrUnknown)) {
      v->special_by_length.push_back(id);
    }
  }
  std::stable_sort(v->special_by_length.begin(), v->special_by_length.end(),
                   [&](TokenId a, TokenId b) { return v->text[a].size() > v->text[b].size(); });
  const ByteLevelMap& bl = ByteLevelMap::Get();
  for (int b = 0; b < 256; ++b) {
    if (v->type == VocabType::kBpe) {
      v->byte_token[b] = v->Find(bl.ByteToUtf8(static_cast<uint8_t>(b)));
      continue;
    }
    char hex[8];
    std::snprintf(hex, sizeof(hex), "<0x%02X>", b);
    TokenId id = v->Find(hex);
    if (id == kNoToken) id = v->Find(std::string(1, static_cast<char>(b)));
    v->byte_token[b] = id;
  }
}

}  // namespace

StatusOr<Vocab> LoadVocab(const std::vector<gguf::KeyValue>& metadata, std::string_view source) {
  const Meta m(metadata, source);
  Vocab v;
  // Tokens first: the merges are resolved to token ids.
  MOESPLIT_RETURN_IF_ERROR(ReadTokens(m, &v));
  MOESPLIT_RETURN_IF_ERROR(ApplyModelDefaults(m, &v));
  MOESPLIT_RETURN_IF_ERROR(ReadSpecialIds(m, &v));
  DetectSpecialByText(&v);
  BuildCaches(&v);
  return v;
}

}  // namespace moesplit::tokenizer
