#include "core/tokenizer/pre_tokenizer.h"

#define PCRE2_CODE_UNIT_WIDTH 32
#include <pcre2.h>

#include <algorithm>

#include "core/tokenizer/unicode.h"

namespace moesplit::tokenizer {
namespace {

// The regexes of llama.cpp's pre-tokenizer types (src/llama-vocab.cpp, llm_tokenizer_bpe), as
// PCRE2 patterns. Two adaptations keep the matches identical to llama.cpp's:
//  * `$` means end of the piece (llama.cpp's std::regex has no multiline mode): compiled with
//    PCRE2_DOLLAR_ENDONLY;
//  * llama.cpp runs regexes that use \p{..} on a "collapsed" text whose ASCII part is classified
//    by a fixed table in which '~' is not a symbol (\p{S}); where a pattern uses \p{S}, '~' is
//    excluded from it explicitly: [\p{P}\p{S}] -> (?:(?!~)[\p{P}\p{S}]) and
//    [^...\p{S}] -> (?:~|[^...\p{S}]).
// GPT-2's and Llama-3's regexes end with `\s+`, which llama.cpp's hand-written splitters for
// them apply as the final alternative.

constexpr const char* kGpt2 =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

constexpr const char* kLlama3 =
    R"((?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|)"
    R"(\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

constexpr const char* kQwen2 =
    R"((?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|)"
    R"(\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

constexpr const char* kDeepseekV3Words =
    R"([!"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~][A-Za-z]+|)"
    R"((?:~|[^\r\n\p{L}\p{P}\p{S}])?[\p{L}\p{M}]+| ?(?:(?!~)[\p{P}\p{S}])+[\r\n]*|)"
    R"(\s*[\r\n]+|\s+(?!\S)|\s+)";

// CJK ideographs U+4E00..U+9FA5, U+0800..U+4E00 (sic) and Hangul U+AC00..U+D7FF.
constexpr const char* kDeepseekCjk = R"([\x{4E00}-\x{9FA5}\x{800}-\x{4E00}\x{AC00}-\x{D7FF}]+)";

// Letters of the alphabetic scripts (Latin, Greek, Cyrillic, Armenian, Georgian, Cherokee, ...).
constexpr const char* kDeepseekLlmLetters =
    R"(\s?[A-Za-z\x{B5}\x{C0}-\x{D6}\x{D8}-\x{F6}\x{F8}-\x{1BA}\x{1BC}-\x{1BF}\x{1C4}-\x{293})"
    R"(\x{295}-\x{2AF}\x{370}-\x{373}\x{376}\x{377}\x{37B}-\x{37D}\x{37F}\x{386}\x{388}-\x{38A})"
    R"(\x{38C}\x{38E}-\x{3A1}\x{3A3}-\x{3F5}\x{3F7}-\x{481}\x{48A}-\x{52F}\x{531}-\x{556})"
    R"(\x{10A0}-\x{10C5}\x{13A0}-\x{13F5}\x{13F8}-\x{13FD}\x{1C90}-\x{1CBA}\x{1CBD}-\x{1CBF})"
    R"(\x{1D00}-\x{1D2B}\x{1D6B}-\x{1D77}\x{1D79}-\x{1D9A}\x{1E00}-\x{1F15}\x{1F18}-\x{1F1D})"
    R"(\x{1F20}-\x{1F45}\x{1F48}-\x{1F4D}\x{1F50}-\x{1F57}\x{1F59}\x{1F5B}\x{1F5D}\x{1F5F}-\x{1F7D})"
    R"(\x{1F80}-\x{1FB4}\x{1FB6}-\x{1FBC}\x{1FBE}\x{1FC2}-\x{1FC4}\x{1FC6}-\x{1FCC}\x{1FD0}-\x{1FD3})"
    R"(\x{1FD6}-\x{1FDB}\x{1FE0}-\x{1FEC}\x{1FF2}-\x{1FF4}\x{1FF6}-\x{1FFC}\x{2102}\x{2107})"
    R"(\x{210A}-\x{2113}\x{2115}\x{2119}-\x{211D}\x{2124}\x{2126}\x{2128}\x{212A}-\x{212D})"
    R"(\x{212F}-\x{2134}\x{2139}\x{213C}-\x{213F}\x{2145}-\x{2149}\x{214E}\x{2183}\x{2184})"
    R"(\x{2C00}-\x{2C7B}\x{2C7E}-\x{2CE4}\x{2CEB}-\x{2CEE}\x{2CF2}\x{2CF3}\x{A640}-\x{A66D})"
    R"(\x{A680}-\x{A69B}\x{A722}-\x{A76F}\x{A771}-\x{A787}\x{A78B}-\x{A78E}\x{AB70}-\x{ABBF})"
    R"(\x{FB00}-\x{FB06}\x{FB13}-\x{FB17}\x{FF21}-\x{FF3A}\x{FF41}-\x{FF5A}\x{10400}-\x{1044F})"
    R"(\x{104B0}-\x{104D3}\x{104D8}-\x{104FB}\x{10C80}-\x{10CB2}\x{10CC0}-\x{10CF2})"
    R"(\x{118A0}-\x{118DF}\x{1E900}-\x{1E943}]+)";

