#include "apps/server/api.h"

#include <cmath>
#include <limits>

namespace moesplit::app::server {

using nlohmann::json;

json ApiError::Json() const {
  json e = {{"message", message}, {"type", type}, {"code", status}};
  e["param"] = param.empty() ? json(nullptr) : json(param);
  return {{"error", e}};
}

std::string Dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

namespace {

ApiError Bad(std::string param, std::string message) {
  return ApiError{400, std::move(message), "invalid_request_error", std::move(param)};
}

const char* TypeName(const json& v) {
  switch (v.type()) {
    case json::value_t::null: return "null";
    case json::value_t::boolean: return "a boolean";
    case json::value_t::string: return "a string";
    case json::value_t::array: return "an array";
    case json::value_t::object: return "an object";
    default: return "a number";
  }
}

// Field readers: absent or null leaves *out unchanged; a wrong type or range is an ApiError.
std::optional<ApiError> Number(const json& body, const char* key, double lo, double hi,
                               double* out) {
  const auto it = body.find(key);
  if (it == body.end() || it->is_null()) return std::nullopt;
  if (!it->is_number()) {
    return Bad(key, StrCat(key, " must be a number, got ", TypeName(*it)));
  }
  const double v = it->get<double>();
  if (!std::isfinite(v) || v < lo || v > hi) {
    return Bad(key, StrCat(key, " must be a finite number in [", lo, ", ", hi, "], got ", v));
  }
  *out = v;
  return std::nullopt;
}

std::optional<ApiError> Integer(const json& body, const char* key, int64_t lo, int64_t hi,
                                int64_t* out) {
  const auto it = body.find(key);
  if (it == body.end() || it->is_null()) return std::nullopt;
  if (!it->is_number()) {
    return Bad(key, StrCat(key, " must be an integer, got ", TypeName(*it)));
  }
  const double d = it->get<double>();
  if (!it->is_number_integer() && (!std::isfinite(d) || d != std::floor(d))) {
    return Bad(key, StrCat(key, " must be an integer, got ", d));
  }
  if (!std::isfinite(d) || d < static_cast<double>(lo) || d > static_cast<double>(hi)) {
    return Bad(key, StrCat(key, " must be in [", lo, ", ", hi, "], got ", it->dump()));
  }
  *out = it->is_number_unsigned() ? static_cast<int64_t>(it->get<uint64_t>())
                                  : it->is_number_integer() ? it->get<int64_t>()
                                                            : static_cast<int64_t>(d);
  return std::nullopt;
}

std::optional<ApiError> Boolean(const json& body, const char* key, bool* out) {
  const auto it = body.find(key);
  if (it == body.end() || it->is_null()) return std::nullopt;
  if (!it->is_boolean()) return Bad(key, StrCat(key, " must be a boolean, got ", TypeName(*it)));
  *out = it->get<bool>();
  return std::nullopt;
}

// "content": a string, or an array of {"type": "text", "text": ...} parts (OpenAI's content parts).
std::optional<ApiError> MessageContent(const json& m, const std::string& param, std::string* out) {
  const auto it = m.find("content");
  if (it == m.end() || it->is_null()) {
    return Bad(param + ".content", "every message needs a content");
  }
  if (it->is_string()) {
    *out = it->get<std::string>();
    return std::nullopt;
  }
  if (!it->is_array()) {
    return Bad(param + ".content",
               StrCat("content must be a string or an array of text parts, got ", TypeName(*it)));
  }
  for (size_t i = 0; i < it->size(); ++i) {
    const json& part = (*it)[i];
    const std::string p = StrCat(param, ".content[", i, "]");
    if (!part.is_object() || !part.contains("type") || part["type"] != "text" ||
        !part.contains("text") || !part["text"].is_string()) {
      return Bad(p, "only text content parts ({\"type\": \"text\", \"text\": ...}) are supported");
    }
    *out += part["text"].get<std::string>();
  }
  return std::nullopt;
}

std::optional<ApiError> Messages(const json& body, std::vector<chat::ChatMessage>* out) {
  const auto it = body.find("messages");
  if (it == body.end() || it->is_null()) return Bad("messages", "messages is required");
  if (!it->is_array()) {
    return Bad("messages", StrCat("messages must be an array, got ", TypeName(*it)));
  }
  if (it->empty()) return Bad("messages", "messages must hold at least one message");
  if (it->size() > 4096) return Bad("messages", "more than 4096 messages");
  for (size_t i = 0; i < it->size(); ++i) {
    const json& m = (*it)[i];
    const std::string param = StrCat("messages[", i, "]");
    if (!m.is_object()) return Bad(param, StrCat(param, " must be an object"));
    const auto role = m.find("role");
    if (role == m.end() || !role->is_string()) {
      return Bad(param + ".role", "every message needs a role (system, user or assistant)");
    }
    std::string name = role->get<std::string>();
    if (name == "developer") name = "system";  // OpenAI's newer name for system
    StatusOr<chat::Role> r = chat::ParseRole(name);
    if (!r.ok()) {
      return Bad(param + ".role", StrCat("unknown role \"", role->get<std::string>(),
                                         "\" (system, developer, user or assistant)"));
    }
    chat::ChatMessage msg{*r, ""};
    if (auto e = MessageContent(m, param, &msg.content)) return e;
    out->push_back(std::move(msg));
  }
  return std::nullopt;
}

std::optional<ApiError> Prompt(const json& body, const Limits& limits, ApiRequest* r) {
  const auto it = body.find("prompt");
  if (it == body.end() || it->is_null()) return Bad("prompt", "prompt is required");
  if (it->is_string()) {
    r->prompt = it->get<std::string>();
    if (r->prompt.empty()) return Bad("prompt", "prompt is empty");
    return std::nullopt;
  }
  if (it->is_array() && it->size() == 1 && (*it)[0].is_string()) {
    r->prompt = (*it)[0].get<std::string>();
    if (r->prompt.empty()) return Bad("prompt", "prompt is empty");
    return std::nullopt;
  }
  if (it->is_array() && !it->empty() && (*it)[0].is_number()) {
    for (const json& t : *it) {
      if (!t.is_number_integer() || t.get<int64_t>() < 0 || t.get<int64_t>() >= limits.n_vocab) {
        return Bad("prompt", StrCat("token ids must be integers in [0, ", limits.n_vocab,
                                    "), got ", t.dump()));
      }
      r->prompt_tokens.push_back(static_cast<int32_t>(t.get<int64_t>()));
    }
    return std::nullopt;
  }
  return Bad("prompt", "prompt must be a non-empty string, one string in an array, or an array of "
                       "token ids (several prompts per request are not supported)");
}

std::optional<ApiError> Stop(const json& body, std::vector<std::string>* out) {
  const auto it = body.find("stop");
  if (it == body.end() || it->is_null()) return std::nullopt;
  if (it->is_string()) {
    out->push_back(it->get<std::string>());
  } else if (it->is_array()) {
    for (const json& s : *it) {
      if (!s.is_string()) return Bad("stop", "stop must be a string or an array of strings");
      out->push_back(s.get<std::string>());
    }
  } else {
    return Bad("stop", StrCat("stop must be a string or an array of strings, got ", TypeName(*it)));
  }
  if (out->size() > 16) return Bad("stop", "at most 16 stop strings");
  for (const std::string& s : *out) {
    if (s.size() > 1024) return Bad("stop", "stop strings are limited to 1024 bytes");
  }
  return std::nullopt;
}

std::optional<ApiError> Sampling(const json& b, const Limits& limits, ApiRequest* r) {
  sampling::SamplerConfig& s = r->gen.sampling;
  // OpenAI's defaults where it has them (temperature 1, top_p 1); llama-server's otherwise.
  s.temperature = 1.0f;
  s.top_p = 1.0f;
  s.top_k = 40;
  s.min_p = 0.05f;
  double v = s.temperature;
  if (auto e = Number(b, "temperature", 0, 100, &v)) return e;
  s.temperature = static_cast<float>(v);
  v = s.top_p;
  if (auto e = Number(b, "top_p", 0, 1, &v)) return e;
  if (v <= 0) return Bad("top_p", "top_p must be in (0, 1], got 0");
  s.top_p = static_cast<float>(v);
  int64_t i = s.top_k;
  if (auto e = Integer(b, "top_k", 0, 1 << 30, &i)) return e;
  s.top_k = static_cast<int32_t>(i);
  v = s.min_p;
  if (auto e = Number(b, "min_p", 0, 1, &v)) return e;
  s.min_p = static_cast<float>(v);
  v = s.presence_penalty;
  if (auto e = Number(b, "presence_penalty", -2, 2, &v)) return e;
  s.presence_penalty = static_cast<float>(v);
  v = s.frequency_penalty;
  if (auto e = Number(b, "frequency_penalty", -2, 2, &v)) return e;
  s.frequency_penalty = static_cast<float>(v);
  v = s.repeat_penalty;
  if (auto e = Number(b, "repeat_penalty", 0, 100, &v)) return e;
  if (v <= 0) return Bad("repeat_penalty", "repeat_penalty must be > 0 (1 = off)");
  s.repeat_penalty = static_cast<float>(v);
  int64_t seed = -1;
  if (auto e = Integer(b, "seed", -1, std::numeric_limits<uint32_t>::max() - 1, &seed)) return e;
  s.seed = seed < 0 ? sampling::kRandomSeed : static_cast<uint32_t>(seed);
  // max_completion_tokens (newer) wins over max_tokens; n_predict is llama-server's name.
  int64_t max_tokens = -1;
  for (const char* key : {"n_predict", "max_tokens", "max_completion_tokens"}) {
    if (auto e = Integer(b, key, key[0] == 'n' ? -1 : 1, limits.ctx_size, &max_tokens)) {
      if (key[0] != 'n') {
        e->message += StrCat(" (the context holds ", limits.ctx_size, " tokens)");
      }
      return e;
    }
  }
  r->gen.max_tokens = max_tokens;
  if (auto e = Boolean(b, "ignore_eos", &r->gen.ignore_eos)) return e;
  if (auto e = Stop(b, &r->gen.stop)) return e;
  if (r->chat) {
    if (auto e = Boolean(b, "logprobs", &r->logprobs)) return e;
  }
  int64_t top = 0;
  if (auto e = Integer(b, "top_logprobs", 0, 20, &top)) return e;
  if (!r->chat && b.contains("logprobs") && b["logprobs"].is_number_integer()) {
    // completions: "logprobs": N is the number of top tokens
    top = b["logprobs"].get<int64_t>();
    if (top < 0 || top > 20) return Bad("logprobs", "logprobs must be in [0, 20]");
    r->logprobs = true;
  }
  if (b.contains("top_logprobs") && !b["top_logprobs"].is_null() && !r->logprobs && r->chat) {
    return Bad("top_logprobs", "top_logprobs needs logprobs: true");
  }
  r->gen.top_logprobs = r->logprobs ? static_cast<int>(top) : -1;
  int64_t n = 1;
  if (auto e = Integer(b, "n", 1, 1, &n)) {
    e->message = "only n = 1 (one choice per request) is supported";
    return e;
  }
  return std::nullopt;
}

}  // namespace

std::variant<ApiRequest, ApiError> ParseRequest(std::string_view body_text, bool chat,
                                                const Limits& limits) {
  json b;
  try {
    b = json::parse(body_text);
  } catch (const json::exception& e) {
    // e.what(): "[json.exception.parse_error.101] parse error at line 1, column 5: ..."
    std::string what = e.what();
    const size_t at = what.find("] ");
    return Bad("", "the request body is not valid JSON: " +
                       (at == std::string::npos ? what : what.substr(at + 2)));
  }
  if (!b.is_object()) return Bad("", StrCat("the request body must be a JSON object, got ",
                                            TypeName(b)));
  ApiRequest r;
  r.chat = chat;
  if (const auto it = b.find("model"); it != b.end() && it->is_string()) {
    r.model = it->get<std::string>();
  }
  if (chat) {
    if (auto e = Messages(b, &r.messages)) return *e;
  } else {
    if (b.contains("logprobs") && b["logprobs"].is_boolean()) {
      return Bad("logprobs", "for /v1/completions logprobs is an integer (top tokens, 0-20)");
    }
    if (auto e = Prompt(b, limits, &r)) return *e;
  }
  if (b.contains("logprobs") && b["logprobs"].is_number() && chat) {
    return Bad("logprobs", "for /v1/chat/completions logprobs is a boolean (top_logprobs: N)");
  }
  if (auto e = Sampling(b, limits, &r)) return *e;
  if (const auto it = b.find("chat_template_kwargs"); chat && it != b.end() && !it->is_null()) {
    if (auto e = ParseTemplateKwargs(*it, "chat_template_kwargs", &r.template_kwargs)) return *e;
  }
  if (auto e = Boolean(b, "stream", &r.stream)) return *e;
  if (const auto it = b.find("stream_options"); it != b.end() && !it->is_null()) {
    if (!it->is_object()) return Bad("stream_options", "stream_options must be an object");
    if (auto e = Boolean(*it, "include_usage", &r.include_usage)) {
      e->param = "stream_options.include_usage";
      return *e;
    }
  }
  return r;
}

std::optional<ApiError> ParseTemplateKwargs(const json& o, const std::string& param,
                                            chat::TemplateKwargs* out) {
  if (!o.is_object()) return Bad(param, StrCat(param, " must be an object, got ", TypeName(o)));
  const std::pair<const char*, std::optional<bool>*> keys[] = {
      {"thinking", &out->thinking}, {"enable_thinking", &out->enable_thinking}};
  for (const auto& [key, field] : keys) {
    const auto it = o.find(key);
    if (it == o.end()) continue;
    if (!it->is_boolean()) {
      return Bad(StrCat(param, ".", key),
                 StrCat(param, ".", key, " must be a boolean, got ", TypeName(*it)));
    }
    *field = it->get<bool>();
  }
  return std::nullopt;
}

// ---- reasoning -----------------------------------------------------------------------------

namespace {
constexpr std::string_view kOpen = "<think>", kClose = "</think>";
// Length of the longest suffix of s that is a proper prefix of tag.
size_t PartialTag(std::string_view s, std::string_view tag) {
  for (size_t n = std::min(s.size(), tag.size() - 1); n > 0; --n) {
    if (s.substr(s.size() - n) == tag.substr(0, n)) return n;
  }
  return 0;
}
bool IsSpace(char c) { return c == ' ' || c == '\n' || c == '\r' || c == '\t'; }
}  // namespace

ReasoningSplitter::ReasoningSplitter(bool enabled, bool opened)
    : mode_(!enabled ? Mode::kContent : opened ? Mode::kReasoning : Mode::kStart) {}

void ReasoningSplitter::Push(std::string_view text, std::string* reasoning, std::string* content) {
  held_.append(text);
  while (!held_.empty()) {
    switch (mode_) {
      case Mode::kContent:
        content->append(held_);
        held_.clear();
        return;
      case Mode::kStart: {  // whitespace, then "<think>" opens reasoning; anything else: content
        size_t i = 0;
        while (i < held_.size() && IsSpace(held_[i])) ++i;
        const std::string_view rest = std::string_view(held_).substr(i);
        if (rest.size() < kOpen.size() && kOpen.substr(0, rest.size()) == rest) return;  // wait
        if (rest.substr(0, kOpen.size()) == kOpen) {
          held_.erase(0, i + kOpen.size());
          mode_ = Mode::kReasoning;
        } else {
          mode_ = Mode::kContent;
        }
        break;
      }
      case Mode::kReasoning: {
        const size_t at = held_.find(kClose);
        if (at == std::string::npos) {
          const size_t keep = PartialTag(held_, kClose);
          reasoning->append(held_, 0, held_.size() - keep);
          held_.erase(0, held_.size() - keep);
          return;
        }
        reasoning->append(held_, 0, at);
        held_.erase(0, at + kClose.size());
        mode_ = Mode::kContentStart;
        break;
      }
      case Mode::kContentStart: {  // the answer after </think>: leading whitespace dropped
        size_t i = 0;
        while (i < held_.size() && IsSpace(held_[i])) ++i;
        held_.erase(0, i);
        if (!held_.empty()) mode_ = Mode::kContent;
        break;
      }
    }
  }
}

void ReasoningSplitter::Flush(std::string* reasoning, std::string* content) {
  if (mode_ == Mode::kReasoning) {
    reasoning->append(held_);
  } else if (mode_ != Mode::kContentStart) {
    content->append(held_);
  }
  held_.clear();
}

// ---- responses ---------------------------------------------------------------------------------

const char* FinishName(serving::FinishReason r) {
  return r == serving::FinishReason::kLength ? "length" : "stop";
}

json UsageJson(const serving::Usage& u) {
  return {{"prompt_tokens", u.prompt_tokens},
          {"completion_tokens", u.completion_tokens},
          {"total_tokens", u.prompt_tokens + u.completion_tokens},
          {"prompt_tokens_details", {{"cached_tokens", u.cached_tokens}}}};
}

json TimingsJson(const serving::Usage& u) {
  const int64_t prompt_n = u.prompt_tokens - u.cached_tokens;
  auto per_second = [](int64_t n, double ms) { return ms > 0 ? 1000.0 * n / ms : 0.0; };
  auto per_token = [](int64_t n, double ms) { return n > 0 ? ms / n : 0.0; };
  return {{"cache_n", u.cached_tokens},
          {"prompt_n", prompt_n},
          {"prompt_ms", u.prompt_ms},
          {"prompt_per_token_ms", per_token(prompt_n, u.prompt_ms)},
          {"prompt_per_second", per_second(prompt_n, u.prompt_ms)},
          {"predicted_n", u.completion_tokens},
          {"predicted_ms", u.predicted_ms},
          {"predicted_per_token_ms", per_token(u.completion_tokens, u.predicted_ms)},
          {"predicted_per_second", per_second(u.completion_tokens, u.predicted_ms)},
          {"queued_ms", u.queued_ms}};
}

json LogprobsJson(const std::vector<serving::Event>& events, bool chat,
                  const std::function<std::string(int32_t)>& piece) {
  auto bytes = [](const std::string& s) {
    json b = json::array();
    for (unsigned char c : s) b.push_back(c);
    return b;
  };
  if (chat) {
    json content = json::array();
    for (const serving::Event& e : events) {
      for (size_t i = 0; i < e.chosen.size(); ++i) {
        const std::string t = piece(e.chosen[i].id);
        json top = json::array();
        for (const serving::TokenLogprob& p : e.top[i]) {
          const std::string pt = piece(p.id);
          top.push_back({{"token", pt}, {"logprob", p.logprob}, {"bytes", bytes(pt)}});
        }
        content.push_back({{"token", t}, {"logprob", e.chosen[i].logprob}, {"bytes", bytes(t)},
                           {"top_logprobs", top}});
      }
    }
    return {{"content", content}};
  }
  json tokens = json::array(), lps = json::array(), tops = json::array();
  for (const serving::Event& e : events) {
    for (size_t i = 0; i < e.chosen.size(); ++i) {
      tokens.push_back(piece(e.chosen[i].id));
      lps.push_back(e.chosen[i].logprob);
      json top = json::object();
      for (const serving::TokenLogprob& p : e.top[i]) top[piece(p.id)] = p.logprob;
      tops.push_back(top);
    }
  }
  return {{"tokens", tokens}, {"token_logprobs", lps}, {"top_logprobs", tops}};
}

namespace {
// {id, object, created, model, system_fingerprint, choices: [choice]}: every response's frame.
json Envelope(const ResponseMeta& m, const char* object, json choice) {
  return {{"id", m.id},          {"object", object},
          {"created", m.created}, {"model", m.model},
          {"system_fingerprint", "moesplit"}, {"choices", json::array({std::move(choice)})}};
}
json FinishJson(const std::string& finish) {
  return finish.empty() ? json(nullptr) : json(finish);
}
}  // namespace

json ChatResponse(const ResponseMeta& m, const Produced& p, json logprobs) {
  json message = {{"role", "assistant"}, {"content", p.content}};
  if (!p.reasoning.empty()) message["reasoning_content"] = p.reasoning;
  json r = Envelope(m, "chat.completion",
                    {{"index", 0},
                     {"message", message},
                     {"logprobs", logprobs},
                     {"finish_reason", FinishName(p.finish)}});
  r["usage"] = UsageJson(p.usage);
  r["timings"] = TimingsJson(p.usage);
  return r;
}

json CompletionResponse(const ResponseMeta& m, const Produced& p, json logprobs) {
  json r = Envelope(m, "text_completion",
                    {{"index", 0},
                     {"text", p.content},
                     {"logprobs", logprobs},
                     {"finish_reason", FinishName(p.finish)}});
  r["usage"] = UsageJson(p.usage);
  r["timings"] = TimingsJson(p.usage);
  return r;
}

json ChatChunk(const ResponseMeta& m, const std::string& role, const std::string& content,
               const std::string& reasoning, const std::string& finish, json logprobs) {
  json delta = json::object();
  if (!role.empty()) delta["role"] = role;
  if (!content.empty()) delta["content"] = content;
  if (!reasoning.empty()) delta["reasoning_content"] = reasoning;
  return Envelope(m, "chat.completion.chunk",
                  {{"index", 0},
                   {"delta", delta},
                   {"logprobs", logprobs},
                   {"finish_reason", FinishJson(finish)}});
}

json CompletionChunk(const ResponseMeta& m, const std::string& text, const std::string& finish,
                     json logprobs) {
  return Envelope(m, "text_completion",
                  {{"index", 0},
                   {"text", text},
                   {"logprobs", logprobs},
                   {"finish_reason", FinishJson(finish)}});
}

json UsageChunk(const ResponseMeta& m, bool chat, const serving::Usage& u) {
  return {{"id", m.id},
          {"object", chat ? "chat.completion.chunk" : "text_completion"},
          {"created", m.created},
          {"model", m.model},
          {"choices", json::array()},
          {"usage", UsageJson(u)},
          {"timings", TimingsJson(u)}};
}

}  // namespace moesplit::app::server
