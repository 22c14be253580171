// `moesplit serve` in-process over loopback: the HTTP errors a client can cause, the endpoints
// beside the completions, a stream whose client leaves. (The OpenAI client, load and browser
// tests are in tests/apps/server_js, run by scripts/test-server.sh.)
#include <gtest/gtest.h>
#include <httplib.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <functional>
#include <future>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>

#include "apps/cmd_serve.h"
#include "apps/server/http_server.h"
#include "tests/testdata.h"

namespace moesplit::app {
namespace {

using nlohmann::json;

TEST(ServeLoadingTest, BeforeTheModelIsReadyOnlyHealthAnswersAnd503) {
  server::HttpServer http({.host = "127.0.0.1", .port = 0});
  ASSERT_TRUE(http.Bind().ok());
  std::thread t([&] { http.Run(); });
  httplib::Client c("127.0.0.1", http.port());
  auto health = c.Get("/health");
  ASSERT_TRUE(health);
  EXPECT_EQ(health->status, 503);
  auto chat = c.Post("/v1/chat/completions", "{}", "application/json");
  ASSERT_TRUE(chat);
  EXPECT_EQ(chat->status, 503);
  EXPECT_EQ(chat->get_header_value("Retry-After"), "5");
  EXPECT_EQ(json::parse(chat->body)["error"]["type"], "unavailable_error");
  http.Stop();
  t.join();
}

// The command line's refusals name the flag and the value, before anything listens or loads.
TEST(ServeArgsTest, BadFlagsNameTheFlag) {
  const std::atomic<bool> stop{true};
  auto refusal = [&](const std::function<void(ServeArgs&)>& set) {
    ServeArgs a;
    a.model = "/nonexistent/model.gguf";
    a.http.port = 0;
    set(a);
    std::ostringstream err;
    const Status s = RunServe(a, err, &stop);
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.ToString();
    return s.ToString();
  };
  EXPECT_NE(refusal([](ServeArgs& a) { a.n_parallel = 0; }).find("-np"), std::string::npos);
  EXPECT_NE(refusal([](ServeArgs& a) { a.n_parallel = 257; }).find("257"), std::string::npos);
  EXPECT_NE(refusal([](ServeArgs& a) { a.ctx_size = 32; }).find("-c must be >= 64, got 32"),
            std::string::npos);
  EXPECT_NE(refusal([](ServeArgs& a) { a.batch_tokens = 0; }).find("--batch-tokens"),
            std::string::npos);
  EXPECT_NE(refusal([](ServeArgs& a) { a.max_queue = -1; }).find("--max-queue"), std::string::npos);
  EXPECT_NE(refusal([](ServeArgs& a) { a.whole_prompt_tokens = -1; }).find("--whole-prompt"),
            std::string::npos);
  EXPECT_NE(refusal([](ServeArgs& a) { a.reasoning_format = "r1"; }).find("\"r1\""),
            std::string::npos);
  EXPECT_NE(refusal([](ServeArgs& a) { a.http.timeout_s = 0; }).find("--timeout"),
            std::string::npos);
  EXPECT_NE(refusal([](ServeArgs& a) { a.reasoning = "maybe"; }).find("--reasoning"),
            std::string::npos);
  EXPECT_NE(refusal([](ServeArgs& a) {
              a.chat_template_kwargs = "{\"thinking\": 1";
            }).find("--chat-template-kwargs"),
            std::string::npos);
  EXPECT_NE(refusal([](ServeArgs& a) {
              a.chat_template_kwargs = R"({"thinking": "yes"})";
            }).find("--chat-template-kwargs.thinking must be a boolean"),
            std::string::npos);
  EXPECT_NE(refusal([](ServeArgs& a) {
              a.http.api_key = "k";
              a.api_key_file = "/tmp/k";
            }).find("not both"),
            std::string::npos);
  // An empty key file is refused naming the file; a model that is not there names the path.
  const std::string empty = testing::ScratchDir() + "/empty-key." + std::to_string(::getpid());
  { std::ofstream(empty) << "\n"; }
  EXPECT_NE(refusal([&](ServeArgs& a) { a.api_key_file = empty; }).find("holds no API key"),
            std::string::npos);
  std::remove(empty.c_str());
  ServeArgs a;
  a.model = "/nonexistent/model.gguf";
  a.http.port = 0;
  std::ostringstream err;
  const Status missing = RunServe(a, err, &stop);
  EXPECT_FALSE(missing.ok());
  EXPECT_NE(missing.ToString().find("/nonexistent/model.gguf"), std::string::npos)
      << missing.ToString();
}

// A file without tokenizer.chat_template: Kimi-K2 (a deepseek2 architecture) is told apart by
// its pre-tokenizer, and would otherwise get DeepSeek-V3's template.
TEST(ServeFallbackTemplate, ByPreTokenizerThenArchitecture) {
  EXPECT_STREQ(FallbackChatTemplate(ModelArch::kDeepseek2, "kimi-k2"), "kimi-k2");
  EXPECT_STREQ(FallbackChatTemplate(ModelArch::kDeepseek2, "deepseek-v3"), "deepseek3");
  EXPECT_STREQ(FallbackChatTemplate(ModelArch::kQwen3Moe, "qwen2"), "qwen3");
  EXPECT_STREQ(FallbackChatTemplate(ModelArch::kLlama, "llama-bpe"), "chatml");
}

class ServeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    MOESPLIT_REQUIRE_TESTDATA();
    ServeArgs a;
    a.model = testing::TestDataPath("models/ds-tiny-Q4_K_M.gguf");
    a.chat_template = "deepseek3";
    a.ctx_size = 256;
    a.n_parallel = 2;
    a.threads = 2;
    a.http.port = 0;
    a.http.api_key = "sekrit";
    a.http.metrics = true;
    a.http.max_body_bytes = 4096;
    Adjust(a);
    std::promise<int> port;
    server_ = std::thread([this, a, &port] {
      const Status s = RunServe(a, log_, &stop_, [&port](int p) { port.set_value(p); });
      EXPECT_TRUE(s.ok()) << s.ToString();
    });
    port_ = port.get_future().get();
    client_ = std::make_unique<httplib::Client>("127.0.0.1", port_);
    client_->set_bearer_token_auth("sekrit");
    for (int i = 0; i < 200; ++i) {  // until the model is loaded
      auto r = client_->Get("/health");
      if (r && r->status == 200) return;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    FAIL() << "the server did not become ready:\n" << log_.str();
  }
  virtual void Adjust(ServeArgs&) {}  // a fixture's own flags
  void TearDown() override {
    stop_ = true;
    if (server_.joinable()) server_.join();
  }
  json Metrics() {
    auto r = client_->Get("/metrics");
    EXPECT_TRUE(r && r->status == 200);
    json m = json::object();
    std::istringstream in(r ? r->body : "");
    for (std::string line; std::getline(in, line);) {
      if (line.empty() || line[0] == '#') continue;
      const size_t sp = line.find(' ');
      m[line.substr(9, sp - 9)] = std::stod(line.substr(sp + 1));  // after "moesplit:"
    }
    return m;
  }
  std::atomic<bool> stop_{false};
  std::ostringstream log_;
  std::thread server_;
  int port_ = 0;
  std::unique_ptr<httplib::Client> client_;
};

TEST_F(ServeTest, ErrorsClientsCanCause) {
  httplib::Client anon("127.0.0.1", port_);
  EXPECT_EQ(anon.Get("/health")->status, 200);  // no key needed
  auto r = anon.Get("/v1/models");
  EXPECT_EQ(r->status, 401);
  EXPECT_EQ(json::parse(r->body)["error"]["type"], "authentication_error");
  httplib::Client wrong("127.0.0.1", port_);
  wrong.set_bearer_token_auth("sekrix");
  EXPECT_EQ(wrong.Get("/v1/models")->status, 401);

  r = client_->Post("/v1/chat/completions", std::string(5000, ' '), "application/json");
  EXPECT_EQ(r->status, 413);
  EXPECT_EQ(json::parse(r->body)["error"]["code"], 413);
  EXPECT_NE(json::parse(r->body)["error"]["message"].get<std::string>().find("4096 bytes"),
            std::string::npos);
  // curl -d sends JSON as a form: read as JSON all the same (a body of 3 KB).
  r = client_->Post("/v1/completions",
                    json{{"prompt", std::string(3000, 'a')}, {"max_tokens", 1}}.dump(),
                    "application/x-www-form-urlencoded");
  EXPECT_EQ(r->status, 400);  // the prompt's 3000 tokens exceed the context of 256, named
  EXPECT_NE(r->body.find("context holds 256"), std::string::npos) << r->body;
  r = client_->Post("/v1/chat/completions", "{\"messages\": [", "application/json");
  EXPECT_EQ(r->status, 400);
  EXPECT_NE(json::parse(r->body)["error"]["message"].get<std::string>().find("JSON"),
            std::string::npos);
  r = client_->Get("/v2/nothing");
  EXPECT_EQ(r->status, 404);
  EXPECT_EQ(json::parse(r->body)["error"]["type"], "not_found_error");
  // A prompt longer than the context (256): 400 naming the limit.
  std::string words;
  for (int i = 0; i < 400; ++i) words += "word ";
  r = client_->Post("/v1/completions", json{{"prompt", words}, {"max_tokens", 4}}.dump(),
                    "application/json");
  EXPECT_EQ(r->status, 400);
  const json e = json::parse(r->body)["error"];
  EXPECT_EQ(e["param"], "prompt");
  EXPECT_NE(e["message"].get<std::string>().find("context holds 256"), std::string::npos) << e;
  EXPECT_EQ(client_->Get("/health")->status, 200);  // still serving
}

TEST_F(ServeTest, EndpointsBesideCompletions) {
  auto r = client_->Get("/v1/models");
  ASSERT_EQ(r->status, 200);
  EXPECT_EQ(json::parse(r->body)["data"][0]["id"], "ds-tiny-Q4_K_M");
  r = client_->Post("/tokenize", R"({"content": "hello world"})", "application/json");
  ASSERT_EQ(r->status, 200);
  const json tokens = json::parse(r->body)["tokens"];
  EXPECT_FALSE(tokens.empty());
  r = client_->Post("/detokenize", json{{"tokens", tokens}}.dump(), "application/json");
  ASSERT_EQ(r->status, 200);
  EXPECT_EQ(json::parse(r->body)["content"], "hello world");
  EXPECT_EQ(client_->Post("/detokenize", R"({"tokens": [-1]})", "application/json")->status, 400);
  r = client_->Get("/props");
  ASSERT_EQ(r->status, 200);
  EXPECT_EQ(json::parse(r->body)["total_slots"], 2);
  EXPECT_EQ(json::parse(r->body)["default_generation_settings"]["n_ctx"], 256);
  r = client_->Get("/slots");
  ASSERT_EQ(r->status, 200);
  EXPECT_EQ(json::parse(r->body).size(), 2u);
  r = client_->Post("/v1/chat/completions",
                    R"({"messages": [{"role": "user", "content": "Hi"}], "max_tokens": 3,
                        "temperature": 0, "logprobs": true, "top_logprobs": 2})",
                    "application/json");
  ASSERT_EQ(r->status, 200) << r->body;
  const json c = json::parse(r->body);
  EXPECT_EQ(c["usage"]["completion_tokens"].get<int>() +
                    (c["choices"][0]["finish_reason"] == "stop" ? 1 : 0) >=
                1,
            true);
  EXPECT_EQ(c["choices"][0]["logprobs"]["content"].size(),
            c["usage"]["completion_tokens"].get<size_t>());
  const json m = Metrics();
  EXPECT_EQ(m["requests_processing"], 0);
  EXPECT_GE(m["tokens_predicted_total"].get<double>(), 1);
  EXPECT_EQ(m["kv_blocks_used"], 0);
  // The scheduler's learned step costs are there for an operator to read.
  EXPECT_GE(m["prompt_steps_total"].get<double>(), 1);
  for (const char* g : {"step_decode_ms", "step_prompt_token_ms", "latency_debt_ms"}) {
    EXPECT_TRUE(m.contains(g)) << g;
  }
}

