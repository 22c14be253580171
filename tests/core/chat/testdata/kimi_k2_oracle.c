// Prints llama.cpp's built-in "kimi-k2" renderings (llama_chat_apply_template, no Jinja) of the
// conversations in chat_llamacpp_test.cc's KimiK2 cases, as C string literals. The template is
// given once by name and once as Moonshot's Jinja source (argv[1], e.g. llama.cpp's
// models/templates/Kimi-K2-Instruct.jinja), which llama.cpp must detect as the same format.
//   cc kimi_k2_oracle.c -I$LLAMA/include -I$LLAMA/ggml/include -L$LLAMA/build/bin -lllama -o kimi_k2_oracle
//   LD_LIBRARY_PATH=$LLAMA/build/bin ./kimi_k2_oracle $LLAMA/models/templates/Kimi-K2-Instruct.jinja
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "llama.h"

static void PrintLiteral(const char* s, int n) {
  putchar('"');
  for (int i = 0; i < n; ++i) {
    if (s[i] == '\n') {
      fputs("\\n", stdout);
    } else if (s[i] == '"' || s[i] == '\\') {
      printf("\\%c", s[i]);
    } else {
      putchar(s[i]);
    }
  }
  puts("\"");
}

static void Render(const char* label, const char* tmpl, const struct llama_chat_message* msgs,
                   size_t n, bool add_ass) {
  static char buf[1 << 16];
  const int32_t len = llama_chat_apply_template(tmpl, msgs, n, add_ass, buf, sizeof(buf));
  printf("%s add_ass=%d: ", label, add_ass);
  if (len < 0) {
    puts("(not supported)");
    return;
  }
  PrintLiteral(buf, len);
}

static char* ReadFile(const char* path) {
  FILE* f = fopen(path, "rb");
  if (f == NULL) return NULL;
  fseek(f, 0, SEEK_END);
  const long size = ftell(f);
  fseek(f, 0, SEEK_SET);
  char* text = calloc(size + 1, 1);
  if (fread(text, 1, size, f) != (size_t)size) text[0] = '\0';
  fclose(f);
  return text;
}

int main(int argc, char** argv) {
  const struct llama_chat_message four[] = {
      {"system", "You are a helpful assistant."},
      {"user", "Hello"},
      {"assistant", "Hi there! How can I help?"},
      {"user", "What is 2+2? "},
  };
  const struct llama_chat_message five[] = {
      four[0], four[1], four[2], four[3], {"assistant", "4"},
  };
  const char* jinja = argc > 1 ? ReadFile(argv[1]) : NULL;
  const char* tmpls[] = {"kimi-k2", jinja};
  for (int t = 0; t < 2 && tmpls[t] != NULL; ++t) {
    printf("== template %s\n", t == 0 ? "\"kimi-k2\"" : argv[1]);
    Render("system_user_assistant_user", tmpls[t], four, 4, true);
    Render("system_user_assistant_user", tmpls[t], four, 4, false);
    Render("with_final_answer", tmpls[t], five, 5, false);
    Render("no_system", tmpls[t], four + 1, 3, true);
    Render("empty", tmpls[t], four, 0, true);
  }
  return 0;
}
