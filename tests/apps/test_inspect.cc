// `moesplit inspect` end to end (in process): the facts of the llama.cpp-made oracle files, and
// clear errors — never a crash — on damaged files.
#include <gtest/gtest.h>

#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>

#include "apps/cmd_inspect.h"
#include "core/gguf/gguf_writer.h"
#include "tests/testdata.h"

namespace moesplit::app {
namespace {

using moesplit::testing::ReadFileBytes;
using moesplit::testing::ScratchDir;
using moesplit::testing::TestDataPath;

struct Result {
  int code;
  std::string out, err;
};

Result Inspect(InspectArgs args) {
  std::ostringstream out, err;
  int code = RunInspect(args, out, err);
  return {code, out.str(), err.str()};
}

Result InspectPath(const std::string& path, std::string format = "text") {
  InspectArgs a;
  a.path = path;
  a.format = std::move(format);
  return Inspect(a);
}

void WriteBytes(const std::string& path, const std::vector<uint8_t>& b, size_t n) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f.write(reinterpret_cast<const char*>(b.data()), static_cast<std::streamsize>(n));
}

TEST(Inspect, TinyDeepSeekFactsText) {
  MOESPLIT_REQUIRE_TESTDATA();
  Result r = InspectPath(TestDataPath("models/ds-tiny-Q4_K_M.gguf"));
  ASSERT_EQ(r.code, 0) << r.err;
  for (const char* fact :
       {"gguf version:  3",
        "architecture:  deepseek2",
        "name:          ds-tiny-synthetic",
        "file type:     Q4_K_M",
        "tensors:       70",
        "tokenizer:     gpt2 / deepseek-v3, 1024 tokens, 766 merges, BOS 0, EOS 1, add_bos true",
        "metadata keys: 41",
        "vocab size:    1024",
        "data offset 29280",
        "expert_count = 16",
        "expert_used_count = 4",
        "q4_K",
        "q5_0",
        "q8_0",
        "q6_K",
        "routed experts",
        "shared experts",
        "attention",
        "dense FFN",
        "embeddings",
        "norms",
        "4 of 16 experts x 3 MoE layers"}) {
    EXPECT_NE(r.out.find(fact), std::string::npos) << "missing '" << fact << "' in\n" << r.out;
  }
}

TEST(Inspect, TinyDeepSeekFactsJson) {
  MOESPLIT_REQUIRE_TESTDATA();
  InspectArgs a;
  a.path = TestDataPath("models/ds-tiny-Q4_K_M.gguf");
  a.format = "json";
  a.tensors = true;
  Result r = Inspect(a);
  ASSERT_EQ(r.code, 0) << r.err;
  auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["tensor_count"], 70);
  EXPECT_EQ(j["kv_count"], 41);
  EXPECT_EQ(j["data_offset"], 29280);
  EXPECT_EQ(j["file_bytes"], 4372256);
  EXPECT_EQ(j["bytes_by_type"]["f32"]["tensors"], 23);
  EXPECT_EQ(j["bytes_by_type"]["q4_K"]["tensors"], 24);
  EXPECT_EQ(j["bytes_by_type"]["q5_0"]["tensors"], 18);
  EXPECT_EQ(j["bytes_by_type"]["q8_0"]["tensors"], 4);
  EXPECT_EQ(j["bytes_by_type"]["q6_K"]["tensors"], 1);
  EXPECT_EQ(j["tensors"][0]["name"], "output.weight");
  EXPECT_EQ(j["metadata"]["deepseek2.expert_weights_scale"], 2.5);
  EXPECT_EQ(j["metadata"]["tokenizer.ggml.merges"]["len"], 766);
  // Role bytes add up to the tensor bytes.
  uint64_t sum = 0;
  for (auto& [role, c] : j["bytes_by_role"].items()) sum += c["bytes"].get<uint64_t>();
  EXPECT_EQ(sum, j["tensor_bytes"].get<uint64_t>());
  // 3 MoE layers x 3 matrices x 16 experts; a token reads 4 of 16.
  EXPECT_EQ(j["bytes_by_role"]["routed experts"]["tensors"], 9);
  EXPECT_EQ(j["decode_bytes_per_token"]["routed_experts"].get<uint64_t>() * 4,
            j["bytes_by_role"]["routed experts"]["bytes"].get<uint64_t>());
}

