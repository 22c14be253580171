// Prints llama.cpp's token ids for each case of X.inp (cases separated by
// "\n__ggml_vocab_test__\n"), one line " id id ..." per case, add_special=false, parse_special=false.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "llama.h"
int main(int argc, char** argv) {
  if (argc != 3) { fprintf(stderr, "usage: tok_oracle vocab.gguf cases.inp\n"); return 2; }
  llama_backend_init();
  struct llama_model_params mp = llama_model_default_params();
  mp.vocab_only = true;
  struct llama_model* model = llama_model_load_from_file(argv[1], mp);
  if (!model) return 1;
  const struct llama_vocab* vocab = llama_model_get_vocab(model);
  FILE* f = fopen(argv[2], "rb");
  fseek(f, 0, SEEK_END); long n = ftell(f); fseek(f, 0, SEEK_SET);
  char* buf = malloc(n + 1); fread(buf, 1, n, f); buf[n] = 0; fclose(f);
  const char* sep = "\n__ggml_vocab_test__\n";
  size_t sl = strlen(sep);
  char* p = buf;
  int32_t toks[65536];
  for (char* hit; (hit = strstr(p, sep)) != NULL; p = hit + sl) {
    int32_t k = llama_tokenize(vocab, p, (int32_t)(hit - p), toks, 65536, false, false);
    if (k < 0) return 3;
    for (int i = 0; i < k; ++i) printf(" %d", toks[i]);
    printf("\n");
  }
  llama_model_free(model);
  return 0;
}