// ASCII punctuation, fullwidth forms, quotation marks U+2018..U+201F, U+3000..U+3002.
constexpr const char* kDeepseekLlmPunct =
    R"(\s?[!-/:-~\x{FF01}-\x{FF0F}\x{FF1A}-\x{FF5E}\x{2018}-\x{201F}\x{3000}-\x{3002}]+)";

// CJK ideographs, Hiragana, Katakana.
constexpr const char* kDeepseekV3Cjk = R"([\x{4E00}-\x{9FA5}\x{3040}-\x{309F}\x{30A0}-\x{30FF}]+)";

// Kimi-K2 (tokenizer.ggml.pre "kimi-k2"). llama.cpp does not run the tokenizer's own regex
// (tiktoken's, with class intersections [\p{L}&&[^\p{Han}]] and upper/lower-case runs) but a
// hand-written splitter (unicode.cpp, unicode_regex_split_custom_kimi_k2); this pattern
// reproduces that splitter, which differs from the original regex:
//  * "Han" is a fixed list of code-point ranges (CJK Unified Ideographs, Extensions A-F,
//    Compatibility Ideographs and their supplement), assigned or not, not Unicode's script;
//  * a word is an optional leading [^\r\n\p{L}\p{N}] and a run of non-Han letters of any case
//    (no \p{M}, no upper/lower split: "HelloWorld" is one word, "e\u0301" is "e" + "\u0301");
//  * the contraction suffix is matched case-insensitively, as (?i:'s|'t|'re|'ve|'m|'ll|'d).
// The alternatives are tried in the splitter's order at each position; every code point is
// covered by one of them, so no gap pieces arise.
#define MOESPLIT_KIMI_HAN                                                      \
  R"([\x{3400}-\x{4DBF}\x{4E00}-\x{9FFF}\x{F900}-\x{FAFF}\x{20000}-\x{2A6DF})" \
  R"(\x{2A700}-\x{2EBEF}\x{2F800}-\x{2FA1F}])"
constexpr const char* kKimiK2 = MOESPLIT_KIMI_HAN
    "+|"
    R"([^\r\n\p{L}\p{N}]?(?:(?!)" MOESPLIT_KIMI_HAN R"()\p{L})+)"
    R"((?:'(?:[sStTmMdD]|[rR][eE]|[vV][eE]|[lL][lL]))?|)"
    R"(\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
#undef MOESPLIT_KIMI_HAN

struct PreType {
  const char* name;
  std::vector<const char*> patterns;
};

