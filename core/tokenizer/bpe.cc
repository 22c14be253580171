// Byte-level BPE of one word, merge order as llama.cpp's llm_tokenizer_bpe_session: repeatedly
// merge the adjacent pair with the lowest merge rank (ties: the leftmost pair), using a priority
// queue of candidate pairs that is lazily invalidated when a side changes.
//
// Symbols start as the word's bytes (each stands for its GPT-2 character, so they are exactly
// the UTF-8 characters of the byte-level encoded word llama.cpp splits) and are tracked by token
// id; a symbol whose text is not a vocabulary token (only in malformed vocabularies) falls back
// to text lookups.
#include <queue>

#include "core/tokenizer/unicode.h"
#include "core/tokenizer/vocab.h"

namespace moesplit::tokenizer {
namespace {

struct Symbol {
  uint32_t start = 0;  // byte offset in the word
  uint32_t n = 0;      // bytes; 0 once merged into its left neighbour
  int prev = -1;       // index of the left neighbour, -1 at the start
  int next = -1;       // index of the right neighbour, -1 at the end
  TokenId id = kNoToken;
};

struct Candidate {
  int32_t rank = 0;
  int left = 0;       // symbol index; the right side is symbols[left].next at push time
  uint32_t size = 0;  // bytes of left + right when pushed (stale if it changed)
  TokenId merged = kNoToken;
  // priority_queue pops the largest: "larger" = higher rank, then further right.
  bool operator<(const Candidate& o) const {
    return rank != o.rank ? rank > o.rank : left > o.left;
  }
};

class WordMerger {
 public:
  WordMerger(const Vocab& v, std::string_view word) : v_(v), word_(word) {
    symbols_.resize(word.size());
    for (size_t i = 0; i < word.size(); ++i) {
      Symbol& s = symbols_[i];
      s.start = static_cast<uint32_t>(i);
      s.n = 1;
      s.prev = static_cast<int>(i) - 1;
      s.next = i + 1 < word.size() ? static_cast<int>(i) + 1 : -1;
      s.id = v.byte_token[static_cast<uint8_t>(word[i])];
    }
  }

  void Run(std::vector<TokenId>* out) {
    for (int i = 0; i + 1 < static_cast<int>(symbols_.size()); ++i) Push(i);
    while (!queue_.empty()) {
      const Candidate c = queue_.top();
      queue_.pop();
      Symbol& l = symbols_[c.left];
      if (l.n == 0 || l.next < 0) continue;
      Symbol& r = symbols_[l.next];
      if (r.n == 0 || l.n + r.n != c.size) continue;  // a side changed since the push
      l.n += r.n;
      l.id = c.merged != kNoToken ? c.merged : v_.Find(Encoded(l));
      r.n = 0;
      l.next = r.next;
      if (r.next >= 0) symbols_[r.next].prev = c.left;
      if (l.prev >= 0) Push(l.prev);
      Push(c.left);
    }
    for (int i = 0; i >= 0 && !symbols_.empty(); i = symbols_[i].next) Emit(symbols_[i], out);
  }

 private:
  // The byte-level text of a symbol (what llama.cpp's symbol holds).
  std::string Encoded(const Symbol& s) const { return ByteLevelEncode(word_.substr(s.start, s.n)); }

  // Queues the pair (left, left.next) if a merge exists for it.
  void Push(int left) {
    const Symbol& l = symbols_[left];
    if (l.next < 0) return;
    const Symbol& r = symbols_[l.next];
    Candidate c{.left = left, .size = l.n + r.n};
    if (l.id != kNoToken && r.id != kNoToken) {
      auto it =
          v_.id_merges.find((static_cast<uint64_t>(l.id) << 32) | static_cast<uint32_t>(r.id));
      if (it == v_.id_merges.end()) return;
      c.rank = it->second.rank;
      c.merged = it->second.merged;
    } else {
      auto it = v_.text_merges.find(Encoded(l) + std::string("\0", 1) + Encoded(r));
      if (it == v_.text_merges.end()) return;
      c.rank = it->second;
    }
    queue_.push(c);
  }

  // A final symbol: its token, or else (as llama.cpp) the tokens of the single bytes of its
  // byte-level text that happen to be tokens.
  void Emit(const Symbol& s, std::vector<TokenId>* out) const {
    if (s.id != kNoToken) {
      out->push_back(s.id);
      return;
    }
    for (char c : Encoded(s)) {
      const TokenId id = v_.Find(std::string_view(&c, 1));
      if (id != kNoToken) out->push_back(id);
    }
  }

  const Vocab& v_;
  std::string_view word_;
  std::vector<Symbol> symbols_;  // [word bytes]
  std::priority_queue<Candidate> queue_;
};

}  // namespace

void BpeEncodeWord(const Vocab& v, std::string_view word, std::vector<TokenId>* out) {
  if (word.empty()) return;
  if (v.ignore_merges) {
    const TokenId whole = v.Find(ByteLevelEncode(word));
    if (whole != kNoToken) {
      out->push_back(whole);
      return;
    }
  }
  WordMerger(v, word).Run(out);
}

}  // namespace moesplit::tokenizer
