#include "apps/server/http_server.h"

#include <httplib.h>

#include <chrono>
#include <cstdlib>
#include <random>
#include <sstream>
#include <thread>

#include "apps/server/api.h"
#include "apps/server/chat_page.h"

namespace moesplit::app::server {

namespace {

using json = nlohmann::json;
using Clock = std::chrono::steady_clock;

void SendJson(httplib::Response& res, int status, const json& j) {
  res.status = status;
  res.set_content(Dump(j), "application/json; charset=utf-8");
}

void SendError(httplib::Response& res, const ApiError& e) { SendJson(res, e.status, e.Json()); }

ApiError FromStatus(const Status& s, const std::string& param) {
  if (s.code() == StatusCode::kResourceExhausted) {
    return ApiError{503, s.message(), "unavailable_error", ""};
  }
  if (s.code() == StatusCode::kInvalidArgument || s.code() == StatusCode::kOutOfRange) {
    return ApiError{400, s.message(), "invalid_request_error", param};
  }
  return ApiError{500, s.ToString(), "server_error", ""};
}

int64_t UnixNow() {
  return std::chrono::duration_cast<std::chrono::seconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// The server's template with its default kwargs and then the request's applied.
chat::ChatTemplate RequestTemplate(const Serving& s, const ApiRequest& r) {
  return chat::WithKwargs(s.tmpl, chat::MergeKwargs(s.template_kwargs, r.template_kwargs));
}

// One generation as a response: the scheduler's events turned into the text, reasoning and
// logprobs of the response (both modes), and SSE chunks (streaming).
struct Generation {
  Generation(const Serving& s, ApiRequest r, std::shared_ptr<serving::RequestState> state,
             ResponseMeta m)
      : serving(s),
        req(std::move(r)),
        st(std::move(state)),
        meta(std::move(m)),
        splitter(req.chat && s.reasoning_enabled && chat::IsThinkingModel(s.tmpl),
                 chat::PromptOpensReasoning(RequestTemplate(s, req))) {}
  ~Generation() {
    if (!finished) st->Cancel();  // the client went away before the end: stop the sequence
  }
  const Serving& serving;
  ApiRequest req;
  std::shared_ptr<serving::RequestState> st;
  ResponseMeta meta;
  ReasoningSplitter splitter;
  Produced produced;
  bool finished = false;  // the scheduler finished and everything was taken
  bool role_sent = false;
  Clock::time_point last_write = Clock::now();

  std::string Piece(int32_t id) const { return serving.tok->TokenToPiece(id); }
  json Logprobs(const std::vector<serving::Event>& events) const {
    if (!req.logprobs) return nullptr;
    return LogprobsJson(events, req.chat, [this](int32_t id) { return Piece(id); });
  }

  // Takes the events available within `wait`; returns the SSE text to send (stream) and
  // accumulates the response (both). finished becomes true at the end.
  std::string Pump(std::chrono::milliseconds wait) {
    std::vector<serving::Event> events;
    const bool done = st->Next(&events, wait);
    std::string sse;
    for (serving::Event& e : events) {
      std::string content, reasoning;
      splitter.Push(e.text, &reasoning, &content);
      AddChunk(content, reasoning, "", {e}, &sse);
      if (req.logprobs) produced.events.push_back(std::move(e));
    }
    if (done) {
      std::string content, reasoning;
      splitter.Flush(&reasoning, &content);
      produced.usage = st->usage();
      produced.finish = st->finish_reason();
      AddChunk(content, reasoning, FinishName(produced.finish), {}, &sse);
      if (req.include_usage) {
        sse += "data: " + Dump(UsageChunk(meta, req.chat, produced.usage)) + "\n\n";
      }
      sse += "data: [DONE]\n\n";
      finished = true;
    }
    return sse;
  }

  void AddChunk(const std::string& content, const std::string& reasoning,
                const std::string& finish, const std::vector<serving::Event>& events,
                std::string* sse) {
    produced.content += content;
    produced.reasoning += reasoning;
    if (!req.stream) return;
    const bool has_lp = req.logprobs && !events.empty() && !events[0].chosen.empty();
    // A chunk per generated token even when it adds no text yet (bytes of an unfinished UTF-8
    // character, a possible stop string, a token without text): clients see progress and can
    // time tokens, as llama-server's streams allow.
    const bool has_token = !events.empty() && !events[0].tokens.empty();
    if (content.empty() && reasoning.empty() && finish.empty() && !has_lp && !has_token) return;
    json lp = has_lp ? Logprobs(events) : json(nullptr);
    json chunk;
    if (req.chat) {
      chunk = ChatChunk(meta, role_sent ? "" : "assistant", content, reasoning, finish, lp);
      role_sent = true;
    } else {
      chunk = CompletionChunk(meta, content + reasoning, finish, lp);
    }
    *sse += "data: " + Dump(chunk) + "\n\n";
  }

  json Body() const {
    json lp = Logprobs(produced.events);
    return req.chat ? ChatResponse(meta, produced, lp) : CompletionResponse(meta, produced, lp);
  }
};

// A chunked body's write: a failed one (the client left) cancels the request; the end of the
// generation ends the body.
bool WriteOrCancel(Generation& g, httplib::DataSink& sink, const std::string& text) {
  if (!text.empty() && !sink.write(text.data(), text.size())) {
    g.st->Cancel();
    return false;
  }
  if (g.finished) sink.done();
  return true;
}

std::string Metric(const char* name, const char* type, const char* help, double value) {
  std::ostringstream s;
  s << "# HELP moesplit:" << name << " " << help << "\n# TYPE moesplit:" << name << " " << type
    << "\nmoesplit:" << name << " " << value << "\n";
  return s.str();
}

std::string MetricsText(const serving::SchedulerStats& st) {
  std::string m;
  m += Metric("requests_processing", "gauge", "Requests being evaluated.", st.running);
  m += Metric("requests_deferred", "gauge", "Requests waiting for a slot.", st.queued);
  m += Metric("requests_total", "counter", "Requests accepted.", st.requests_total);
  m += Metric("requests_cancelled_total", "counter", "Requests stopped by their client.",
              st.requests_cancelled);
  m += Metric("prompt_tokens_total", "counter", "Prompt tokens evaluated (cache hits excluded).",
              st.prompt_tokens_total);
  m += Metric("prompt_seconds_total", "counter", "Step time spent on prompt tokens.",
              st.prompt_seconds);
  m += Metric("tokens_predicted_total", "counter", "Tokens generated.", st.generated_tokens_total);
  m += Metric("tokens_predicted_seconds_total", "counter", "Step time spent on generated tokens.",
              st.generate_seconds);
  m += Metric("prompt_tokens_seconds", "gauge", "Prompt tokens per second (average).",
              st.prompt_seconds > 0 ? st.prompt_tokens_total / st.prompt_seconds : 0.0);
  m += Metric("predicted_tokens_seconds", "gauge", "Generated tokens per second (average).",
              st.generate_seconds > 0 ? st.generated_tokens_total / st.generate_seconds : 0.0);
  m += Metric("steps_total", "counter", "Engine steps.", st.steps);
  m += Metric("prompt_steps_total", "counter", "Engine steps that carried prompt tokens.",
              st.prompt_steps);
  m += Metric("step_decode_ms", "gauge", "A decode-only step's time, as the scheduler learned it.",
              st.decode_step_ms);
  m += Metric("step_prompt_token_ms", "gauge",
              "What one prompt token adds to a step, as the scheduler learned it.",
              st.prompt_token_ms);
  m += Metric("latency_debt_ms", "gauge",
              "How far steps beside decoding streams ran past --itl-factor (> 0: decode-only "
              "steps come next).",
              st.latency_debt_ms);
  m += Metric("kv_blocks_total", "gauge", "KV cache blocks in the pool.", st.kv_blocks_total);
  m += Metric("kv_blocks_used", "gauge", "KV blocks held by running requests.", st.kv_blocks_used);
  m += Metric("kv_blocks_cached", "gauge", "KV blocks kept for prefix reuse.", st.kv_blocks_cached);
  m += Metric("kv_blocks_free", "gauge", "KV blocks free.", st.kv_blocks_free);
  m += Metric("kv_block_size", "gauge", "Positions per KV block.", st.kv_block_size);
  m += Metric("kv_evictions_total", "counter", "Cached KV blocks evicted.", st.kv_evictions);
  m += Metric("prefix_cache_hits_total", "counter", "Requests that reused a cached prefix.",
              st.prefix_hits);
  m += Metric("prefix_cache_tokens_total", "counter", "Prompt tokens reused from the cache.",
              st.cached_tokens_total);
  m += Metric("preemptions_total", "counter", "Sequences preempted for KV room.", st.preemptions);
  return m;
}

}  // namespace

HttpServer::HttpServer(ServerOptions options)
    : http_(std::make_unique<httplib::Server>()), opt_(std::move(options)) {
  std::random_device rd;
  std::ostringstream s;
  s << std::hex << rd() << rd();
  id_prefix_ = s.str().substr(0, 10);
  Routes();
}

HttpServer::~HttpServer() = default;

Status HttpServer::Bind() {
  const int port = opt_.port == 0 ? http_->bind_to_any_port(opt_.host) : opt_.port;
  if (opt_.port != 0 && !http_->bind_to_port(opt_.host, opt_.port)) {
    return IoError("cannot listen on ", opt_.host, ":", opt_.port,
                   " (address in use, or not an address of this machine); pick another --port "
                   "or --host");
  }
  if (port <= 0) return IoError("cannot listen on ", opt_.host, " (no free port)");
  port_ = port;
  return Status::Ok();
}

void HttpServer::Run() {
  http_->listen_after_bind();
  run_returned_ = true;
}

void HttpServer::Stop() {
  // cpp-httplib's stop() does nothing until listen_after_bind() has marked the server running:
  // a Stop() right after Bind() (serve failing to load its model a millisecond after binding)
  // would leave Run() accepting forever. Wait until it runs (or returned), then stop it.
  while (!http_->is_running() && !run_returned_) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  http_->stop();
}
void HttpServer::SetReady(const Serving* serving) { serving_.store(serving); }

void HttpServer::Routes() {
  httplib::Server& h = *http_;
  h.new_task_queue = [n = opt_.http_threads] { return new httplib::ThreadPool(n); };
  h.set_payload_max_length(opt_.max_body_bytes);
  h.set_read_timeout(opt_.timeout_s, 0);
  h.set_write_timeout(opt_.timeout_s, 0);
  h.set_default_headers({{"Access-Control-Allow-Origin", "*"}});

  h.set_pre_routing_handler([this](const httplib::Request& req, httplib::Response& res) {
    if (req.method == "OPTIONS") {  // CORS preflight of browser front-ends
      res.set_header("Access-Control-Allow-Methods", "GET, POST, OPTIONS");
      res.set_header("Access-Control-Allow-Headers", "Authorization, Content-Type");
      res.status = 204;
      return httplib::Server::HandlerResponse::Handled;
    }
    const bool open = req.path == "/health" || req.path == "/" || req.path == "/index.html";
    if (opt_.api_key.empty() || open) return httplib::Server::HandlerResponse::Unhandled;
    const std::string want = "Bearer " + opt_.api_key;
    const std::string got = req.get_header_value("Authorization");
    // Constant-time comparison: the time taken does not tell how much of a guess was right.
    unsigned diff = got.size() != want.size();
    for (size_t i = 0; i < want.size(); ++i) diff |= want[i] ^ (i < got.size() ? got[i] : 0);
    if (diff == 0) return httplib::Server::HandlerResponse::Unhandled;
    SendError(res, ApiError{401, "invalid or missing API key (send Authorization: Bearer KEY)",
                            "authentication_error", ""});
    return httplib::Server::HandlerResponse::Handled;
  });
  h.set_error_handler([this](const httplib::Request& req, httplib::Response& res) {
    if (!res.body.empty() || res.status == 204) return;
    if (res.status == 413) {
      SendError(res, ApiError{413, StrCat("the request body is larger than ", opt_.max_body_bytes,
                                          " bytes"),
                              "invalid_request_error", ""});
    } else if (res.status == 404) {
      SendError(res, ApiError{404, StrCat("no endpoint ", req.method, " ", req.path),
                              "not_found_error", ""});
    } else {
      SendError(res, ApiError{res.status, StrCat("HTTP ", res.status), "invalid_request_error", ""});
    }
  });
  h.set_exception_handler([](const httplib::Request&, httplib::Response& res,
                             std::exception_ptr ep) {
    std::string what = "unknown error";
    try {
      std::rethrow_exception(ep);
    } catch (const std::exception& e) {
      what = e.what();
    } catch (...) {
    }
    SendError(res, ApiError{500, "internal error: " + what, "server_error", ""});
  });

  // The API endpoints need the model: 503 while it loads (llama-server's answer).
  auto ready = [this](httplib::Response& res) -> const Serving* {
    const Serving* s = serving_.load();
    if (s == nullptr) {
      res.set_header("Retry-After", "5");
      SendError(res, ApiError{503, "loading model", "unavailable_error", ""});
    }
    return s;
  };

  h.Get("/health", [this](const httplib::Request&, httplib::Response& res) {
    if (serving_.load() == nullptr) {
      SendJson(res, 503, {{"status", "loading model"}});
    } else {
      SendJson(res, 200, {{"status", "ok"}});
    }
  });
  h.Get("/", [](const httplib::Request&, httplib::Response& res) {
    res.set_content(std::string(ChatPageHtml()), "text/html; charset=utf-8");
  });
  h.Get("/index.html", [](const httplib::Request&, httplib::Response& res) {
    res.set_content(std::string(ChatPageHtml()), "text/html; charset=utf-8");
  });

  auto generate = [this, ready](const std::string& body, httplib::Response& res, bool chat) {
    const Serving* s = ready(res);
    if (s == nullptr) return;
    const Limits limits{s->scheduler->ctx_size(), s->n_vocab};
    std::variant<ApiRequest, ApiError> parsed = ParseRequest(body, chat, limits);
    if (auto* e = std::get_if<ApiError>(&parsed)) return SendError(res, *e);
    ApiRequest r = std::move(std::get<ApiRequest>(parsed));
    std::vector<int32_t> prompt = r.prompt_tokens;
    if (prompt.empty()) {
      const std::string text =
          chat ? chat::Render(RequestTemplate(*s, r), r.messages, true) : r.prompt;
      StatusOr<std::vector<int32_t>> ids =
          s->tok->Encode(text, /*add_special=*/!chat && s->tok->add_bos(), /*parse_special=*/true);
      if (!ids.ok()) return SendError(res, FromStatus(ids.status(), chat ? "messages" : "prompt"));
      prompt = std::move(*ids);
    }
    if (chat) {
      const std::string_view eot = chat::EndOfTurn(s->tmpl);
      if (!eot.empty()) r.gen.stop.emplace_back(eot);
    }
    StatusOr<std::shared_ptr<serving::RequestState>> st =
        s->scheduler->Submit(std::move(prompt), r.gen);
    if (!st.ok()) {
      const ApiError e = FromStatus(st.status(), chat ? "messages" : "prompt");
      if (e.status == 503) res.set_header("Retry-After", "1");
      return SendError(res, e);
    }
    ResponseMeta meta{StrCat(chat ? "chatcmpl-" : "cmpl-", id_prefix_, "-", (*st)->id()),
                      r.model.empty() ? s->model_name : r.model, UnixNow()};
    auto g = std::make_shared<Generation>(*s, std::move(r), *st, std::move(meta));
    if (g->req.stream) {
      res.set_header("Cache-Control", "no-cache");
      res.set_header("X-Accel-Buffering", "no");  // nginx: pass chunks through at once
      res.set_chunked_content_provider(
          "text/event-stream",
          [g](size_t, httplib::DataSink& sink) {
            std::string sse = g->Pump(std::chrono::milliseconds(200));
            // A comment line after 2 s of silence (a long prefill): SSE clients ignore it, and a
            // client that left makes the write fail, which stops its sequence.
            if (sse.empty() && Clock::now() - g->last_write > std::chrono::seconds(2)) {
              sse = ": waiting\n\n";
            }
            if (!sse.empty()) g->last_write = Clock::now();
            return WriteOrCancel(*g, sink, sse);
          },
          [g](bool success) {
            if (!success) g->st->Cancel();
          });
      return;
    }
    // Not streamed: answer directly when done within a second; otherwise send the body chunked,
    // a space (leading JSON whitespace) every second meanwhile, so that a client that left makes
    // a write fail and its sequence stops.
    const Clock::time_point until = Clock::now() + std::chrono::seconds(1);
    while (!g->finished && Clock::now() < until) g->Pump(std::chrono::milliseconds(100));
    if (g->finished) return SendJson(res, 200, g->Body());
    res.set_chunked_content_provider(
        "application/json; charset=utf-8",
        [g](size_t, httplib::DataSink& sink) {
          g->Pump(std::chrono::milliseconds(1000));
          return WriteOrCancel(*g, sink, g->finished ? Dump(g->Body()) : std::string(" "));
        },
        [g](bool success) {
          if (!success) g->st->Cancel();
        });
  };
  // POST bodies are read raw whatever their Content-Type: `curl -d` sends JSON as
  // application/x-www-form-urlencoded, which cpp-httplib would otherwise parse as a form and
  // refuse past 8 KiB.
  auto with_body = [this](std::function<void(const std::string&, httplib::Response&)> fn) {
    return [this, fn](const httplib::Request& req, httplib::Response& res,
                      const httplib::ContentReader& reader) {
      std::string body;
      const std::string length = req.get_header_value("Content-Length");
      bool too_large = !length.empty() && std::strtoull(length.c_str(), nullptr, 10) >
                                              static_cast<unsigned long long>(opt_.max_body_bytes);
      const bool read = !too_large && reader([&](const char* data, size_t n) {
        too_large = body.size() + n > opt_.max_body_bytes;
        if (!too_large) body.append(data, n);
        return !too_large;
      });
      if (!read && !too_large) {
        return SendError(res, ApiError{400, "the request body could not be read",
                                       "invalid_request_error", ""});
      }
      if (too_large) {
        return SendError(res, ApiError{413, StrCat("the request body is larger than ",
                                                   opt_.max_body_bytes, " bytes"),
                                       "invalid_request_error", ""});
      }
      fn(body, res);
    };
  };
  for (const char* path : {"/v1/chat/completions", "/chat/completions"}) {
    h.Post(path, with_body([generate](const std::string& b, httplib::Response& r) {
      generate(b, r, true);
    }));
  }
  for (const char* path : {"/v1/completions", "/completions"}) {
    h.Post(path, with_body([generate](const std::string& b, httplib::Response& r) {
      generate(b, r, false);
    }));
  }

  auto models = [ready](const httplib::Request&, httplib::Response& res) {
    const Serving* s = ready(res);
    if (s == nullptr) return;
    SendJson(res, 200,
             {{"object", "list"},
              {"data",
               {{{"id", s->model_name},
                 {"object", "model"},
                 {"created", UnixNow()},
                 {"owned_by", "moesplit"},
                 {"meta", {{"n_ctx", s->scheduler->ctx_size()}, {"n_vocab", s->n_vocab}}}}}}});
  };
  h.Get("/v1/models", models);
  h.Get("/models", models);

  h.Post("/tokenize", with_body([ready](const std::string& body, httplib::Response& res) {
    const Serving* s = ready(res);
    if (s == nullptr) return;
    json b = json::parse(body, nullptr, false);
    if (b.is_discarded() || !b.is_object() || !b.contains("content") || !b["content"].is_string()) {
      return SendError(res, ApiError{400, "expected {\"content\": \"text\"}",
                                     "invalid_request_error", "content"});
    }
    const bool add_special = b.value("add_special", false);
    StatusOr<std::vector<int32_t>> ids =
        s->tok->Encode(b["content"].get<std::string>(), add_special, /*parse_special=*/true);
    if (!ids.ok()) return SendError(res, FromStatus(ids.status(), "content"));
    json tokens = json::array();
    if (b.value("with_pieces", false)) {
      for (int32_t id : *ids) tokens.push_back({{"id", id}, {"piece", s->tok->TokenToPiece(id)}});
    } else {
      tokens = *ids;
    }
    SendJson(res, 200, {{"tokens", tokens}});
  }));
  h.Post("/detokenize", with_body([ready](const std::string& body, httplib::Response& res) {
    const Serving* s = ready(res);
    if (s == nullptr) return;
    json b = json::parse(body, nullptr, false);
    if (b.is_discarded() || !b.is_object() || !b.contains("tokens") || !b["tokens"].is_array()) {
      return SendError(res, ApiError{400, "expected {\"tokens\": [ids]}", "invalid_request_error",
                                     "tokens"});
    }
    std::vector<int32_t> ids;
    for (const json& t : b["tokens"]) {
      if (!t.is_number_integer() || !s->tok->IsValid(static_cast<int32_t>(t.get<int64_t>())) ||
          t.get<int64_t>() > INT32_MAX) {
        return SendError(res, ApiError{400, StrCat("token ids must be integers in [0, ", s->n_vocab,
                                                   "), got ", t.dump()),
                                       "invalid_request_error", "tokens"});
      }
      ids.push_back(static_cast<int32_t>(t.get<int64_t>()));
    }
    SendJson(res, 200, {{"content", s->tok->Decode(ids)}});
  }));

  h.Get("/props", [ready](const httplib::Request&, httplib::Response& res) {
    const Serving* s = ready(res);
    if (s == nullptr) return;
    SendJson(res, 200,
             {{"default_generation_settings",
               {{"n_ctx", s->scheduler->ctx_size()}, {"model", s->model_name}}},
              {"total_slots", s->n_parallel},
              {"model_path", s->model_path},
              {"chat_template", chat::ChatFormatName(s->tmpl.format)},
              {"build_info", s->build_info},
              {"modalities", {{"vision", false}, {"audio", false}}}});
  });
  h.Get("/slots", [ready](const httplib::Request&, httplib::Response& res) {
    const Serving* s = ready(res);
    if (s == nullptr) return;
    const serving::SchedulerStats st = s->scheduler->Stats();
    json slots = json::array();
    for (int i = 0; i < s->n_parallel; ++i) {
      json slot = {{"id", i}, {"n_ctx", s->scheduler->ctx_size()}, {"is_processing", false}};
      if (i < static_cast<int>(st.slots.size())) {
        const auto& q = st.slots[static_cast<size_t>(i)];
        slot["is_processing"] = true;
        slot["id_task"] = q.id;
        slot["n_prompt_tokens"] = q.n_prompt;
        slot["n_past"] = q.n_past;
        slot["n_decoded"] = q.n_generated;
        slot["state"] = q.prefilling ? "prompt" : "generating";
      }
      slots.push_back(slot);
    }
    SendJson(res, 200, slots);
  });
  h.Get("/metrics", [this, ready](const httplib::Request&, httplib::Response& res) {
    if (!opt_.metrics) {
      return SendError(res, ApiError{501, "metrics are off: start the server with --metrics",
                                     "not_supported_error", ""});
    }
    const Serving* s = ready(res);
    if (s == nullptr) return;
    res.set_content(MetricsText(s->scheduler->Stats()), "text/plain; version=0.0.4");
  });
}

}  // namespace moesplit::app::server