// A client that reads two chunks of a long stream and leaves: its sequence stops and its
// blocks go back to the pool.
TEST_F(ServeTest, AStreamWhoseClientLeavesIsCancelled) {
  int chunks = 0;
  httplib::Request req;
  req.method = "POST";
  req.path = "/v1/completions";
  req.headers = {{"Authorization", "Bearer sekrit"}, {"Content-Type", "application/json"}};
  req.body = R"({"prompt": "Once upon a time", "max_tokens": 200, "stream": true,
                 "ignore_eos": true})";
  req.content_receiver = [&](const char*, size_t, uint64_t, uint64_t) { return ++chunks < 2; };
  auto res = client_->send(req);
  EXPECT_GE(chunks, 2);
  for (int i = 0; i < 100; ++i) {
    const json m = Metrics();
    if (m["requests_cancelled_total"] == 1 && m["requests_processing"] == 0) {
      EXPECT_EQ(m["kv_blocks_used"], 0);
      EXPECT_LT(m["tokens_predicted_total"].get<double>(), 200);
      return;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  FAIL() << "the stream's sequence was not cancelled: " << Metrics();
}

// DeepSeek-V3.1 with `--chat-template-kwargs '{"thinking": true}'`: a request's
// chat_template_kwargs override the server's per variable, and `thinking` wins over
// enable_thinking (as in the V3.1 template). The prompt ends in "<think>" (thinking) or
// "<think></think>" (not), so the prompt token counts tell which was rendered.
class ServeV31Test : public ServeTest {
 protected:
  void Adjust(ServeArgs& a) override {
    a.chat_template = "deepseek-v3.1";
    a.chat_template_kwargs = R"({"thinking": true})";
  }
  int PromptTokens(const std::string& kwargs) {
    const std::string body = R"({"messages": [{"role": "user", "content": "Hi"}], "max_tokens": 1,
                                 "temperature": 0)" +
                             (kwargs.empty() ? "" : ", \"chat_template_kwargs\": " + kwargs) + "}";
    auto r = client_->Post("/v1/chat/completions", body, "application/json");
    EXPECT_TRUE(r && r->status == 200) << (r ? r->body : "no response");
    if (!r || r->status != 200) return -1;
    return json::parse(r->body)["usage"]["prompt_tokens"].get<int>();
  }
};

TEST_F(ServeV31Test, ChatTemplateKwargsSwitchThinkingPerRequest) {
  EXPECT_NE(log_.str().find("deepseek-v3.1 (thinking on by default)"), std::string::npos)
      << log_.str();
  const int thinking = PromptTokens("");
  const int not_thinking = PromptTokens(R"({"thinking": false})");
  ASSERT_GT(thinking, 0);
  EXPECT_GT(not_thinking, thinking);  // "</think>" more
  // The server's thinking = true wins over a request's enable_thinking = false.
  EXPECT_EQ(PromptTokens(R"({"enable_thinking": false})"), thinking);
  EXPECT_EQ(PromptTokens(R"({"thinking": true, "unknown": [1]})"), thinking);
  auto r = client_->Post("/v1/chat/completions",
                         R"({"messages": [{"role": "user", "content": "Hi"}],
                             "chat_template_kwargs": {"thinking": "no"}})",
                         "application/json");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 400);
  EXPECT_EQ(json::parse(r->body)["error"]["param"], "chat_template_kwargs.thinking");
}

}  // namespace
}  // namespace moesplit::app
