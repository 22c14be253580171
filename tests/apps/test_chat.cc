// `moesplit chat` driven through its input stream (in process).
#include <gtest/gtest.h>

#include <atomic>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "apps/cmd_chat.h"
#include "apps/generation.h"
#include "core/engine/engine.h"
#include "tests/testdata.h"

namespace moesplit::app {
namespace {

ChatArgs TinyChat() {
  ChatArgs a;
  a.model = testing::TestDataPath("models/ds-tiny-Q4_K_M.gguf");
  a.chat_template = "deepseek3";  // the llama.cpp-made tiny model carries no template
  a.n_predict = 6;
  a.ctx_size = 256;
  a.threads = 2;
  a.interactive = false;
  a.sampling.seed = 5;
  return a;
}

int CountLines(const std::string& s) {
  return static_cast<int>(std::count(s.begin(), s.end(), '\n'));
}

TEST(ChatCommand, TwoTurnsAndReset) {
  MOESPLIT_REQUIRE_TESTDATA();
  std::istringstream in("Hello\n\nWhat is an expert?\n/reset\nAgain\n/exit\nnot read\n");
  std::ostringstream out, err;
  std::atomic<bool> stop{false};
  Status s = RunChat(TinyChat(), in, out, err, &stop);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(CountLines(out.str()), 3) << out.str();  // three answers; the empty line is skipped
  EXPECT_NE(err.str().find("template deepseek3"), std::string::npos) << err.str();
  // Each answer reports its prompt evaluation; the second turn reuses the cached first turn
  // or re-evaluates it, but never fails.
  size_t n = 0;
  for (size_t p = err.str().find("prompt eval"); p != std::string::npos;
       p = err.str().find("prompt eval", p + 1)) {
    ++n;
  }
  EXPECT_EQ(n, 3u);
}

TEST(ChatCommand, StopFlagIsClearedPerTurn) {
  MOESPLIT_REQUIRE_TESTDATA();
  std::istringstream in("Hello\n");
  std::ostringstream out, err;
  std::atomic<bool> stop{true};  // a Ctrl-C left over from before the turn
  ChatArgs a = TinyChat();
  ASSERT_TRUE(RunChat(a, in, out, err, &stop).ok());
  EXPECT_EQ(out.str().find("[stopped]"), std::string::npos);  // the flag is cleared per turn
}

// Ctrl-C at a chosen moment of a turn, with no thread and no timing. RunChat clears the flag
// before it reads the user's line, so these set it while the first line is read (FlagWhileRead)
// or when the answer's first text is written (FlagOnWrite).
class FlagWhileRead : public std::streambuf {
 public:
  FlagWhileRead(std::string text, std::atomic<bool>* flag) : text_(std::move(text)), flag_(flag) {}

 protected:
  int_type underflow() override {  // one character at a time: every read comes here
    if (pos_ >= text_.size()) return traits_type::eof();
    if (!first_line_read_) flag_->store(true);
    ch_ = text_[pos_++];
    if (ch_ == '\n') first_line_read_ = true;
    setg(&ch_, &ch_, &ch_ + 1);
    return traits_type::to_int_type(ch_);
  }

 private:
  std::string text_;
  size_t pos_ = 0;
  char ch_ = 0;
  bool first_line_read_ = false;
  std::atomic<bool>* flag_;
};

class FlagOnWrite : public std::stringbuf {
 public:
  explicit FlagOnWrite(std::atomic<bool>* flag) : flag_(flag) {}

 protected:
  std::streamsize xsputn(const char* s, std::streamsize n) override {
    flag_->store(true);
    return std::stringbuf::xsputn(s, n);
  }
  int_type overflow(int_type c) override {
    flag_->store(true);
    return std::stringbuf::overflow(c);
  }

