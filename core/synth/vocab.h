// A small byte-level BPE vocabulary (tokenizer.ggml.model "gpt2") for synthetic models:
//   [leading special tokens] [256 byte tokens, GPT-2 byte-to-unicode, in byte order]
//   [one token per merge]    [PAD fill "[PADi]" (UNUSED) up to n_vocab] [trailing specials]
// Merges are learned by plain BPE training (most frequent pair, ties -> smallest pair) from a
// text embedded in vocab_corpus.cc, except VocabStyle::kDsTiny which reproduces the systematic
// merge list of the llama.cpp-made oracle file (shared/testdata/models/ds-tiny-Q4_K_M.gguf).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/synth/model_spec.h"

namespace moesplit::synth {

// llama.cpp's llama_token_type values (tokenizer.ggml.token_type).
inline constexpr int32_t kTokenNormal = 1;
inline constexpr int32_t kTokenControl = 3;
inline constexpr int32_t kTokenUnused = 5;

struct Vocab {
  std::string model = "gpt2";        // tokenizer.ggml.model
  std::string pre;                   // tokenizer.ggml.pre
  std::vector<std::string> tokens;   // [n_vocab]
  std::vector<int32_t> token_types;  // [n_vocab]
  std::vector<std::string> merges;   // "left right", rank order
  uint32_t bos = 0;
  uint32_t eos = 0;
  std::optional<uint32_t> pad;  // tokenizer.ggml.padding_token_id if set
  bool add_bos = true;
  bool add_eos = false;       // written only for the DeepSeek styles (as the oracle)
  std::string chat_template;  // "" = no tokenizer.chat_template key
};

// GPT-2's printable stand-in for byte b (UTF-8): 'A' for 0x41, "Ġ" (U+0120) for ' ', ...
std::string ByteToUnicode(uint8_t b);

// Learns up to `max_merges` merges from `text` (words pre-split GPT-2 style); deterministic.
std::vector<std::string> LearnMerges(std::string_view text, int64_t max_merges);

// The preset's vocabulary with exactly n_vocab tokens. CHECKs n_vocab >= specials + 256.
Vocab BuildVocab(VocabStyle style, int64_t n_vocab, bool with_chat_template);

// The embedded training text (vocab_corpus.cc), a few KB of English prose and code.
std::string_view TrainingCorpus();

}  // namespace moesplit::synth
