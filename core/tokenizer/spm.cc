// SentencePiece-style BPE as llama.cpp's llm_tokenizer_spm_session: start from the UTF-8
// characters of the text, repeatedly merge the adjacent pair whose concatenation is a token with
// the highest score (ties: the leftmost pair), then emit each symbol's token or, for a symbol
// that is no token, one byte token per byte.
#include <queue>

#include "core/tokenizer/unicode.h"
#include "core/tokenizer/vocab.h"

namespace moesplit::tokenizer {
namespace {

struct Symbol {
  uint32_t start = 0;  // byte offset in the text
  uint32_t n = 0;      // bytes; 0 once merged into its left neighbour
  int prev = -1;
  int next = -1;
};

struct Candidate {
  float score = 0;
  int left = 0;
  uint32_t size = 0;  // bytes of left + right when pushed
  // priority_queue pops the largest: higher score first, then the leftmost.
  bool operator<(const Candidate& o) const {
    return score != o.score ? score < o.score : left > o.left;
  }
};

}  // namespace

void SpmEncode(const Vocab& v, std::string_view text, std::vector<TokenId>* out) {
  std::vector<Symbol> sym;  // [UTF-8 characters of text]
  for (size_t off = 0; off < text.size();) {
    const size_t n =
        std::min<size_t>(Utf8SeqLen(static_cast<uint8_t>(text[off])), text.size() - off);
    const int index = static_cast<int>(sym.size());
    sym.push_back({static_cast<uint32_t>(off), static_cast<uint32_t>(n), index - 1,
                   off + n < text.size() ? index + 1 : -1});
    off += n;
  }
  std::priority_queue<Candidate> queue;
  const auto push = [&](int left) {
    if (left < 0 || sym[left].next < 0) return;
    const Symbol& l = sym[left];
    const Symbol& r = sym[l.next];
    const uint32_t size = l.n + r.n;
    const TokenId id = v.Find(text.substr(l.start, size));
    if (id == kNoToken) return;
    queue.push({v.score[id], left, size});
  };
  for (int i = 0; i + 1 < static_cast<int>(sym.size()); ++i) push(i);
  while (!queue.empty()) {
    const Candidate c = queue.top();
    queue.pop();
    Symbol& l = sym[c.left];
    if (l.n == 0 || l.next < 0) continue;
    Symbol& r = sym[l.next];
    if (r.n == 0 || l.n + r.n != c.size) continue;  // a side changed since the push
    l.n += r.n;
    r.n = 0;
    l.next = r.next;
    if (r.next >= 0) sym[r.next].prev = c.left;
    push(l.prev);
    push(c.left);
  }
  for (int i = 0; i >= 0 && !sym.empty(); i = sym[i].next) {
    const std::string_view piece = text.substr(sym[i].start, sym[i].n);
    const TokenId id = v.Find(piece);
    if (id != kNoToken) {
      out->push_back(id);
      continue;
    }
    // Byte fallback. A vocabulary without the byte token makes llama.cpp throw; we emit UNK.
    for (char c : piece) {
      const TokenId b = v.byte_token[static_cast<uint8_t>(c)];
      if (b != kNoToken) {
        out->push_back(b);
      } else if (v.special.unk != kNoToken) {
        out->push_back(v.special.unk);
      }
    }
  }
}

}  // namespace moesplit::tokenizer