TEST(Inspect, TensorValues) {
  MOESPLIT_REQUIRE_TESTDATA();
  InspectArgs a;
  a.path = TestDataPath("models/ds-tiny-Q4_K_M.gguf");
  a.tensor = "blk.0.attn_norm.weight";
  a.values = 5;
  a.format = "json";
  Result r = Inspect(a);
  ASSERT_EQ(r.code, 0) << r.err;
  auto j = nlohmann::json::parse(r.out);
  ASSERT_EQ(j["values"]["data"].size(), 5u);
  for (auto& v : j["values"]["data"]) EXPECT_EQ(v.get<float>(), 1.0f);  // RMSNorm weights = 1
  a.tensor = "token_embd.weight";  // Q4_K: needs a whole 256-value block decoded
  a.values = 300;
  r = Inspect(a);
  ASSERT_EQ(r.code, 0) << r.err;
  j = nlohmann::json::parse(r.out);
  ASSERT_EQ(j["values"]["data"].size(), 300u);
  double sq = 0;
  for (auto& v : j["values"]["data"]) sq += v.get<double>() * v.get<double>();
  EXPECT_NEAR(std::sqrt(sq / 300), 0.02, 0.005);  // weights were drawn from normal(0, 0.02)
}

// Every type `inspect --values` decodes that the tiny model does not hold: a GGUF with one
// tensor per type made of ggml's own blocks (shared/testdata/quant/T.q, 8 rows x 2048 values);
// the printed values must be ggml's (T.deq.f32) bit for bit. A type with no dequantizer
// (tq1_0) gets a clear error.
TEST(Inspect, ValuesOfEveryDecodableOracleType) {
  MOESPLIT_REQUIRE_TESTDATA();
  const char* kTypes[] = {"iq2_xxs", "iq2_xs", "iq2_s",  "iq3_xxs", "iq3_s", "iq1_s",
                          "iq1_m",   "mxfp4",  "iq4_nl", "iq4_xs",  "q2_K",  "q3_K"};
  constexpr int64_t kCols = 2048, kRows = 8, kShown = 2100;  // crosses into row 2
  const std::string path = ScratchDir() + "/inspect-oracle-types.gguf";
  {
    gguf::GgufWriter w(path);
    w.AddKeyValue("general.architecture", gguf::Value::Str("llama"));
    for (const char* name : kTypes) w.AddTensor(name, TypeFromName(name).value(), {kCols, kRows});
    w.AddTensor("tq1_0", GgmlType::kTQ1_0, {256, 1});
    ASSERT_TRUE(w.Begin().ok());
    for (const char* name : kTypes) {
      const std::vector<uint8_t> q =
          ReadFileBytes(TestDataPath(std::string("quant/") + name + ".q"));
      ASSERT_TRUE(w.WriteTensorData(q.data(), q.size()).ok()) << name;
    }
    const std::vector<uint8_t> tq(RowBytes(GgmlType::kTQ1_0, 256), 0);
    ASSERT_TRUE(w.WriteTensorData(tq.data(), tq.size()).ok());
    ASSERT_TRUE(w.Finish().ok());
  }
  InspectArgs a;
  a.path = path;
  a.values = kShown;
  a.format = "json";
  for (const char* name : kTypes) {
    a.tensor = name;
    const Result r = Inspect(a);
    ASSERT_EQ(r.code, 0) << name << ": " << r.err;
    const nlohmann::json data = nlohmann::json::parse(r.out)["values"]["data"];
    ASSERT_EQ(data.size(), static_cast<size_t>(kShown)) << name;
    const std::vector<uint8_t> want =
        ReadFileBytes(TestDataPath(std::string("quant/") + name + ".deq.f32"));
    int mismatches = 0;
    for (int64_t i = 0; i < kShown; ++i) {
      const float got = data[i].get<float>();
      mismatches += std::memcmp(&got, want.data() + 4 * i, 4) != 0;
    }
    EXPECT_EQ(mismatches, 0) << name;
  }
  a.tensor = "tq1_0";
  a.values = 4;
  const Result r = Inspect(a);
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("type tq1_0, which this build cannot dequantize"), std::string::npos)
      << r.err;
}

