// The fuzz seed corpus (tests/fuzz/corpus): small valid GGUFs made with GgufWriter. The committed
// files are checked here; regenerate them with
//   test_gguf --gtest_also_run_disabled_tests --gtest_filter=GgufCorpus.DISABLED_Regenerate
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "core/gguf/gguf_writer.h"
#include "tests/testdata.h"

namespace moesplit::gguf {
namespace {

namespace fs = std::filesystem;

std::string CorpusDir() { return std::string(MOESPLIT_SOURCE_DIR) + "/tests/fuzz/corpus"; }

void Fill(std::vector<uint8_t>* v, uint8_t seed) {
  for (size_t i = 0; i < v->size(); ++i) (*v)[i] = static_cast<uint8_t>(seed * 31 + i * 7);
}

// Declares `tensors` (name, type, ne), writes pattern bytes, finishes.
Status WriteSmall(GgufWriter* w,
                  const std::vector<std::tuple<std::string, GgmlType, std::vector<int64_t>>>& ts) {
  for (const auto& [name, type, ne] : ts) w->AddTensor(name, type, ne);
  MOESPLIT_RETURN_IF_ERROR(w->Begin());
  uint8_t seed = 1;
  for (const TensorInfo& t : w->tensors()) {
    std::vector<uint8_t> b(t.nbytes);
    Fill(&b, seed++);
    MOESPLIT_RETURN_IF_ERROR(w->WriteTensorData(b.data(), b.size()));
  }
  return w->Finish();
}

TEST(GgufCorpus, DISABLED_Regenerate) {
  const std::string d = CorpusDir();
  fs::create_directories(d);
  {
    GgufWriter w(d + "/tensors.gguf");
    w.AddKeyValue("general.architecture", Value::Str("deepseek2"));
    w.AddKeyValue("deepseek2.block_count", Value::U32(1));
    w.AddKeyValue("deepseek2.expert_weights_scale", Value::F32(2.5f));
    ASSERT_TRUE(WriteSmall(&w, {{"a.weight", GgmlType::kF32, {4, 2}},
                                {"b.weight", GgmlType::kQ8_0, {32, 2}},
                                {"c.weight", GgmlType::kQ4_K, {256, 1, 1}},
                                {"d.weight", GgmlType::kQ5_0, {32, 2, 2, 1}}})
                    .ok());
  }
  {
    GgufWriter w(d + "/nested.gguf", 64);
    Array inner{ValueType::kArray, {Value::I32Array({1, -2}), Value::I32Array({})}};
    w.AddKeyValue("x.nested", Value::Arr(Array{ValueType::kArray, {Value::Arr(inner)}}));
    w.AddKeyValue("x.strs", Value::StrArray({"a", "", "b c"}));
    w.AddKeyValue("x.u8", Value::U8(7));
    w.AddKeyValue("x.i8", Value::I8(-7));
    w.AddKeyValue("x.u16", Value::U16(700));
    w.AddKeyValue("x.i16", Value::I16(-700));
    w.AddKeyValue("x.i64", Value::I64(-1));
    w.AddKeyValue("x.u64", Value::U64(1ull << 40));
    w.AddKeyValue("x.f64", Value::F64(0.5));
    w.AddKeyValue("x.bool", Value::Bool(false));
    ASSERT_TRUE(WriteSmall(&w, {{"t", GgmlType::kF16, {8}}}).ok());
  }
  {
    GgufWriter w(d + "/vocab.gguf");
    std::vector<std::string> toks;
    std::vector<float> scores;
    std::vector<int32_t> types;
    for (int i = 0; i < 40; ++i) {
      toks.push_back(std::string(1, static_cast<char>('a' + i % 26)) + std::to_string(i));
      scores.push_back(-0.25f * i);
      types.push_back(i < 2 ? 3 : 1);
    }
    w.AddKeyValue("general.architecture", Value::Str("llama"));
    w.AddKeyValue("tokenizer.ggml.model", Value::Str("gpt2"));
    w.AddKeyValue("tokenizer.ggml.tokens", Value::StrArray(toks));
    w.AddKeyValue("tokenizer.ggml.scores", Value::F32Array(scores));
    w.AddKeyValue("tokenizer.ggml.token_type", Value::I32Array(types));
    w.AddKeyValue("tokenizer.ggml.merges", Value::StrArray({"a b", "ab c"}));
    w.AddKeyValue("tokenizer.ggml.bos_token_id", Value::U32(0));
    ASSERT_TRUE(w.Begin().ok());
    ASSERT_TRUE(w.Finish().ok());
  }
  {
    auto f = GgufFile::Open(d + "/tensors.gguf");
    ASSERT_TRUE(f.ok()) << f.status().ToString();
    ASSERT_TRUE(WriteSplit(**f, d + "/split", 2).ok());
  }
  {
    // Version 2 has the same layout as 3 (v3 only allowed big-endian files): patch byte 4.
    std::vector<uint8_t> b = ::moesplit::testing::ReadFileBytes(d + "/tensors.gguf");
    b[4] = 2;
    std::ofstream(d + "/tensors-v2.gguf", std::ios::binary)
        .write(reinterpret_cast<const char*>(b.data()), static_cast<std::streamsize>(b.size()));
  }
}

TEST(GgufCorpus, CommittedFilesAreSmallAndValid) {
  int n = 0;
  for (const auto& e : fs::directory_iterator(CorpusDir())) {
    SCOPED_TRACE(e.path().string());
    EXPECT_LT(e.file_size(), 8192u);
    const std::vector<uint8_t> b = ::moesplit::testing::ReadFileBytes(e.path().string());
    StatusOr<ParsedGguf> r = ParseGguf(b.data(), b.size(), e.path().string());
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    ++n;
  }
  EXPECT_GE(n, 5);
}

}  // namespace
}  // namespace moesplit::gguf
