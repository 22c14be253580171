// `moesplit serve`'s HTTP side (cpp-httplib from Debian): the OpenAI endpoints and
// llama-server's, over a serving::Scheduler. The server answers /health (503) while the model
// loads; everything else waits for SetReady.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>

#include "core/base/status.h"
#include "core/chat/chat_template.h"
#include "core/serving/scheduler.h"
#include "core/tokenizer/tokenizer.h"

namespace httplib {
class Server;
}

namespace moesplit::app::server {

struct ServerOptions {
  std::string host = "127.0.0.1";
  int port = 8080;                        // 0: any free port (port() tells which)
  std::string api_key;                    // "": no authentication
  size_t max_body_bytes = 8u << 20;       // larger bodies: 413
  int timeout_s = 600;                    // socket read / write timeout
  int http_threads = 64;                  // concurrent connections served (streams hold one)
  bool metrics = false;                   // /metrics (llama-server's --metrics)
  bool reasoning = true;                  // --reasoning-format deepseek (thinking templates)
};

// What the endpoints serve once the model is loaded (not owned; outlives the server's use).
struct Serving {
  const tokenizer::Tokenizer* tok = nullptr;
  chat::ChatTemplate tmpl;
  chat::TemplateKwargs template_kwargs;  // --reasoning / --chat-template-kwargs; requests override
  serving::Scheduler* scheduler = nullptr;
  std::string model_name;  // /v1/models id (the file name without .gguf, or --alias)
  std::string model_path;
  int64_t n_vocab = 0;
  int n_parallel = 1;
  std::string build_info;  // /props
  bool reasoning_enabled = true;  // --reasoning-format deepseek: <think> text apart
};

class HttpServer {
 public:
  explicit HttpServer(ServerOptions options);
  ~HttpServer();
  // Binds host:port. Errors: the address is taken or cannot be bound (naming it).
  Status Bind();
  int port() const { return port_; }
  // Serves until Stop (blocking; call from a thread of its own).
  void Run();
  // Ends Run (waiting for it to have started: a Run thread must have been launched).
  void Stop();
  // From here on the API endpoints answer (serving must outlive the server's use of it).
  void SetReady(const Serving* serving);

 private:
  void Routes();
  std::unique_ptr<httplib::Server> http_;
  ServerOptions opt_;
  std::atomic<const Serving*> serving_{nullptr};
  std::atomic<bool> run_returned_{false};  // Run() has left cpp-httplib's accept loop
  int port_ = 0;
  std::string id_prefix_;  // random per process: response ids do not repeat across restarts
};

}  // namespace moesplit::app::server
