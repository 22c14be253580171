#!/usr/bin/env python3
"""Writes kimi-k2-mini.gguf: a vocab-only GGUF (tokenizer.ggml.model gpt2, pre kimi-k2) with a
small byte-level BPE vocabulary trained here, and kimi-k2-mini.gguf.inp with the test strings.

The token ids llama.cpp gives (kimi-k2-mini.gguf.out) come from tok_oracle.c, which calls only
llama.cpp's public C API (vocab_only load, llama_tokenize with add_special=false,
parse_special=false). Run (llama.cpp 0a50d9909):
  PYTHONPATH=<llama.cpp>/gguf-py /usr/bin/python3 make_kimi_vocab.py
  gcc -I<llama.cpp>/include -I<llama.cpp>/ggml/include tok_oracle.c -L<build/bin> -lllama -o tok_oracle
  LD_LIBRARY_PATH=<build/bin> ./tok_oracle kimi-k2-mini.gguf kimi-k2-mini.gguf.inp > kimi-k2-mini.gguf.out
"""
import collections
import re

import gguf

N_MERGES = 1800

CORPUS = """
The quick brown fox jumps over the lazy dog. It's what they'd do; we're sure you've seen it,
I'm told they'll DON'T WON'T can't shouldn't. HelloWorld camelCase snake_case CONSTANT_VALUE.
人工智能是计算机科学的一个分支。我们今天去北京大学学习中文，天气很好。月之暗面发布了新的模型。
漢字と日本語のひらがな、カタカナを混ぜた文章です。東京は日本の首都です。
한국어 문장도 조금 넣습니다. 안녕하세요 세계.
Привет, мир! Это тестовая строка на русском языке. Ελληνικά γράμματα και λέξεις.
Numbers: 1 12 123 1234 12345 3.14159 2024-07-11 1,000,000 0x1F ٣٤٥ ①②③ ⅣⅤ.
    indented code:
        def main(argv):
            return sum(x * 2 for x in range(10))  # comment
\tTabs\tand\r\nwindows\r\nlines\n\n\nblank lines   trailing spaces   
Emoji: 🦙🚀 😀👍🏽 👨‍👩‍👧 ❤️ ✨ — dashes – and “quotes” ‘single’ «guillemets».
Mixed: AI模型Kimi-K2有384个专家, 8个激活; GPU显存24GB。 café naïve résumé coöperate e\u0301 n\u0303.
URL https://example.com/path?q=1&r=2 email test@example.org path /usr/local/bin.
""" * 3


def byte_to_unicode():
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(0xA1, 0xAD)) + list(range(0xAE, 0x100))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return {b: chr(c) for b, c in zip(bs, cs)}


def train(text, n_merges):
    b2u = byte_to_unicode()
    # Training words: a rough split (any split gives valid merges; the pre-tokenizer under test
    # decides the words at tokenization time).
    words = collections.Counter(re.findall(r" ?[^\s]+|\s+", text))
    seqs = {w: [b2u[b] for b in w.encode("utf-8")] for w in words}
    merges = []
    for _ in range(n_merges):
        pairs = collections.Counter()
        for w, n in words.items():
            s = seqs[w]
            for a, b in zip(s, s[1:]):
                pairs[(a, b)] += n
        if not pairs:
            break
        best = max(pairs.items(), key=lambda kv: (kv[1], tuple(-ord(c) for c in kv[0][0] + kv[0][1])))[0]
        if pairs[best] < 2:
            break
        merges.append(best)
        for w in words:
            s, out, i = seqs[w], [], 0
            while i < len(s):
                if i + 1 < len(s) and (s[i], s[i + 1]) == best:
                    out.append(s[i] + s[i + 1])
                    i += 2
                else:
                    out.append(s[i])
                    i += 1
            seqs[w] = out
    return b2u, merges


CASES = [
    "", " ", "  ", "\t", "\n", "\n\n\n", " \n \n", "\r\n", "   trailing   ",
    "Hello world", " Hello world", "Hello World", "HelloWorld", "HELLO world", "hello WORLD",
    "It's", "it's what they'd do", "we're", "you've", "I'm", "they'll", "DON'T", "WON'T",
    "can't shouldn't", "'s alone", "x'", "rock'n'roll", "O'Neil's",
    "1", "12", "123", "1234", "12345", "1234567", "3.14159", "2024-07-11", "1,000,000",
    "٣٤٥", "①②③", "ⅣⅤ",
    "人工智能", "我们今天去北京大学学习中文，天气很好。", "月之暗面发布了新的模型",
    "漢字と日本語のひらがな", "カタカナ", "東京は日本の首都です。", "안녕하세요 세계",
    "AI模型Kimi-K2有384个专家", "GPU显存24GB。", "a中b", " 中文", "中文 ", "x 中",
    "𠀀𠀁", "\U0002B81E", "豈更",
    "Привет, мир!", "Ελληνικά γράμματα",
    "café naïve résumé", "e\u0301 n\u0303", "\u0301abc", "a\u0301\u0302b",
    "🦙🚀", " 😀👍🏽", "👨‍👩‍👧", "❤️ ✨", "—dash– “quotes” ‘single’ «x»",
    "def main(argv):\n    return sum(x * 2 for x in range(10))  # comment\n",
    "\tTabs\tand\r\nwindows\r\nlines", "a\u3000b", "a\u00a0b", "x\u2028y", " \u3000 z",
    "https://example.com/path?q=1&r=2", "test@example.org", "/usr/local/bin",
    "!!!", " !!!\n\n", "...\r\n\r\nnext", "~tilde ~", "$100 and 50%", "<|im_end|> [BOS]",
    "The quick brown fox jumps over the lazy dog.",
    "Mixed: AI模型Kimi-K2有384个专家, 8个激活; GPU显存24GB。 café",
    "\u0001\u0002\u007f", "\ud7ff\ue000\uffff", "\U0010ffff",
]


def main():
    b2u, merges = train(CORPUS, N_MERGES)
    tokens = [b2u[b] for b in range(256)]
    seen = set(tokens)
    for a, b in merges:
        if a + b not in seen:
            tokens.append(a + b)
            seen.add(a + b)
    types = [gguf.TokenType.NORMAL] * len(tokens)
    for sp in ["[BOS]", "[EOS]", "<|im_end|>", "<|im_user|>", "<|im_assistant|>", "<|im_system|>",
               "<|im_middle|>", "[UNK]"]:
        tokens.append(sp)
        types.append(gguf.TokenType.CONTROL)
    w = gguf.GGUFWriter("kimi-k2-mini.gguf", "deepseek2")
    w.add_name("kimi-k2-mini")
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre("kimi-k2")
    w.add_token_list(tokens)
    w.add_token_types(types)
    w.add_token_merges([a + " " + b for a, b in merges])
    w.add_bos_token_id(tokens.index("[BOS]"))
    w.add_eos_token_id(tokens.index("[EOS]"))
    w.add_add_bos_token(False)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    with open("kimi-k2-mini.gguf.inp", "w", encoding="utf-8", newline="") as f:
        for c in CASES:
            f.write(c + "\n__ggml_vocab_test__\n")
    print(len(tokens), "tokens,", len(merges), "merges,", len(CASES), "cases")


if __name__ == "__main__":
    main()
