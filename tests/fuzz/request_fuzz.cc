// libFuzzer entry point for the server's request parser: the first byte picks the endpoint
// ('c': /v1/chat/completions, else /v1/completions), the rest is the body. Any input must give
// a 400 naming what is wrong, or a request whose values are within the documented limits; the
// response builders and the reasoning splitter must take whatever a valid request leads to.
#include <cstddef>
#include <cstdint>
#include <string>
#include <variant>

#include "apps/server/api.h"

namespace server = moesplit::app::server;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const bool chat = data[0] == 'c';
  const std::string body(reinterpret_cast<const char*>(data) + 1, size - 1);
  const server::Limits limits{.ctx_size = 512, .n_vocab = 1000};
  auto parsed = server::ParseRequest(body, chat, limits);
  if (const auto* e = std::get_if<server::ApiError>(&parsed)) {
    if (e->status != 400 || e->message.empty()) __builtin_trap();
    (void)server::Dump(e->Json());
    return 0;
  }
  const server::ApiRequest& r = std::get<server::ApiRequest>(parsed);
  const auto& g = r.gen;
  if (g.max_tokens < -1 || g.max_tokens > limits.ctx_size) __builtin_trap();
  if (g.top_logprobs < -1 || g.top_logprobs > 20 || g.stop.size() > 16) __builtin_trap();
  if (!(g.sampling.temperature >= 0) || !(g.sampling.top_p > 0 && g.sampling.top_p <= 1)) {
    __builtin_trap();
  }
  if (chat && r.messages.empty()) __builtin_trap();
  if (!chat && r.prompt.empty() && r.prompt_tokens.empty()) __builtin_trap();
  for (int32_t t : r.prompt_tokens) {
    if (t < 0 || t >= limits.n_vocab) __builtin_trap();
  }
  // What the request's text could produce goes through the splitter and the builders.
  server::ReasoningSplitter split(true, false);
  server::Produced p;
  for (const auto& m : r.messages) split.Push(m.content, &p.reasoning, &p.content);
  split.Push(r.prompt, &p.reasoning, &p.content);
  split.Flush(&p.reasoning, &p.content);
  const server::ResponseMeta meta{"id", r.model, 0};
  (void)server::Dump(chat ? server::ChatResponse(meta, p, nullptr)
                          : server::CompletionResponse(meta, p, nullptr));
  (void)server::Dump(server::ChatChunk(meta, "assistant", p.content, p.reasoning, "", nullptr));
  return 0;
}