 private:
  std::atomic<bool>* flag_;
};

TEST(ChatCommand, CtrlCDuringTheAnswerStopsIt) {
  MOESPLIT_REQUIRE_TESTDATA();
  std::atomic<bool> stop{false};
  std::istringstream in("Hello\n");
  FlagOnWrite out_buf(&stop);  // the first piece of the answer presses Ctrl-C
  std::ostream out(&out_buf);
  std::ostringstream err;
  ChatArgs a = TinyChat();
  a.n_predict = 32;
  a.sampling.temperature = 0;
  ASSERT_TRUE(RunChat(a, in, out, err, &stop).ok());
  const std::string text = out_buf.str();
  EXPECT_NE(text.find(" [stopped]\n"), std::string::npos) << text;
  EXPECT_EQ(err.str().find("generation: 32 tokens"), std::string::npos) << err.str();
}

TEST(ChatCommand, CtrlCDuringALongPromptStopsItBetweenChunks) {
  MOESPLIT_REQUIRE_TESTDATA();
  std::atomic<bool> stop{false};
  std::string line;
  for (int i = 0; i < 12; ++i) line += "experts ";
  // Ctrl-C while the line is read: the prompt has not started when the flag is set.
  FlagWhileRead in_buf(line + "\nHello\n", &stop);
  std::istream in(&in_buf);
  std::ostringstream out, err;
  ChatArgs a = TinyChat();
  a.prompt_chunk = 8;
  ASSERT_TRUE(RunChat(a, in, out, err, &stop).ok());
  // The first turn read none of its prompt (before: all of it, then stopped at the first
  // token); the second turn, with the flag cleared, evaluates both and answers.
  EXPECT_EQ(out.str().find("[stopped] (in the prompt: 0 of "), 0u) << out.str();
  EXPECT_NE(err.str().find("prompt eval: 0 tokens"), std::string::npos) << err.str();
  EXPECT_EQ(CountLines(out.str()), 2) << out.str();
}

// Generate itself: a stop between prompt chunks leaves the session after the chunks read.
TEST(Generate, StopBetweenPromptChunks) {
  MOESPLIT_REQUIRE_TESTDATA();
  auto model = engine::Model::Load(TinyChat().model).value();
  engine::Session session(*model, {.ctx_size = 128, .n_threads = 2});
  auto tok = tokenizer::Tokenizer::FromGguf(model->file()).value();
  auto sampler = sampling::Sampler::Create({}).value();
  std::vector<int32_t> prompt(100);
  for (size_t i = 0; i < prompt.size(); ++i) prompt[i] = static_cast<int32_t>(10 + i % 50);
  std::atomic<bool> stop{false};
  GenerationRequest req;
  req.prompt = prompt;
  req.max_tokens = 4;
  req.stop = &stop;
  req.prompt_chunk = 32;
  std::vector<int64_t> progress;
  req.on_prompt_progress = [&](int64_t done, int64_t total) {
    EXPECT_EQ(total, 100);
    progress.push_back(done);
    if (done >= 64) stop.store(true);  // Ctrl-C during the second chunk
  };
  GenerationStats st = Generate(session, tok, sampler, req).value();
  EXPECT_TRUE(st.stopped_by_user);
  EXPECT_TRUE(st.stopped_in_prompt);
  EXPECT_EQ(st.prompt_tokens, 64);
  EXPECT_EQ(st.generated_tokens, 0);
  EXPECT_EQ(session.position(), 64);
  EXPECT_EQ(progress, (std::vector<int64_t>{32, 64}));

  // Without a stop: every chunk, then the answer; a prompt that cannot fit reads nothing.
  stop.store(false);
  req.on_prompt_progress = nullptr;
  session.Reset();
  st = Generate(session, tok, sampler, req).value();
  EXPECT_FALSE(st.stopped_by_user);
  EXPECT_EQ(st.prompt_tokens, 100);
  const int64_t pos = session.position();
  EXPECT_GE(pos, 100);
  StatusOr<GenerationStats> too_long = Generate(session, tok, sampler, req);
  EXPECT_EQ(too_long.status().code(), StatusCode::kOutOfRange) << too_long.status().ToString();
  EXPECT_EQ(session.position(), pos);
}

TEST(ChatCommand, TemplateErrors) {
  MOESPLIT_REQUIRE_TESTDATA();
  std::istringstream in("Hello\n");
  std::ostringstream out, err;
  ChatArgs a = TinyChat();
  a.chat_template.clear();
  Status s = RunChat(a, in, out, err, nullptr);
  EXPECT_NE(s.message().find("no tokenizer.chat_template; pass --chat-template"), std::string::npos)
      << s.ToString();
  a.chat_template = "no-such-template";
  s = RunChat(a, in, out, err, nullptr);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("no-such-template"), std::string::npos) << s.ToString();
}

// --reasoning and --chat-template-kwargs as llama-server's flags: the template variables they
// set (the JSON's keys over --reasoning), and the refusals naming the flag.
TEST(ChatCommand, ReasoningFlags) {
  auto kw = TemplateKwargsFromFlags("auto", "");
  ASSERT_TRUE(kw.ok());
  EXPECT_FALSE(kw->thinking || kw->enable_thinking);
  kw = TemplateKwargsFromFlags("off", R"({"thinking": true})");
  ASSERT_TRUE(kw.ok());
  EXPECT_EQ(kw->enable_thinking, std::optional<bool>(false));
  EXPECT_EQ(kw->thinking, std::optional<bool>(true));
  kw = TemplateKwargsFromFlags("on", R"({"enable_thinking": false})");
  EXPECT_EQ(kw->enable_thinking, std::optional<bool>(false));
  EXPECT_NE(TemplateKwargsFromFlags("yes", "").status().message().find("--reasoning"),
            std::string::npos);
  EXPECT_NE(TemplateKwargsFromFlags("auto", "[1]").status().message().find("must be an object"),
            std::string::npos);
  EXPECT_NE(TemplateKwargsFromFlags("auto", "{").status().message().find("not valid JSON"),
            std::string::npos);
}

TEST(ChatCommand, ReasoningFlagReachesTheTemplate) {
  MOESPLIT_REQUIRE_TESTDATA();
  for (const char* mode : {"on", "off"}) {
    std::istringstream in("Hello\n");
    std::ostringstream out, err;
    ChatArgs a = TinyChat();
    a.chat_template = "deepseek-v3.1";
    a.n_predict = 1;
    a.reasoning = mode;
    ASSERT_TRUE(RunChat(a, in, out, err, nullptr).ok());
    EXPECT_NE(err.str().find(std::string("deepseek-v3.1 (thinking ") + mode + ")"),
              std::string::npos)
        << err.str();
  }
}

}  // namespace
}  // namespace moesplit::app
