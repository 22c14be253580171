// apps/server/api: request validation (errors name the field), the <think> splitter at every
// split point, response shapes.
#include <gtest/gtest.h>

#include <string>
#include <variant>

#include "apps/server/api.h"

namespace moesplit::app::server {
namespace {

using nlohmann::json;

const Limits kLimits{.ctx_size = 4096, .n_vocab = 1000};

ApiError Error(const std::string& body, bool chat = true) {
  auto r = ParseRequest(body, chat, kLimits);
  EXPECT_TRUE(std::holds_alternative<ApiError>(r)) << body;
  return std::holds_alternative<ApiError>(r) ? std::get<ApiError>(r) : ApiError{};
}

ApiRequest Ok(const std::string& body, bool chat = true) {
  auto r = ParseRequest(body, chat, kLimits);
  EXPECT_TRUE(std::holds_alternative<ApiRequest>(r))
      << body << ": " << (std::holds_alternative<ApiError>(r) ? std::get<ApiError>(r).message : "");
  return std::holds_alternative<ApiRequest>(r) ? std::get<ApiRequest>(r) : ApiRequest{};
}

TEST(ServerApiTest, ChatRequestFields) {
  const ApiRequest r = Ok(R"({"model": "m", "messages": [{"role": "system", "content": "S"},
      {"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]}],
      "max_tokens": 7, "temperature": 0, "top_p": 0.5, "top_k": 3, "min_p": 0.1, "seed": 42,
      "stop": ["x", "y"], "presence_penalty": 0.5, "frequency_penalty": -0.5,
      "repeat_penalty": 1.1, "logprobs": true, "top_logprobs": 3, "stream": true,
      "stream_options": {"include_usage": true}, "user": "ignored", "store": false})");
  ASSERT_EQ(r.messages.size(), 2u);
  EXPECT_EQ(r.messages[1].content, "ab");
  EXPECT_EQ(r.gen.max_tokens, 7);
  EXPECT_EQ(r.gen.sampling.temperature, 0.0f);
  EXPECT_EQ(r.gen.sampling.top_k, 3);
  EXPECT_EQ(r.gen.sampling.seed, 42u);
  EXPECT_EQ(r.gen.stop.size(), 2u);
  EXPECT_EQ(r.gen.top_logprobs, 3);
  EXPECT_TRUE(r.stream);
  EXPECT_TRUE(r.include_usage);
  EXPECT_EQ(r.model, "m");
  // max_completion_tokens (the newer name) wins.
  EXPECT_EQ(Ok(R"({"messages": [{"role": "user", "content": "x"}], "max_tokens": 5,
                   "max_completion_tokens": 9})").gen.max_tokens, 9);
  EXPECT_EQ(Ok(R"({"messages": [{"role": "developer", "content": "x"}]})").messages[0].role,
            chat::Role::kSystem);
}

TEST(ServerApiTest, ErrorsNameTheField) {
  EXPECT_EQ(Error("{not json").param, "");
  EXPECT_NE(Error("{not json").message.find("not valid JSON"), std::string::npos);
  EXPECT_EQ(Error("[1, 2]").status, 400);
  EXPECT_EQ(Error(R"({})").param, "messages");
  EXPECT_EQ(Error(R"({"messages": []})").param, "messages");
  EXPECT_EQ(Error(R"({"messages": "hi"})").param, "messages");
  EXPECT_EQ(Error(R"({"messages": [{"role": "wizard", "content": "x"}]})").param,
            "messages[0].role");
  EXPECT_EQ(Error(R"({"messages": [{"role": "user"}]})").param, "messages[0].content");
  EXPECT_EQ(Error(R"({"messages": [{"role": "user", "content": [{"type": "image_url"}]}]})").param,
            "messages[0].content[0]");
  const std::string m = R"("messages": [{"role": "user", "content": "x"}])";
  EXPECT_EQ(Error("{" + m + R"(, "max_tokens": 0})").param, "max_tokens");
  EXPECT_EQ(Error("{" + m + R"(, "max_tokens": -3})").param, "max_tokens");
  const ApiError absurd = Error("{" + m + R"(, "max_tokens": 100000000})");
  EXPECT_EQ(absurd.param, "max_tokens");
  EXPECT_NE(absurd.message.find("4096"), std::string::npos) << absurd.message;
  EXPECT_EQ(Error("{" + m + R"(, "max_tokens": 2.5})").param, "max_tokens");
  EXPECT_EQ(Error("{" + m + R"(, "max_tokens": "10"})").param, "max_tokens");
  EXPECT_EQ(Error("{" + m + R"(, "temperature": "hot"})").param, "temperature");
  EXPECT_EQ(Error("{" + m + R"(, "temperature": -1})").param, "temperature");
  // 1e999 overflows a double: refused by the JSON parser, saying so.
  EXPECT_NE(Error("{" + m + R"(, "temperature": 1e999})").message.find("overflow"),
            std::string::npos);
  EXPECT_EQ(Error("{" + m + R"(, "top_p": 0})").param, "top_p");
  EXPECT_EQ(Error("{" + m + R"(, "top_k": -1})").param, "top_k");
  EXPECT_EQ(Error("{" + m + R"(, "seed": "x"})").param, "seed");
  EXPECT_EQ(Error("{" + m + R"(, "stop": 5})").param, "stop");
  EXPECT_EQ(Error("{" + m + R"(, "stream": "yes"})").param, "stream");
  EXPECT_EQ(Error("{" + m + R"(, "n": 2})").param, "n");
  EXPECT_EQ(Error("{" + m + R"(, "top_logprobs": 3})").param, "top_logprobs");
  EXPECT_EQ(Error("{" + m + R"(, "top_logprobs": 21, "logprobs": true})").param, "top_logprobs");
  EXPECT_EQ(Error("{" + m + R"(, "stream_options": {"include_usage": 1}})").param,
            "stream_options.include_usage");
}

// chat_template_kwargs as llama-server takes it: an object; thinking / enable_thinking must be
// booleans; other template variables pass unread.
TEST(ServerApiTest, ChatTemplateKwargs) {
  const std::string msgs = R"("messages": [{"role": "user", "content": "x"}])";
  ApiRequest r = Ok("{" + msgs + R"(, "chat_template_kwargs": {"thinking": true, "x": "y"}})");
  EXPECT_EQ(r.template_kwargs.thinking, std::optional<bool>(true));
  EXPECT_FALSE(r.template_kwargs.enable_thinking.has_value());
  r = Ok("{" + msgs + R"(, "chat_template_kwargs": {"enable_thinking": false}})");
  EXPECT_EQ(r.template_kwargs.enable_thinking, std::optional<bool>(false));
  EXPECT_FALSE(r.template_kwargs.thinking.has_value());
  r = Ok("{" + msgs + R"(, "chat_template_kwargs": null})");
  EXPECT_FALSE(r.template_kwargs.thinking || r.template_kwargs.enable_thinking);
  EXPECT_EQ(Error("{" + msgs + R"(, "chat_template_kwargs": [true]})").param,
            "chat_template_kwargs");
  const ApiError e =
      Error("{" + msgs + R"(, "chat_template_kwargs": {"enable_thinking": "false"}})");
  EXPECT_EQ(e.param, "chat_template_kwargs.enable_thinking");
  EXPECT_NE(e.message.find("must be a boolean, got a string"), std::string::npos) << e.message;
}

TEST(ServerApiTest, CompletionPrompts) {
  EXPECT_EQ(Ok(R"({"prompt": "hi"})", false).prompt, "hi");
  EXPECT_EQ(Ok(R"({"prompt": ["hi"]})", false).prompt, "hi");
  EXPECT_EQ(Ok(R"({"prompt": [1, 2, 3]})", false).prompt_tokens.size(), 3u);
  EXPECT_EQ(Ok(R"({"prompt": "hi", "logprobs": 2})", false).gen.top_logprobs, 2);
  EXPECT_EQ(Error(R"({"prompt": [1, 5000]})", false).param, "prompt");  // outside the vocabulary
  EXPECT_EQ(Error(R"({"prompt": ["a", "b"]})", false).param, "prompt");
  EXPECT_EQ(Error(R"({"prompt": ""})", false).param, "prompt");
  EXPECT_EQ(Error(R"({})", false).param, "prompt");
  EXPECT_EQ(Error(R"({"prompt": "x", "logprobs": true})", false).param, "logprobs");
}

TEST(ServerApiTest, ErrorJsonHasTheOpenAiShape) {
  const json j = ApiError{400, "bad", "invalid_request_error", "max_tokens"}.Json();
  EXPECT_EQ(j["error"]["message"], "bad");
  EXPECT_EQ(j["error"]["type"], "invalid_request_error");
  EXPECT_EQ(j["error"]["param"], "max_tokens");
  const ApiError auth{401, "k", "authentication_error", ""};
  EXPECT_TRUE(auth.Json()["error"]["param"].is_null());
}

// The splitter gives the same reasoning / content whichever way the text is cut into pieces.
TEST(ServerApiTest, ReasoningSplitAtEveryCut) {
  struct Case {
    bool opened;
    std::string text, reasoning, content;
  };
  const Case cases[] = {
      {false, "\n<think>\nplan it</think>\n\nAnswer.", "\nplan it", "Answer."},
      {true, "plan</think>Done", "plan", "Done"},
      {false, "No thinking here <think>", "", "No thinking here <think>"},
      {false, "<thi", "", "<thi"},
      {true, "still thinking </thi", "still thinking </thi", ""},
  };
  for (const Case& c : cases) {
    for (size_t cut = 0; cut <= c.text.size(); ++cut) {
      ReasoningSplitter s(true, c.opened);
      std::string r, t;
      s.Push(c.text.substr(0, cut), &r, &t);
      s.Push(c.text.substr(cut), &r, &t);
      s.Flush(&r, &t);
      EXPECT_EQ(r, c.reasoning) << c.text << " cut " << cut;
      EXPECT_EQ(t, c.content) << c.text << " cut " << cut;
    }
  }
  ReasoningSplitter off(false, true);
  std::string r, t;
  off.Push("<think>x</think>y", &r, &t);
  EXPECT_EQ(t, "<think>x</think>y");
  EXPECT_TRUE(r.empty());
}

TEST(ServerApiTest, ResponsesCarryUsageAndTimings) {
  Produced p;
  p.content = "hi";
  p.reasoning = "r";
  p.finish = serving::FinishReason::kLength;
  p.usage.prompt_tokens = 10;
  p.usage.cached_tokens = 4;
  p.usage.completion_tokens = 3;
  p.usage.prompt_ms = 12;
  p.usage.predicted_ms = 30;
  const json c = ChatResponse({"chatcmpl-1", "m", 5}, p, nullptr);
  EXPECT_EQ(c["object"], "chat.completion");
  EXPECT_EQ(c["choices"][0]["message"]["content"], "hi");
  EXPECT_EQ(c["choices"][0]["message"]["reasoning_content"], "r");
  EXPECT_EQ(c["choices"][0]["finish_reason"], "length");
  EXPECT_EQ(c["usage"]["total_tokens"], 13);
  EXPECT_EQ(c["usage"]["prompt_tokens_details"]["cached_tokens"], 4);
  EXPECT_EQ(c["timings"]["prompt_n"], 6);
  EXPECT_DOUBLE_EQ(c["timings"]["predicted_per_second"].get<double>(), 100.0);
  const json chunk = ChatChunk({"chatcmpl-1", "m", 5}, "assistant", "x", "", "", nullptr);
  EXPECT_EQ(chunk["choices"][0]["delta"]["role"], "assistant");
  EXPECT_FALSE(chunk["choices"][0]["delta"].contains("reasoning_content"));
  EXPECT_TRUE(chunk["choices"][0]["finish_reason"].is_null());
  EXPECT_EQ(Dump(json("a\xff")), "\"a\xef\xbf\xbd\"");  // invalid UTF-8 replaced
}

}  // namespace
}  // namespace moesplit::app::server
