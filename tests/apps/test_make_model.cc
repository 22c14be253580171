// The make-model command: argument errors, --force, --list, summary.
#include <gtest/gtest.h>

#include <sstream>
#include <string>

#include "apps/cmd_make_model.h"
#include "core/synth/model_spec.h"
#include "tests/testdata.h"

namespace moesplit::app {
namespace {

MakeModelArgs Args(const std::string& preset, const std::string& out) {
  MakeModelArgs a;
  a.preset = preset;
  a.output = out;
  return a;
}

TEST(MakeModelCmd, WritesAndRefusesToOverwrite) {
  const std::string path = testing::ScratchDir() + "/cmd-ds-tiny.gguf";
  std::remove(path.c_str());
  std::ostringstream out;
  Status s = RunMakeModel(Args("ds-tiny", path), out);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_NE(out.str().find("70 tensors"), std::string::npos) << out.str();
  s = RunMakeModel(Args("ds-tiny", path), out);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("--force"), std::string::npos);
  MakeModelArgs force = Args("ds-tiny", path);
  force.force = true;
  EXPECT_TRUE(RunMakeModel(force, out).ok());
}

// --quant takes the UD-IQ mix names (case-insensitive) and writes the file.
TEST(MakeModelCmd, WritesUdIqMix) {
  const std::string path = testing::ScratchDir() + "/cmd-ds-tiny-ud-iq1_s.gguf";
  std::remove(path.c_str());
  MakeModelArgs a = Args("ds-tiny", path);
  a.quant = "ud-iq1_s";
  std::ostringstream out;
  const Status s = RunMakeModel(a, out);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_NE(out.str().find("UD-IQ1_S"), std::string::npos) << out.str();
}

TEST(MakeModelCmd, BadArguments) {
  std::ostringstream out;
  const std::string path = testing::ScratchDir() + "/cmd-bad.gguf";
  EXPECT_EQ(RunMakeModel(Args("nope", path), out).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(RunMakeModel(Args("", path), out).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(RunMakeModel(Args("ds-tiny", ""), out).code(), StatusCode::kInvalidArgument);
  MakeModelArgs a = Args("ds-tiny", path);
  a.quant = "IQ2_XXS";
  EXPECT_EQ(RunMakeModel(a, out).code(), StatusCode::kInvalidArgument);
  a = Args("ds-tiny", path);
  a.layers = -3;
  EXPECT_EQ(RunMakeModel(a, out).code(), StatusCode::kInvalidArgument);
  a = Args("ds-tiny", path);
  a.mla_layout = "fused";
  EXPECT_EQ(RunMakeModel(a, out).code(), StatusCode::kInvalidArgument);
  EXPECT_FALSE(RunMakeModel(Args("ds-tiny", "/nonexistent-dir/x.gguf"), out).ok());
}

TEST(MakeModelCmd, ListShowsEveryPreset) {
  MakeModelArgs a;
  a.list = true;
  std::ostringstream out;
  ASSERT_TRUE(RunMakeModel(a, out).ok());
  for (const char* p :
       {"ds-tiny", "ds-v2-lite", "ds-v3", "kimi-k2", "qwen3moe-tiny", "mixtral-tiny"}) {
    EXPECT_NE(out.str().find(p), std::string::npos) << p;
  }
  // Every --quant mix is named, with the names QuantMixFromName takes back.
  const std::string text = out.str();
  const size_t mixes = text.find("--quant mixes: ");
  ASSERT_NE(mixes, std::string::npos) << text;
  for (const char* m : {"Q4_K_M", "Q8_0", "IQ4_XS", "Q3_K_M", "UD-Q2_K_XL", "UD-IQ2_XXS",
                        "UD-IQ1_S", "UD-IQ1_M"}) {
    EXPECT_NE(text.find(m, mixes), std::string::npos) << m;
    EXPECT_TRUE(synth::QuantMixFromName(m).ok()) << m;
  }
}

}  // namespace
}  // namespace moesplit::app