// Supported values of tokenizer.ggml.pre and their regexes, in llama.cpp's order of application.
const std::vector<PreType>& PreTypes() {
  static const std::vector<PreType> types = [] {
    const std::vector<const char*> llama3 = {kLlama3};
    const std::vector<const char*> qwen2 = {kQwen2};
    const std::vector<const char*> gpt2 = {kGpt2};
    return std::vector<PreType>{
        {"default", {R"([\p{P}\$\+<=>\^~\|]+)", kGpt2, R"(\p{N}+)", "[0-9][0-9][0-9]"}},
        {"deepseek-v3", {R"(\p{N}{1,3})", kDeepseekV3Cjk, kDeepseekV3Words}},
        {"deepseek-llm",
         {"[\r\n]", kDeepseekLlmLetters, kDeepseekLlmPunct, R"(\s+$)", kDeepseekCjk, R"(\p{N}+)"}},
        {"deepseek-coder", {"[\r\n]", R"(\s?\p{L}+)", R"(\s?\p{P}+)", kDeepseekCjk, R"(\p{N})"}},
        {"qwen2", qwen2},
        {"deepseek-r1-qwen", qwen2},
        {"llama3", llama3},
        {"llama-v3", llama3},
        {"llama-bpe", llama3},
        {"gpt-2", gpt2},
        {"phi-2", gpt2},
        {"kimi-k2", {kKimiK2}},  // last: the tokenizer fuzz seeds pick a type by index
    };
  }();
  return types;
}

std::u32string ToUtf32(std::string_view s) {
  std::u32string out;
  for (uint32_t cp : DecodeUtf8(s)) out.push_back(static_cast<char32_t>(cp));
  return out;
}

// What the regexes see: non-ASCII whitespace -> U+000B (see the header), values beyond
// U+10FFFF (from 5-byte-looking lead bytes) -> U+10FFFF, an unassigned code point as in llama.cpp.
std::vector<uint32_t> RegexSubject(const std::vector<uint32_t>& cps) {
  std::vector<uint32_t> s(cps.size());
  for (size_t i = 0; i < cps.size(); ++i) {
    uint32_t c = cps[i];
    const bool ws = c == 0x85 || c == 0xA0 || c == 0x1680 || (c >= 0x2000 && c <= 0x200A) ||
                    c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F || c == 0x3000;
    s[i] = ws ? 0x0B : std::min<uint32_t>(c, 0x10FFFF);
  }
  return s;
}

}  // namespace

struct PreTokenizer::Regex {
  pcre2_code* code = nullptr;
  ~Regex() { pcre2_code_free(code); }
};

PreTokenizer::PreTokenizer(PreTokenizer&&) noexcept = default;
PreTokenizer& PreTokenizer::operator=(PreTokenizer&&) noexcept = default;
PreTokenizer::~PreTokenizer() = default;

std::vector<std::string> PreTokenizer::SupportedNames() {
  std::vector<std::string> names;
  for (const PreType& t : PreTypes()) names.push_back(t.name);
  return names;
}

StatusOr<PreTokenizer> PreTokenizer::Create(std::string_view pre) {
  const auto& types = PreTypes();
  auto it =
      std::find_if(types.begin(), types.end(), [&](const PreType& t) { return pre == t.name; });
  if (it == types.end()) {
    std::string list;
    for (const PreType& t : types) list += (list.empty() ? "" : ", ") + std::string(t.name);
    return UnimplementedError("tokenizer.ggml.pre '", pre,
                              "' is not a supported pre-tokenizer; supported: ", list);
  }
  PreTokenizer p;
  p.name_ = it->name;
  for (const char* pattern : it->patterns) {
    const std::u32string pat = ToUtf32(pattern);
    int err = 0;
    PCRE2_SIZE err_off = 0;
    auto re = std::make_unique<Regex>();
    re->code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pat.data()), pat.size(),
                             PCRE2_UCP | PCRE2_DOLLAR_ENDONLY, &err, &err_off, nullptr);
    MOESPLIT_CHECK(re->code != nullptr, "built-in regex of pre-tokenizer '", p.name_,
                   "' does not compile: PCRE2 error ", err, " at ", err_off);
    pcre2_jit_compile(re->code, PCRE2_JIT_COMPLETE);  // falls back to the interpreter if no JIT
    p.regexes_.push_back(std::move(re));
  }
  return p;
}

