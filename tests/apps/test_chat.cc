// `moesplit chat` driven through its input stream (in process).
#include <gtest/gtest.h>

#include <sstream>

#include "apps/cmd_chat.h"
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

TEST(ChatCommand, StopFlagEndsTheAnswer) {
  MOESPLIT_REQUIRE_TESTDATA();
  std::istringstream in("Hello\n");
  std::ostringstream out, err;
  std::atomic<bool> stop{true};  // as if Ctrl-C came before the first token; reset per turn
  ChatArgs a = TinyChat();
  ASSERT_TRUE(RunChat(a, in, out, err, &stop).ok());
  EXPECT_EQ(out.str().find("[stopped]"), std::string::npos);  // the flag is cleared per turn
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

}  // namespace
}  // namespace moesplit::app
