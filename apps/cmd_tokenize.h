// `moesplit tokenize -m FILE (-p TEXT | -f TEXT_FILE)`: the token ids a model's tokenizer gives a
// text, as llama.cpp's llama-tokenize does (special-token texts parsed as special tokens).
#pragma once

#include <functional>
#include <ostream>
#include <string>

namespace CLI {
class App;  // <CLI/CLI.hpp> only where flags are registered: it costs ~6 s per file
}  // namespace CLI

namespace moesplit::app {

struct TokenizeArgs {
  std::string model;              // GGUF file whose tokenizer.ggml.* metadata is used
  std::string prompt;             // -p TEXT
  bool has_prompt = false;        // -p was given (the text may be empty)
  std::string file;               // -f TEXT_FILE
  bool add_bos = false;           // prepend BOS (and append EOS) if the model asks for them
  bool pieces = false;            // one "id 'piece'" line per token instead of the id list
  bool no_parse_special = false;  // treat special-token texts as plain text
};

// Returns the exit code: 0, or 1 on any error (printed to `err`). Output: "id, id, ...\n", or
// with `pieces` one line per token: the id, a space and the piece's bytes in single quotes.
int RunTokenize(const TokenizeArgs& args, std::ostream& out, std::ostream& err);

// Adds the `tokenize` subcommand to `app`; when it is selected, `*action` runs it.
void RegisterTokenize(CLI::App& app, std::function<int()>* action);

}  // namespace moesplit::app
