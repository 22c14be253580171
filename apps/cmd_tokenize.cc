#include "apps/cmd_tokenize.h"

#include <CLI/CLI.hpp>
#include <fstream>
#include <iostream>
#include <iterator>
#include <memory>
#include <vector>

#include "apps/text_file.h"
#include "core/gguf/gguf_file.h"
#include "core/tokenizer/tokenizer.h"

namespace moesplit::app {
namespace {

// The text to tokenize: -p or the bytes of -f (exactly one of them).
StatusOr<std::string> InputText(const TokenizeArgs& args) {
  const bool has_file = !args.file.empty();
  if (args.has_prompt == has_file) {
    return InvalidArgumentError("give the text with exactly one of -p TEXT or -f TEXT_FILE",
                                args.has_prompt ? " (both were given)" : "");
  }
  if (args.has_prompt) return args.prompt;
  return ReadTextFile(args.file, "text file");
}

}  // namespace

int RunTokenize(const TokenizeArgs& args, std::ostream& out, std::ostream& err) {
  const auto fail = [&](const Status& s) {
    err << "moesplit tokenize: " << s.ToString() << "\n";
    return 1;
  };
  if (args.model.empty()) return fail(InvalidArgumentError("-m FILE (a GGUF model) is required"));
  auto text = InputText(args);
  if (!text.ok()) return fail(text.status());
  gguf::OpenOptions options;
  options.load_all_shards = false;  // the tokenizer lives in the metadata of the first shard
  auto file = gguf::GgufFile::Open(args.model, options);
  if (!file.ok()) return fail(file.status());
  auto tok = tokenizer::Tokenizer::FromGguf(**file);
  if (!tok.ok()) return fail(tok.status());
  auto ids = tok->Encode(*text, args.add_bos, !args.no_parse_special);
  if (!ids.ok()) return fail(ids.status());
  if (args.pieces) {
    for (tokenizer::TokenId id : *ids) {
      out << id << " '" << tok->TokenToPiece(id, /*render_special=*/true) << "'\n";
    }
    return 0;
  }
  for (size_t i = 0; i < ids->size(); ++i) out << (i ? ", " : "") << (*ids)[i];
  out << "\n";
  return 0;
}

void RegisterTokenize(CLI::App& app, std::function<int()>* action) {
  auto args = std::make_shared<TokenizeArgs>();
  CLI::App* cmd = app.add_subcommand(
      "tokenize",
      "Print the token ids of a text with a model's tokenizer (as llama.cpp's llama-tokenize)");
  cmd->add_option("-m,--model", args->model, "GGUF model file (only its metadata is read)");
  CLI::Option* prompt = cmd->add_option("-p,--prompt", args->prompt, "text to tokenize");
  cmd->add_option("-f,--file", args->file, "file whose bytes are the text to tokenize");
  cmd->add_flag("--add-bos", args->add_bos,
                "add BOS (and EOS) as the model's add_bos_token / add_eos_token ask");
  cmd->add_flag("--pieces", args->pieces, "print one \"id 'piece'\" line per token");
  cmd->add_flag("--no-parse-special", args->no_parse_special,
                "treat special-token texts (e.g. <|im_end|>) as plain text");
  cmd->callback([args, action, prompt] {
    args->has_prompt = prompt->count() > 0;
    *action = [args] { return RunTokenize(*args, std::cout, std::cerr); };
  });
}

}  // namespace moesplit::app
