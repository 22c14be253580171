#include "apps/cmd_eval.h"

#include <CLI/CLI.hpp>
#include <algorithm>
#include <charconv>
#include <chrono>
#include <fstream>
#include <memory>

#include "apps/cpu_tier.h"
#include "apps/gpu_placement.h"
#include "apps/model_summary.h"
#include "core/engine/engine.h"

namespace moesplit::app {

StatusOr<std::vector<int32_t>> ParseTokenList(const std::string& text) {
  std::vector<int32_t> ids;
  size_t start = 0;
  while (start <= text.size()) {
    size_t end = text.find(',', start);
    if (end == std::string::npos) end = text.size();
    std::string item = text.substr(start, end - start);
    item.erase(0, item.find_first_not_of(" \t"));
    item.erase(item.find_last_not_of(" \t") + 1);
    int32_t id = 0;
    const auto [ptr, ec] = std::from_chars(item.data(), item.data() + item.size(), id);
    if (item.empty() || ec != std::errc() || ptr != item.data() + item.size()) {
      return InvalidArgumentError("--tokens: '", item, "' (item ", ids.size() + 1,
                                  ") is not a token id; expected comma-separated integers");
    }
    ids.push_back(id);
    start = end + 1;
  }
  return ids;
}

namespace {

Status WriteLogits(const std::string& path, const std::vector<float>& logits) {
  std::ofstream f(path, std::ios::binary);
  f.write(reinterpret_cast<const char*>(logits.data()),
          static_cast<std::streamsize>(logits.size() * sizeof(float)));
  if (!f) return IoError("cannot write logits to ", path);
  return Status::Ok();
}

}  // namespace

Status RunEval(const EvalArgs& args, std::ostream& out) {
  MOESPLIT_ASSIGN_OR_RETURN(std::vector<int32_t> tokens, ParseTokenList(args.tokens));
  MOESPLIT_ASSIGN_OR_RETURN(cpu::IsaTier tier, KernelTierFromEnv());
  MOESPLIT_ASSIGN_OR_RETURN(std::unique_ptr<engine::Model> model, engine::Model::Load(args.model));
  const ModelConfig& c = model->config();
  const int64_t n = static_cast<int64_t>(tokens.size());
  engine::SessionOptions opts;
  opts.ctx_size = args.ctx_size > 0 ? args.ctx_size : std::max<int64_t>(4096, n);
  opts.n_threads = args.threads;
  opts.isa_tier = tier;
  opts.decode_read = DecodeReadFromEnv();
  if (args.kv_type == "f16") {
    opts.kv_type = engine::KvCacheType::kF16;
  } else if (args.kv_type != "f32") {
    return InvalidArgumentError("--kv-type '", args.kv_type, "': choose f32 or f16");
  }
  if (n > opts.ctx_size) {
    return InvalidArgumentError(n, " tokens do not fit in --ctx-size ", opts.ctx_size);
  }
  DeviceFlags flags;
  flags.device = args.device;
  MOESPLIT_ASSIGN_OR_RETURN(DeviceChoice device,
                            ApplyDeviceFlags(flags, TensorEntriesOf(model->file().tensors()), out,
                                             nullptr, nullptr, nullptr,
                                             HybridBlocker(*model, CudaHasKernel)));
  MOESPLIT_ASSIGN_OR_RETURN(std::unique_ptr<engine::DenseBackend> backend,
                            OpenDenseBackend(device));
  opts.backend = backend.get();
  opts.expert_homes = device.expert_homes;
  MOESPLIT_ASSIGN_OR_RETURN(std::unique_ptr<engine::Session> owned,
                            engine::Session::Create(*model, opts));
  engine::Session& session = *owned;
  out << c.Summary() << "\n"
      << "KV cache: " << session.ctx_size() << " positions, " << session.kv_cache_bytes()
      << " bytes (" << HumanBytes(session.kv_cache_bytes()) << ", " << args.kv_type << "), "
      << session.n_threads() << " threads\n";
  LogKernels(out, session);
  const auto t0 = std::chrono::steady_clock::now();
  std::vector<float> logits;
  if (args.decode) {
    for (int64_t i = 0; i < n; ++i) {
      MOESPLIT_ASSIGN_OR_RETURN(std::vector<float> row,
                                session.Eval(std::span<const int32_t>(&tokens[i], 1), true));
      logits.insert(logits.end(), row.begin(), row.end());
    }
  } else {
    MOESPLIT_ASSIGN_OR_RETURN(logits, session.Eval(tokens, true));
  }
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (!args.logits_out.empty()) MOESPLIT_RETURN_IF_ERROR(WriteLogits(args.logits_out, logits));
  const float* last = logits.data() + (n - 1) * c.n_vocab;
  const int64_t argmax = std::max_element(last, last + c.n_vocab) - last;
  out << "evaluated " << n << " tokens (" << (args.decode ? "decode, one at a time" : "one batch")
      << ") in " << secs << " s (" << n / secs << " tok/s); last row argmax " << argmax
      << " (logit " << last[argmax] << ")";
  if (!args.logits_out.empty())
    out << "; logits [" << n << " x " << c.n_vocab << "] -> " << args.logits_out;
  out << "\n";
  return Status::Ok();
}

void RegisterEval(CLI::App& app, std::function<int()>* action) {
  auto args = std::make_shared<EvalArgs>();
  CLI::App* cmd = app.add_subcommand(
      "eval",
      "Evaluate token ids (on the CPU, or the hybrid pass with --device) and write the logits "
      "(float32 rows)");
  cmd->add_option("-m,--model", args->model, "GGUF model file")->required();
  cmd->add_option("--tokens", args->tokens, "comma-separated token ids, e.g. 0,79,113")->required();
  cmd->add_option("--logits-out", args->logits_out,
                  "write float32 logits [n_tokens x n_vocab] row-major to this file");
  cmd->add_flag("--decode", args->decode, "evaluate one token at a time through the KV cache");
  cmd->add_option("-t,--threads", args->threads, "threads (0 = all hardware threads)");
  cmd->add_option("--ctx-size", args->ctx_size, "KV cache positions (0 = max(4096, n_tokens))");
  cmd->add_option("--device", args->device,
                  "cpu | cuda | auto: the hybrid pass on a CUDA device (auto: when one is "
                  "visible)");
  cmd->add_option("--kv-type", args->kv_type, "KV cache element type: f32 | f16")
      ->capture_default_str();
  cmd->callback([args, action] {
    *action = [args] {
      Status s = RunEval(*args);
      if (!s.ok()) {
        std::cerr << "eval: " << s.ToString() << "\n";
        return 1;
      }
      return 0;
    };
  });
}

}  // namespace moesplit::app
