// Not built by CMake (it needs a llama.cpp build): loads a GGUF with libllama on the CPU,
// decodes a short prompt and 8 greedy tokens, and fails unless every logit of every step is
// finite. Used to show that llama.cpp reads make-model's files (e.g. the UD-IQ mixes, which
// moesplit itself does not run yet).
//   gcc -O1 -I/work/peers/llama.cpp/include -I/work/peers/llama.cpp/ggml/include \
//     tests/apps/llama_compat/llama_logits.c -L/work/peers/llama.cpp/build/bin -lllama -lggml \
//     -lggml-base -lm -o /tmp/llama_logits
//   LD_LIBRARY_PATH=/work/peers/llama.cpp/build/bin /tmp/llama_logits FILE.gguf
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "llama.h"
int main(int argc, char** argv) {
  if (argc < 2) return 2;
  llama_backend_init();
  struct llama_model_params mp = llama_model_default_params();
  mp.n_gpu_layers = 0;
  struct llama_model* model = llama_model_load_from_file(argv[1], mp);
  if (!model) { fprintf(stderr, "load failed\n"); return 1; }
  struct llama_context_params cp = llama_context_default_params();
  cp.n_ctx = 256; cp.n_batch = 64; cp.n_threads = 2; cp.n_threads_batch = 2;
  struct llama_context* ctx = llama_init_from_model(model, cp);
  if (!ctx) { fprintf(stderr, "context failed\n"); return 1; }
  const struct llama_vocab* vocab = llama_model_get_vocab(model);
  const int nv = llama_vocab_n_tokens(vocab);
  const char* prompt = "The quick brown fox jumps over the lazy dog";
  llama_token toks[128];
  int n = llama_tokenize(vocab, prompt, (int)strlen(prompt), toks, 128, true, false);
  if (n <= 0) { fprintf(stderr, "tokenize failed\n"); return 1; }
  struct llama_batch b = llama_batch_get_one(toks, n);
  long nonfinite = 0; double sumsq = 0; long count = 0;
  printf("prompt tokens %d, vocab %d, greedy:", n, nv);
  for (int step = 0; step < 9; ++step) {
    if (llama_decode(ctx, b) != 0) { fprintf(stderr, "decode failed\n"); return 1; }
    const float* lg = llama_get_logits_ith(ctx, -1);
    int best = 0;
    for (int i = 0; i < nv; ++i) {
      if (!isfinite(lg[i])) ++nonfinite; else { sumsq += (double)lg[i] * lg[i]; ++count; }
      if (lg[i] > lg[best]) best = i;
    }
    printf(" %d", best);
    toks[0] = best;
    b = llama_batch_get_one(toks, 1);
  }
  printf("\nnon-finite logits: %ld of %ld, rms logit %.4f\n", nonfinite, nonfinite + count,
         count ? sqrt(sumsq / count) : 0.0);
  llama_free(ctx);
  llama_model_free(model);
  return nonfinite ? 1 : 0;
}