TEST(Inspect, VocabOnlyFiles) {
  MOESPLIT_REQUIRE_TESTDATA();
  struct Case {
    const char* file;
    const char* arch;
    const char* vocab;
    const char* tokenizer;
    const char* kv_count;
  };
  // The facts of shared/testdata/README.md's vocab table.
  for (Case c : {Case{"ggml-vocab-deepseek-llm.gguf", "llama", "102400",
                      "gpt2 / deepseek-llm, 102400 tokens, 99757 merges, BOS 100000, EOS 100001, "
                      "add_bos true",
                      "23"},
                 Case{"ggml-vocab-deepseek-coder.gguf", "llama", "32256",
                      "gpt2 / deepseek-coder, 32256 tokens, 31757 merges, BOS 32013, EOS 32014, "
                      "add_bos true",
                      "25"},
                 Case{"ggml-vocab-gpt-2.gguf", "gpt2", "50257",
                      "gpt2 / gpt-2, 50257 tokens, 50000 merges, BOS 50256, EOS 50256\n", "16"},
                 Case{"ggml-vocab-llama-spm.gguf", "llama", "32000",
                      "llama / default, 32000 tokens, BOS 1, EOS 2, add_bos true", "22"}}) {
    Result r = InspectPath(TestDataPath(std::string("vocab/") + c.file));
    ASSERT_EQ(r.code, 0) << c.file << ": " << r.err;
    EXPECT_NE(r.out.find(std::string("architecture:  ") + c.arch), std::string::npos) << r.out;
    EXPECT_NE(r.out.find(std::string("vocab size:    ") + c.vocab), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("tensors:       0"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find(std::string("tokenizer:     ") + c.tokenizer), std::string::npos) << r.out;
    EXPECT_NE(r.out.find(std::string("metadata keys: ") + c.kv_count + "\n"), std::string::npos)
        << r.out;
    EXPECT_NE(r.out.find("gguf version:  3"), std::string::npos) << r.out;
  }
}

TEST(Inspect, UserErrors) {
  MOESPLIT_REQUIRE_TESTDATA();
  Result r = InspectPath("/nonexistent/model.gguf");
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("/nonexistent/model.gguf"), std::string::npos) << r.err;
  InspectArgs a;
  a.path = TestDataPath("models/ds-tiny-Q4_K_M.gguf");
  a.tensor = "no.such.tensor";
  r = Inspect(a);
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("no tensor named 'no.such.tensor'"), std::string::npos) << r.err;
  a.tensor = "";
  a.format = "yaml";
  r = Inspect(a);
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("--format"), std::string::npos) << r.err;
}

// Truncations at many offsets and random byte flips in the header and tensor-info region:
// every run must return (0 or 1) with a message on error — a crash fails the whole test binary.
TEST(Inspect, DamagedFilesNeverCrash) {
  MOESPLIT_REQUIRE_TESTDATA();
  const std::vector<uint8_t> good = ReadFileBytes(TestDataPath("models/ds-tiny-Q4_K_M.gguf"));
  ASSERT_EQ(good.size(), 4372256u);
  const std::string path = ScratchDir() + "/damaged.gguf";
  int errors = 0;
  for (size_t n : {size_t{0}, size_t{3}, size_t{4}, size_t{8}, size_t{23}, size_t{24}, size_t{1000},
                   size_t{29279}, size_t{29280}, size_t{2000000}, good.size() - 1}) {
    WriteBytes(path, good, n);
    Result r = InspectPath(path);
    EXPECT_EQ(r.code, 1) << "truncated at " << n << " bytes was accepted";
    EXPECT_NE(r.err.find("damaged.gguf"), std::string::npos) << r.err;
    errors += r.code;
  }
  std::mt19937 rng(42);
  for (int i = 0; i < 300; ++i) {
    std::vector<uint8_t> bad = good;
    const size_t pos = rng() % 29280;  // header, metadata and tensor infos
    bad[pos] ^= static_cast<uint8_t>(1u << (rng() % 8));
    WriteBytes(path, bad, bad.size());
    Result r = InspectPath(path, i % 2 ? "json" : "text");
    ASSERT_TRUE(r.code == 0 || r.code == 1);
    if (r.code) {
      EXPECT_FALSE(r.err.empty());
    }
  }
  EXPECT_GT(errors, 0);
}

}  // namespace
}  // namespace moesplit::app