namespace {

// Per-call matching state (match data and, if needed, a larger JIT stack).
class Matcher {
 public:
  Matcher() : md_(pcre2_match_data_create(1, nullptr)) {}
  ~Matcher() {
    pcre2_match_data_free(md_);
    pcre2_match_context_free(ctx_);
    pcre2_jit_stack_free(stack_);
  }
  Matcher(const Matcher&) = delete;
  Matcher& operator=(const Matcher&) = delete;

  // Next match of `code` in subject[0, len) at or after `from`: 1 and [*b, *e), 0 if none,
  // <0 on an engine error.
  int Next(const pcre2_code* code, const uint32_t* subject, size_t len, size_t from, size_t* b,
           size_t* e) {
    auto sp = reinterpret_cast<PCRE2_SPTR>(subject);
    int rc = pcre2_match(code, sp, len, from, 0, md_, ctx_);
    if (rc == PCRE2_ERROR_JIT_STACKLIMIT && stack_ == nullptr) {
      // Very long runs (e.g. megabytes of one character class) need more than the default 32 KB.
      stack_ = pcre2_jit_stack_create(32 * 1024, 64 * 1024 * 1024, nullptr);
      ctx_ = pcre2_match_context_create(nullptr);
      pcre2_jit_stack_assign(ctx_, nullptr, stack_);
      rc = pcre2_match(code, sp, len, from, 0, md_, ctx_);
    }
    if (rc == PCRE2_ERROR_NOMATCH) return 0;
    if (rc < 0) return rc;
    const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(md_);
    *b = ov[0];
    *e = ov[1];
    return 1;
  }

 private:
  pcre2_match_data* md_;
  pcre2_match_context* ctx_ = nullptr;
  pcre2_jit_stack* stack_ = nullptr;
};

}  // namespace

StatusOr<std::vector<std::string>> PreTokenizer::Split(std::string_view text) const {
  const std::vector<uint32_t> cps = DecodeUtf8(text);
  const std::vector<uint32_t> subject = RegexSubject(cps);
  // Pieces as lengths in code points, consecutive from 0: [len0, len1, ...].
  std::vector<size_t> pieces;
  if (!cps.empty()) pieces.push_back(cps.size());
  Matcher m;
  for (const auto& re : regexes_) {
    std::vector<size_t> next;
    next.reserve(pieces.size() * 2);
    size_t start = 0;
    for (size_t len : pieces) {
      // Each piece is matched on its own: lookaheads and `$` see the piece's end.
      size_t done = 0;  // end of the last piece emitted
      size_t from = 0;  // where the next search starts
      while (from < len) {
        size_t b = 0, e = 0;
        const int rc = m.Next(re->code, subject.data() + start, len, from, &b, &e);
        if (rc < 0) {
          return ResourceExhaustedError("pre-tokenizer '", name_, "': regex engine error ", rc,
                                        " on a text of ", text.size(), " bytes");
        }
        if (rc == 0) break;
        if (e == b) {  // no pattern matches empty; be safe against looping
          from = b + 1;
          continue;
        }
        if (b > done) next.push_back(b - done);  // the gap before the match
        next.push_back(e - b);
        done = from = e;
      }
      if (done < len) next.push_back(len - done);
      start += len;
    }
    pieces = std::move(next);
  }
  std::vector<std::string> words;
  words.reserve(pieces.size());
  size_t start = 0;
  for (size_t len : pieces) {
    std::string w;
    for (size_t i = start; i < start + len; ++i) AppendUtf8(cps[i], &w);
    words.push_back(std::move(w));
    start += len;
  }
  return words;
}

}  // namespace moesplit::tokenizer
