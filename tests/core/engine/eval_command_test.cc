// `moesplit eval` in-process: the logits file equals the engine's output in both modes, and user
// errors (bad token list, ids outside the vocabulary, more tokens than --ctx-size) are Statuses.
#include <gtest/gtest.h>

#include <cstring>
#include <sstream>

#include "apps/cmd_eval.h"
#include "apps/gpu_placement.h"
#include "core/engine/engine.h"
#include "tests/testdata.h"

namespace moesplit::app {
namespace {

std::string Model() { return testing::TestDataPath("models/ds-tiny-Q4_K_M.gguf"); }

TEST(EvalCommandTest, ParseTokenList) {
  EXPECT_EQ(ParseTokenList("1,2, 3").value(), (std::vector<int32_t>{1, 2, 3}));
  EXPECT_EQ(ParseTokenList("7").value(), (std::vector<int32_t>{7}));
  EXPECT_FALSE(ParseTokenList("").ok());
  EXPECT_FALSE(ParseTokenList("1,,2").ok());
  EXPECT_FALSE(ParseTokenList("1,x").ok());
  EXPECT_FALSE(ParseTokenList("1,2,").ok());
  EXPECT_NE(ParseTokenList("1,x").status().message().find("'x'"), std::string::npos);
}

TEST(EvalCommandTest, WritesLogitsOfBothModes) {
  MOESPLIT_REQUIRE_TESTDATA();
  const std::vector<int32_t> tokens = {0, 79, 113, 71};
  auto model = engine::Model::Load(Model()).value();
  engine::Session s(*model, {.ctx_size = 16, .n_threads = 2});
  const std::vector<float> expect = s.Eval(tokens, true).value();
  for (bool decode : {false, true}) {
    EvalArgs args;
    args.model = Model();
    args.tokens = "0,79,113,71";
    args.logits_out = testing::ScratchDir() + "/eval-logits.f32";
    args.decode = decode;
    args.threads = 2;
    std::ostringstream out;
    ASSERT_TRUE(RunEval(args, out).ok());
    EXPECT_NE(out.str().find("evaluated 4 tokens"), std::string::npos) << out.str();
    EXPECT_NE(out.str().find("KV cache"), std::string::npos);
    const std::vector<uint8_t> bytes = testing::ReadFileBytes(args.logits_out);
    ASSERT_EQ(bytes.size(), 4u * 1024u * 4u);
    std::vector<float> got(4 * 1024);
    std::memcpy(got.data(), bytes.data(), bytes.size());
    for (size_t i = 0; i < got.size(); ++i) ASSERT_NEAR(got[i], expect[i], 1e-4) << i;
  }
}

TEST(EvalCommandTest, UserErrors) {
  MOESPLIT_REQUIRE_TESTDATA();
  EvalArgs args;
  args.model = Model();
  args.threads = 1;
  std::ostringstream out;
  args.tokens = "0,5000";
  Status s = RunEval(args, out);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("5000"), std::string::npos) << s.message();
  args.tokens = "0,1,2,3";
  args.ctx_size = 3;
  s = RunEval(args, out);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("ctx-size"), std::string::npos) << s.message();
  args.ctx_size = 0;
  args.kv_type = "q8";
  EXPECT_EQ(RunEval(args, out).code(), StatusCode::kInvalidArgument);
  args.kv_type = "f32";
  args.device = "tpu";
  s = RunEval(args, out);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("cpu | cuda | auto"), std::string::npos) << s.message();
  args.model = "/nonexistent.gguf";
  EXPECT_FALSE(RunEval(args, out).ok());
}

// --device: auto prints where the pass runs; cuda without a visible device is an error that
// says why (this machine: no GPU; with one the hybrid pass runs, docs/GPU.md).
TEST(EvalCommandTest, DeviceFlag) {
  MOESPLIT_REQUIRE_TESTDATA();
  EvalArgs args;
  args.model = Model();
  args.tokens = "0,79";
  args.threads = 1;
  std::ostringstream out;
  args.device = "cpu";
  ASSERT_TRUE(RunEval(args, out).ok());
  EXPECT_NE(out.str().find("device: cpu (--device cpu)"), std::string::npos) << out.str();
  const std::string reason = NoGpuReason(nullptr);
  if (!reason.empty()) {
    args.device = "cuda";
    const Status s = RunEval(args, out);
    EXPECT_EQ(s.code(), StatusCode::kFailedPrecondition);
    EXPECT_NE(s.message().find(reason), std::string::npos) << s.message();
  }
}

}  // namespace
}  // namespace moesplit::app
