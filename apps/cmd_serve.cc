#include "apps/cmd_serve.h"

#include <signal.h>

#include <CLI/CLI.hpp>
#include <chrono>
#include <filesystem>
#include <iostream>
#include <memory>
#include <thread>

#include "apps/cmd_chat.h"
#include "apps/cmd_version.h"
#include "apps/cpu_tier.h"
#include "apps/model_shape_source.h"
#include "apps/model_summary.h"
#include "apps/text_file.h"
#include "core/engine/engine.h"
#include "core/serving/scheduler.h"
#include "core/tokenizer/tokenizer.h"
#include "numa/planner.h"
#include "numa/topology.h"

namespace moesplit::app {
namespace {

Status CheckArgs(const ServeArgs& a) {
  if (a.n_parallel < 1 || a.n_parallel > 256) {
    return InvalidArgumentError("-np must be in [1, 256], got ", a.n_parallel);
  }
  if (a.ctx_size < 64) return InvalidArgumentError("-c must be >= 64, got ", a.ctx_size);
  if (a.batch_tokens < 1) {
    return InvalidArgumentError("--batch-tokens must be >= 1, got ", a.batch_tokens);
  }
  if (a.whole_prompt_tokens < 0) {
    return InvalidArgumentError("--whole-prompt must be >= 0, got ", a.whole_prompt_tokens);
  }
  if (a.max_queue < 0) return InvalidArgumentError("--max-queue must be >= 0, got ", a.max_queue);
  if (a.reasoning_format != "deepseek" && a.reasoning_format != "none") {
    return InvalidArgumentError("--reasoning-format must be deepseek or none, got \"",
                                a.reasoning_format, "\"");
  }
  if (!a.http.api_key.empty() && !a.api_key_file.empty()) {
    return InvalidArgumentError("give --api-key or --api-key-file, not both");
  }
  if (a.http.timeout_s < 1) return InvalidArgumentError("--timeout must be >= 1 s");
  return Status::Ok();
}

// " (thinking on by default)" for thinking formats, "" for others.
const char* ThinkingNote(const chat::ChatTemplate& t) {
  if (!chat::IsThinkingModel(t)) return "";
  return t.enable_thinking ? " (thinking on by default)" : " (thinking off by default)";
}

}  // namespace

const char* FallbackChatTemplate(ModelArch arch, const std::string& pre_tokenizer) {
  if (pre_tokenizer == "kimi-k2") return "kimi-k2";
  switch (arch) {
    case ModelArch::kDeepseek2:
      return "deepseek3";
    case ModelArch::kQwen3Moe:
      return "qwen3";
    default:
      return "chatml";
  }
}

namespace {

// "planner: decode ~12.3 t/s (dram_bandwidth), prefill ~140 t/s (compute) per sequence"; the
// planner's prediction for this machine with assumed bandwidths (moesplit topo --measure saves a
// measured profile; moesplit plan explains the numbers). Empty when it cannot plan the model.
std::string PlannerLine(const ServeArgs& a, int threads) {
  StatusOr<numa::ModelShape> shape = ModelShapeFromGguf(a.model);
  StatusOr<numa::Topology> topo = numa::LoadTopology("");
  if (!shape.ok() || !topo.ok()) return "";
  numa::PlanRequest rq;
  rq.model = std::move(*shape);
  rq.ctx_size = a.ctx_size;
  rq.threads = threads;
  StatusOr<numa::Plan> plan = numa::MakePlan(*topo, numa::AssumedProfile(*topo), rq);
  if (!plan.ok()) return "planner: " + plan.status().message();
  char line[256];
  std::snprintf(line, sizeof(line),
                "planner (assumed bandwidths; `moesplit plan -m` explains): one sequence "
                "decodes ~%.1f t/s (%s), prefills ~%.0f t/s (%s)",
                plan->predicted.decode_tok_s, plan->predicted.bottleneck.c_str(),
                plan->predicted.prefill_tok_s, plan->predicted.prefill_bottleneck.c_str());
  return line;
}

std::string ModelName(const ServeArgs& a) {
  if (!a.alias.empty()) return a.alias;
  std::string name = std::filesystem::path(a.model).filename().string();
  if (name.size() > 5 && name.ends_with(".gguf")) name.resize(name.size() - 5);
  return name;
}

}  // namespace

Status RunServe(const ServeArgs& args_in, std::ostream& err, const std::atomic<bool>* stop,
                const std::function<void(int port)>& on_listening) {
  ServeArgs args = args_in;
  MOESPLIT_RETURN_IF_ERROR(CheckArgs(args));
  if (!args.api_key_file.empty()) {
    MOESPLIT_ASSIGN_OR_RETURN(std::string key, ReadTextFile(args.api_key_file, "API key file"));
    while (!key.empty() && (key.back() == '\n' || key.back() == '\r' || key.back() == ' ')) {
      key.pop_back();
    }
    if (key.empty()) return InvalidArgumentError(args.api_key_file, " holds no API key");
    args.http.api_key = key;
  }
  MOESPLIT_ASSIGN_OR_RETURN(cpu::IsaTier tier, KernelTierFromEnv());
  MOESPLIT_ASSIGN_OR_RETURN(chat::TemplateKwargs kwargs,
                            TemplateKwargsFromFlags(args.reasoning, args.chat_template_kwargs));
  // Listen first: /health says 503 while the model loads, as llama-server does.
  server::HttpServer http(args.http);
  MOESPLIT_RETURN_IF_ERROR(http.Bind());
  std::thread listener([&http] { http.Run(); });
  // Every return below stops the listener and waits for its handler threads before what they
  // use (the scheduler, the model) goes away.
  struct Joiner {
    server::HttpServer& h;
    std::thread& t;
    void Join() {
      if (!t.joinable()) return;
      h.Stop();
      t.join();
    }
    ~Joiner() { Join(); }
  } joiner{http, listener};
  err << "serve: listening on http://" << args.http.host << ":" << http.port()
      << (args.http.api_key.empty() ? "" : " (API key required)") << "; loading the model\n"
      << std::flush;
  if (on_listening) on_listening(http.port());

  const auto t0 = std::chrono::steady_clock::now();
  MOESPLIT_ASSIGN_OR_RETURN(std::unique_ptr<engine::Model> model, engine::Model::Load(args.model));
  MOESPLIT_ASSIGN_OR_RETURN(tokenizer::Tokenizer tok,
                            tokenizer::Tokenizer::FromGguf(model->file()));
  StatusOr<chat::ChatTemplate> chosen =
      ChooseChatTemplate(args.chat_template, *model, args.model, tok);
  if (!chosen.ok() && args.chat_template.empty() &&
      !model->file().GetString("tokenizer.chat_template").ok()) {
    // No template in the file: the architecture's usual one, said aloud (llama-server takes
    // chatml); --chat-template overrides.
    const char* name = FallbackChatTemplate(model->config().arch, tok.pre());
    err << "serve: " << args.model << " has no tokenizer.chat_template; using " << name
        << " (--chat-template NAME to choose)\n";
    chosen = ChooseChatTemplate(name, *model, args.model, tok);
  }
  if (!chosen.ok()) return chosen.status();
  const chat::ChatTemplate tmpl = *chosen;
  // The device flags as run's: --device cuda runs the hybrid pass (its latent cache on the
  // device is the block pool), auto falls back to the CPU when no device or kernel fits.
  MOESPLIT_ASSIGN_OR_RETURN(EngineSetup setup, SetUpEngine(*model, args.model, args.placement,
                                                           args.threads, args.ctx_size, tier, err));
  MOESPLIT_ASSIGN_OR_RETURN(std::unique_ptr<engine::Engine> eng,
                            engine::Engine::Create(*model, setup.options));
  for (const std::string& line : eng->placement_report()) err << "numa: " << line << "\n";
  if (const std::string p = PlannerLine(args, eng->n_threads()); !p.empty()) err << p << "\n";
  LogKernels(err, eng->isa_tier(), std::to_string(eng->n_threads()), eng->FallbackTypes(),
             cpu::DetectCpuFeatures(), eng->decode_read());
  serving::Scheduler scheduler(eng.get(), &tok,
                               {.max_running = args.n_parallel,
                                .max_queue = args.max_queue,
                                .batch_tokens = args.batch_tokens,
                                .itl_factor = args.itl_factor,
                                .whole_prompt_tokens = args.whole_prompt_tokens});
  server::Serving serving;
  serving.tok = &tok;
  serving.tmpl = tmpl;
  serving.template_kwargs = kwargs;
  serving.scheduler = &scheduler;
  serving.model_name = ModelName(args);
  serving.model_path = args.model;
  serving.n_vocab = model->config().n_vocab;
  serving.n_parallel = args.n_parallel;
  serving.build_info = VersionString();
  serving.reasoning_enabled = args.reasoning_format == "deepseek";
  const double load_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  err << "serve: model " << serving.model_name << " (" << ModelArchName(model->config().arch)
      << ", " << HumanBytes(model->file().total_file_bytes()) << ") loaded in "
      << static_cast<int>(load_s * 10) / 10.0 << " s; KV pool " << eng->kv_blocks() << " blocks x "
      << eng->kv_block_size() << " positions (" << HumanBytes(eng->kv_cache_bytes())
      << (eng->hybrid() ? " on the device" : "") << ") shared by -np " << args.n_parallel
      << "; chat template " << chat::ChatFormatName(tmpl.format)
      << ThinkingNote(chat::WithKwargs(tmpl, kwargs)) << "; reasoning " << args.reasoning_format
      << "\n"
      << "serve: ready on http://" << args.http.host << ":" << http.port() << "\n"
      << std::flush;
  http.SetReady(&serving);
  while (stop == nullptr || !stop->load()) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  err << "serve: stopping\n";
  scheduler.Shutdown();  // running streams end now (cancelled) instead of at their max_tokens
  joiner.Join();
  http.SetReady(nullptr);
  return Status::Ok();
}

namespace {
std::atomic<bool>* g_stop = nullptr;  // the signal handler's only way in (POSIX signals)
void OnSignal(int) {
  if (g_stop != nullptr) g_stop->store(true);
}
}  // namespace

void RegisterServe(CLI::App& app, std::function<int()>* action) {
  auto args = std::make_shared<ServeArgs>();
  CLI::App* cmd = app.add_subcommand(
      "serve",
      "OpenAI-compatible HTTP server (continuous batching, shared paged KV cache, "
      "prefix reuse across requests)");
  cmd->add_option("-m,--model", args->model, "GGUF model file")->required();
  cmd->add_option("--host", args->http.host, "address to listen on (loopback by default)")
      ->capture_default_str();
  cmd->add_option("--port", args->http.port, "port (0 = any free port)")->capture_default_str();
  cmd->add_option("--parallel", args->n_parallel,
                  "-np: sequences evaluated together (more wait in the queue)")
      ->capture_default_str();
  cmd->add_option("-c,--ctx-size", args->ctx_size,
                  "KV cache positions, one pool shared by all sequences (also the longest "
                  "conversation)")
      ->capture_default_str();
  cmd->add_option("-b,--batch-tokens", args->batch_tokens,
                  "tokens per step: decode tokens + prompt chunks")
      ->capture_default_str();
  cmd->add_option("--itl-factor", args->itl_factor,
                  "while streams decode, prompt chunks keep their mean inter-token latency within "
                  "this many times a decode step (0 = chunks of --batch-tokens)")
      ->capture_default_str();
  cmd->add_option("--whole-prompt", args->whole_prompt_tokens,
                  "prompts with at most this many tokens left run in one step even while "
                  "streams decode (chunking a short prompt costs the others more in all; 0 = "
                  "always chunk)")
      ->capture_default_str();
  cmd->add_option("-t,--threads", args->threads, "threads (0 = all hardware threads)");
  cmd->add_option("--api-key", args->http.api_key,
                  "require Authorization: Bearer KEY on every endpoint but /health and /");
  cmd->add_option("--api-key-file", args->api_key_file, "read the API key from a file");
  cmd->add_flag("--metrics", args->http.metrics, "enable /metrics (Prometheus text)");
  cmd->add_option("--reasoning-format", args->reasoning_format,
                  "deepseek: <think> text goes to reasoning_content; none: left in content")
      ->capture_default_str();
  AddTemplateKwargsFlags(cmd, &args->reasoning, &args->chat_template_kwargs,
                         /*for_server=*/true);
  cmd->add_option("--chat-template", args->chat_template,
                  "chat template name (default: detected from tokenizer.chat_template)");
  cmd->add_option("--alias", args->alias, "model id in /v1/models and responses");
  cmd->add_option("--max-queue", args->max_queue,
                  "requests waiting beyond -np; more get 503 with Retry-After")
      ->capture_default_str();
  cmd->add_option("--timeout", args->http.timeout_s, "socket read/write timeout, seconds")
      ->capture_default_str();
  AddPlacementFlags(cmd, &args->placement);
  cmd->callback([args, action] {
    *action = [args] {
      std::atomic<bool> stop{false};
      g_stop = &stop;
      ::signal(SIGINT, OnSignal);
      ::signal(SIGTERM, OnSignal);
      ::signal(SIGPIPE, SIG_IGN);
      Status s = RunServe(*args, std::cerr, &stop);
      g_stop = nullptr;
      if (!s.ok()) std::cerr << "moesplit serve: " << s.ToString() << "\n";
      return s.ok() ? 0 : 1;
    };
  });
}

}  // namespace moesplit::app
