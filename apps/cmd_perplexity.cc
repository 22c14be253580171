#include "apps/cmd_perplexity.h"

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <memory>
#include <span>
#include <sstream>

#include "apps/cpu_tier.h"
#include "apps/text_file.h"
#include "core/engine/engine.h"
#include "core/tokenizer/tokenizer.h"

namespace moesplit::app {
namespace {

StatusOr<std::string> ReadText(const std::string& path) {
  if (path.empty()) return InvalidArgumentError("-f TEXT_FILE is required");
  return ReadTextFile(path, "text file");
}

// -log softmax(logits)[target], computed stably in double: log(sum exp(l - max)) + max - l[t].
double NegLogLikelihood(std::span<const float> logits, int32_t target) {
  const float max = *std::max_element(logits.begin(), logits.end());
  double sum = 0.0;
  for (float l : logits) sum += std::exp(static_cast<double>(l) - max);
  return std::log(sum) + max - logits[target];
}

struct NllSum {
  double nll = 0, nll2 = 0;
  int64_t count = 0;
};

// One chunk from an empty context: Eval in n_batch pieces, score rows first .. n_ctx-2.
Status ScoreChunk(engine::Session& s, std::span<const int32_t> chunk, int n_batch, int64_t n_vocab,
                  NllSum* sum) {
  const int64_t n_ctx = static_cast<int64_t>(chunk.size());
  const int64_t first = n_ctx / 2;
  s.Reset();
  for (int64_t done = 0; done < n_ctx; done += n_batch) {
    const int64_t n = std::min<int64_t>(n_batch, n_ctx - done);
    MOESPLIT_ASSIGN_OR_RETURN(std::vector<float> logits, s.Eval(chunk.subspan(done, n), true));
    for (int64_t j = std::max(done, first); j < std::min(done + n, n_ctx - 1); ++j) {
      const std::span<const float> row(logits.data() + (j - done) * n_vocab, n_vocab);
      const double v = NegLogLikelihood(row, chunk[j + 1]);
      sum->nll += v;
      sum->nll2 += v * v;
      ++sum->count;
    }
  }
  return Status::Ok();
}

}  // namespace

StatusOr<PerplexityResult> RunPerplexity(const PerplexityArgs& args, std::ostream& out,
                                         std::ostream& err) {
  if (args.n_ctx < 4) return InvalidArgumentError("-c must be >= 4, got ", args.n_ctx);
  if (args.n_batch < 1) return InvalidArgumentError("-b must be >= 1, got ", args.n_batch);
  MOESPLIT_ASSIGN_OR_RETURN(std::string text, ReadText(args.text_file));
  MOESPLIT_ASSIGN_OR_RETURN(cpu::IsaTier tier, KernelTierFromEnv());
  MOESPLIT_ASSIGN_OR_RETURN(std::unique_ptr<engine::Model> model, engine::Model::Load(args.model));
  MOESPLIT_ASSIGN_OR_RETURN(tokenizer::Tokenizer tok,
                            tokenizer::Tokenizer::FromGguf(model->file()));
  MOESPLIT_ASSIGN_OR_RETURN(std::vector<int32_t> tokens,
                            tok.Encode(text, /*add_special=*/true, /*parse_special=*/false));
  const int64_t n_ctx = args.n_ctx;
  if (static_cast<int64_t>(tokens.size()) < 2 * n_ctx) {
    return InvalidArgumentError(args.text_file, " has ", tokens.size(),
                                " tokens; perplexity with -c ", n_ctx, " needs at least ",
                                2 * n_ctx, " (use a longer text or a smaller -c)");
  }
  int64_t n_chunk = static_cast<int64_t>(tokens.size()) / n_ctx;
  if (args.chunks >= 0) n_chunk = std::min(n_chunk, args.chunks);
  engine::Session session(*model, {.ctx_size = n_ctx,
                                   .n_threads = args.threads,
                                   .isa_tier = tier,
                                   .decode_read = DecodeReadFromEnv()});
  err << "perplexity: " << tokens.size() << " tokens, " << n_chunk << " chunks of " << n_ctx << ", "
      << session.n_threads() << " threads\n";
  LogKernels(err, session);

  NllSum sum;
  const auto t0 = std::chrono::steady_clock::now();
  for (int64_t i = 0; i < n_chunk; ++i) {
    std::vector<int32_t> chunk(tokens.begin() + i * n_ctx, tokens.begin() + (i + 1) * n_ctx);
    if (tok.add_bos() && tok.special().bos != tokenizer::kNoToken) chunk[0] = tok.special().bos;
    MOESPLIT_RETURN_IF_ERROR(
        ScoreChunk(session, chunk, args.n_batch, model->config().n_vocab, &sum));
    if (i == 0) {
      const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      char eta[96];
      std::snprintf(eta, sizeof(eta), "%.2f seconds per pass - ETA %.2f minutes\n", s,
                    s * n_chunk / 60.0);
      err << eta;
    }
    char buf[48];
    std::snprintf(buf, sizeof(buf), "[%lld]%.4lf,", static_cast<long long>(i + 1),
                  std::exp(sum.nll / sum.count));
    out << buf << std::flush;
  }
  out << "\n";
  PerplexityResult r;
  r.chunks = n_chunk;
  r.scored_tokens = sum.count;
  const double mean = sum.nll / sum.count;
  r.ppl = std::exp(mean);
  const double var = sum.nll2 / sum.count - mean * mean;
  r.ppl_error = var > 0 && sum.count > 1 ? std::sqrt(var / (sum.count - 1)) * r.ppl : 0.0;
  char fin[96];
  std::snprintf(fin, sizeof(fin), "Final estimate: PPL = %.4lf +/- %.5lf\n", r.ppl, r.ppl_error);
  out << fin;
  return r;
}

void RegisterPerplexity(CLI::App& app, std::function<int()>* action) {
  auto a = std::make_shared<PerplexityArgs>();
  CLI::App* cmd = app.add_subcommand("perplexity", "Perplexity of a text, as llama-perplexity");
  cmd->add_option("-m,--model", a->model, "GGUF model file")->required();
  cmd->add_option("-f,--file", a->text_file, "text file")->required();
  cmd->add_option("-c,--ctx-size", a->n_ctx, "tokens per chunk")->capture_default_str();
  cmd->add_option("-b,--batch-size", a->n_batch, "tokens per evaluation")->capture_default_str();
  cmd->add_option("--chunks", a->chunks, "at most this many chunks (-1 = all)")
      ->capture_default_str();
  cmd->add_option("-t,--threads", a->threads, "threads (0 = all hardware threads)");
  cmd->callback([a, action] {
    *action = [a] {
      auto r = RunPerplexity(*a, std::cout, std::cerr);
      if (!r.ok()) std::cerr << "moesplit perplexity: " << r.status().ToString() << "\n";
      return r.ok() ? 0 : 1;
    };
  });
}

}  // namespace moesplit::app
