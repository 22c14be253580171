// Not built by CMake (it needs a llama.cpp build): llama.cpp's logits for given token ids, the
// reference side of `moesplit eval --tokens IDS --logits-out F` (compare_logits.py compares the
// two). Loads a GGUF on the CPU (f32 KV cache, flash attention off), evaluates the ids as one
// batch with logits at every position (MODE "batch") or one token at a time (MODE "decode"),
// and writes float32 [n_tokens x n_vocab] row-major.
//   gcc -O1 -I$LLAMA/include -I$LLAMA/ggml/include tests/apps/llama_compat/llama_eval_logits.c \
//     -L$LLAMA/build/bin -lllama -lggml -lggml-base -lm -o /tmp/llama_eval_logits
//   LD_LIBRARY_PATH=$LLAMA/build/bin /tmp/llama_eval_logits FILE.gguf 0,79,113,... OUT.f32 [batch|decode]
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "llama.h"

int main(int argc, char** argv) {
  if (argc < 4) {
    fprintf(stderr, "usage: %s MODEL.gguf IDS OUT.f32 [batch|decode]\n", argv[0]);
    return 2;
  }
  const int decode = argc > 4 && strcmp(argv[4], "decode") == 0;
  llama_token ids[512];
  int n = 0;
  for (char* s = strtok(argv[2], ","); s != NULL && n < 512; s = strtok(NULL, ",")) {
    ids[n++] = atoi(s);
  }
  llama_backend_init();
  struct llama_model_params mp = llama_model_default_params();
  mp.n_gpu_layers = 0;
  struct llama_model* model = llama_model_load_from_file(argv[1], mp);
  if (!model) { fprintf(stderr, "load failed\n"); return 1; }
  struct llama_context_params cp = llama_context_default_params();
  cp.n_ctx = 512; cp.n_batch = 512; cp.n_ubatch = 512; cp.n_threads = 2; cp.n_threads_batch = 2;
  cp.flash_attn_type = LLAMA_FLASH_ATTN_TYPE_DISABLED;
  cp.type_k = GGML_TYPE_F32; cp.type_v = GGML_TYPE_F32;
  struct llama_context* ctx = llama_init_from_model(model, cp);
  if (!ctx) { fprintf(stderr, "context failed\n"); return 1; }
  const int nv = llama_vocab_n_tokens(llama_model_get_vocab(model));
  FILE* out = fopen(argv[3], "wb");
  if (!out) { fprintf(stderr, "cannot write %s\n", argv[3]); return 1; }
  struct llama_batch b = llama_batch_init(n, 0, 1);
  for (int start = 0; start < n; start += decode ? 1 : n) {
    const int len = decode ? 1 : n;
    b.n_tokens = len;
    for (int i = 0; i < len; ++i) {
      b.token[i] = ids[start + i];
      b.pos[i] = start + i;
      b.n_seq_id[i] = 1;
      b.seq_id[i][0] = 0;
      b.logits[i] = 1;
    }
    if (llama_decode(ctx, b) != 0) { fprintf(stderr, "decode failed\n"); return 1; }
    for (int i = 0; i < len; ++i) fwrite(llama_get_logits_ith(ctx, i), sizeof(float), nv, out);
  }
  fclose(out);
  printf("%d positions x %d logits -> %s\n", n, nv, argv[3]);
  llama_batch_free(b);
  llama_free(ctx);
  llama_model_free(model);
  return 0;
}
