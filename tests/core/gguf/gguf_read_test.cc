// Reads the llama.cpp-made oracle files and checks the facts listed in shared/testdata/README.md.
#include <gtest/gtest.h>

#include <cstring>
#include <map>

#include "core/gguf/gguf_file.h"
#include "tests/testdata.h"

namespace moesplit::gguf {
namespace {

using ::moesplit::testing::ReadFileBytes;
using ::moesplit::testing::TestDataPath;

std::unique_ptr<GgufFile> OpenOrDie(const std::string& path) {
  auto f = GgufFile::Open(path);
  EXPECT_TRUE(f.ok()) << f.status().ToString();
  return f.ok() ? std::move(*f) : nullptr;
}

TEST(GgufRead, DsTinyHeaderFacts) {
  MOESPLIT_REQUIRE_TESTDATA();
  auto f = OpenOrDie(TestDataPath("models/ds-tiny-Q4_K_M.gguf"));
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(f->version(), 3u);
  EXPECT_EQ(f->tensors().size(), 70u);
  EXPECT_EQ(f->metadata().size(), 41u);
  ASSERT_EQ(f->shards().size(), 1u);
  EXPECT_EQ(f->shards()[0].alignment, 32u);
  EXPECT_EQ(f->shards()[0].data_offset, 29280u);
  EXPECT_EQ(f->shards()[0].file_size, 4372256u);
  EXPECT_EQ(f->total_file_bytes(), 4372256u);
  EXPECT_EQ(f->Find("general.alignment"), nullptr);
  EXPECT_EQ(f->architecture(), "deepseek2");
  EXPECT_EQ(*f->GetString("general.name"), "ds-tiny-synthetic");
  EXPECT_EQ(*f->GetUint("general.file_type"), 15u);
  EXPECT_EQ(FileTypeName(static_cast<uint32_t>(*f->GetUint("general.file_type"))), "Q4_K_M");
  EXPECT_EQ(*f->GetUint("general.quantization_version"), 2u);
  EXPECT_EQ(f->tensors().front().name, "output.weight");
  EXPECT_EQ(f->tensors().front().type, GgmlType::kQ6_K);
}

TEST(GgufRead, DsTinyTypeHistogram) {
  MOESPLIT_REQUIRE_TESTDATA();
  auto f = OpenOrDie(TestDataPath("models/ds-tiny-Q4_K_M.gguf"));
  ASSERT_NE(f, nullptr);
  std::map<std::string, int> hist;
  for (const TensorInfo& t : f->tensors()) ++hist[TypeName(t.type)];
  const std::map<std::string, int> want = {
      {"f32", 23}, {"q4_K", 24}, {"q5_0", 18}, {"q8_0", 4}, {"q6_K", 1}};
  EXPECT_EQ(hist, want);
  for (const char* name : {"blk.2.ffn_down_exps.weight", "blk.3.ffn_down_exps.weight",
                           "blk.2.ffn_down_shexp.weight", "blk.3.ffn_down_shexp.weight"}) {
    const TensorInfo* t = f->FindTensor(name);
    ASSERT_NE(t, nullptr) << name;
    EXPECT_EQ(t->type, GgmlType::kQ8_0) << name;
  }
}

TEST(GgufRead, DsTinyExampleTensors) {
  MOESPLIT_REQUIRE_TESTDATA();
  const std::string path = TestDataPath("models/ds-tiny-Q4_K_M.gguf");
  auto f = OpenOrDie(path);
  ASSERT_NE(f, nullptr);
  const std::vector<uint8_t> bytes = ReadFileBytes(path);
  struct Want {
    const char* name;
    GgmlType type;
    std::vector<int64_t> ne;
    int64_t offset, nbytes;  // -1: not listed in the README
  };
  const Want wants[] = {
      {"token_embd.weight", GgmlType::kQ4_K, {256, 1024}, 216064, 147456},
      {"blk.1.ffn_down_exps.weight", GgmlType::kQ5_0, {128, 256, 16}, 714816, 360448},
      {"blk.0.attn_norm.weight", GgmlType::kF32, {256}, 380928, 1024},
      {"blk.0.attn_k_b.weight", GgmlType::kQ5_0, {32, 64, 4}, -1, -1},
      {"blk.0.attn_v_b.weight", GgmlType::kQ5_0, {64, 32, 4}, -1, -1},
  };
  for (const Want& w : wants) {
    SCOPED_TRACE(w.name);
    const TensorInfo* t = f->FindTensor(w.name);
    ASSERT_NE(t, nullptr);
    EXPECT_EQ(t->type, w.type);
    ASSERT_EQ(t->n_dims, static_cast<int>(w.ne.size()));
    for (int d = 0; d < kMaxDims; ++d) {
      EXPECT_EQ(t->ne[d], d < t->n_dims ? w.ne[d] : 1);
    }
    if (w.offset >= 0) {
      EXPECT_EQ(t->offset, static_cast<uint64_t>(w.offset));
    }
    if (w.nbytes >= 0) {
      EXPECT_EQ(t->nbytes, static_cast<uint64_t>(w.nbytes));
    }
    // Zero-copy: the view points at the file's bytes at data_offset + offset.
    ASSERT_LE(29280 + t->offset + t->nbytes, bytes.size());
    EXPECT_EQ(std::memcmp(t->data, bytes.data() + 29280 + t->offset, t->nbytes), 0);
    const TensorView v = t->View();
    EXPECT_EQ(v.data, t->data);
    EXPECT_EQ(v.NumElements(), t->NumElements());
  }
}

TEST(GgufRead, DsTinyKeyValues) {
  MOESPLIT_REQUIRE_TESTDATA();
  auto f = OpenOrDie(TestDataPath("models/ds-tiny-Q4_K_M.gguf"));
  ASSERT_NE(f, nullptr);
  const std::map<std::string, uint64_t> ints = {
      {"deepseek2.block_count", 4},
      {"deepseek2.context_length", 4096},
      {"deepseek2.embedding_length", 256},
      {"deepseek2.feed_forward_length", 512},
      {"deepseek2.attention.head_count", 4},
      {"deepseek2.attention.head_count_kv", 1},
      {"deepseek2.attention.key_length", 80},
      {"deepseek2.attention.value_length", 64},
      {"deepseek2.attention.key_length_mla", 48},
      {"deepseek2.attention.value_length_mla", 32},
      {"deepseek2.attention.q_lora_rank", 64},
      {"deepseek2.attention.kv_lora_rank", 64},
      {"deepseek2.rope.dimension_count", 16},
      {"deepseek2.expert_count", 16},
      {"deepseek2.expert_used_count", 4},
      {"deepseek2.expert_shared_count", 1},
      {"deepseek2.expert_feed_forward_length", 128},
      {"deepseek2.expert_group_count", 4},
      {"deepseek2.expert_group_used_count", 2},
      {"deepseek2.expert_gating_func", 2},
      {"deepseek2.leading_dense_block_count", 1},
      {"deepseek2.vocab_size", 1024},
      {"tokenizer.ggml.bos_token_id", 0},
      {"tokenizer.ggml.eos_token_id", 1},
      {"tokenizer.ggml.padding_token_id", 1},
  };
  for (const auto& [key, want] : ints) {
    StatusOr<uint64_t> got = f->GetUint(key);
    ASSERT_TRUE(got.ok()) << got.status().ToString();
    EXPECT_EQ(*got, want) << key;
  }
  EXPECT_FLOAT_EQ(static_cast<float>(*f->GetFloat("deepseek2.attention.layer_norm_rms_epsilon")),
                  1e-6f);
  EXPECT_DOUBLE_EQ(*f->GetFloat("deepseek2.rope.freq_base"), 10000.0);
  EXPECT_DOUBLE_EQ(*f->GetFloat("deepseek2.expert_weights_scale"), 2.5);
  EXPECT_TRUE(*f->GetBool("deepseek2.expert_weights_norm"));
  EXPECT_TRUE(*f->GetBool("tokenizer.ggml.add_bos_token"));
  EXPECT_EQ(*f->GetString("tokenizer.ggml.model"), "gpt2");
  EXPECT_EQ(*f->GetString("tokenizer.ggml.pre"), "deepseek-v3");
  EXPECT_EQ(f->Find("deepseek2.rope.scaling.type"), nullptr);
  const Array* tokens = *f->GetArray("tokenizer.ggml.tokens");
  EXPECT_EQ(tokens->elem_type, ValueType::kString);
  EXPECT_EQ(tokens->items.size(), 1024u);
  EXPECT_EQ(*tokens->items[0].AsString(), "<｜begin▁of▁sentence｜>");
  const Array* merges = *f->GetArray("tokenizer.ggml.merges");
  EXPECT_EQ(merges->elem_type, ValueType::kString);
  EXPECT_EQ(merges->items.size(), 766u);
  EXPECT_EQ(f->Find("tokenizer.ggml.merges")->ToDisplayString(), "[string x 766]");
}

TEST(GgufRead, GetterErrorsNameKeyAndFile) {
  MOESPLIT_REQUIRE_TESTDATA();
  auto f = OpenOrDie(TestDataPath("models/ds-tiny-Q4_K_M.gguf"));
  ASSERT_NE(f, nullptr);
  StatusOr<std::string> s = f->GetString("deepseek2.block_count");
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.status().message().find("ds-tiny-Q4_K_M.gguf"), std::string::npos);
  EXPECT_NE(s.status().message().find("deepseek2.block_count"), std::string::npos);
  EXPECT_NE(s.status().message().find("uint32"), std::string::npos);
  StatusOr<uint64_t> u = f->GetUint("no.such.key");
  ASSERT_FALSE(u.ok());
  EXPECT_EQ(u.status().code(), StatusCode::kNotFound);
  EXPECT_NE(u.status().message().find("no.such.key"), std::string::npos);
  EXPECT_EQ(f->FindTensor("no.such.tensor"), nullptr);
}

struct VocabFacts {
  const char* file;
  uint64_t size, n_kv;
  const char* arch;
  const char* model;
  const char* pre;        // nullptr: key absent
  size_t tokens, merges;  // merges 0: key absent
  uint64_t bos, eos;
  int add_bos;  // -1: key absent
};

TEST(GgufRead, VocabFiles) {
  MOESPLIT_REQUIRE_TESTDATA();
  const VocabFacts facts[] = {
      {"ggml-vocab-deepseek-llm.gguf", 3970167, 23, "llama", "gpt2", "deepseek-llm", 102400, 99757,
       100000, 100001, 1},
      {"ggml-vocab-deepseek-coder.gguf", 1156067, 25, "llama", "gpt2", "deepseek-coder", 32256,
       31757, 32013, 32014, 1},
      {"ggml-vocab-gpt-2.gguf", 1766807, 16, "gpt2", "gpt2", "gpt-2", 50257, 50000, 50256, 50256,
       -1},
      {"ggml-vocab-llama-spm.gguf", 723869, 22, "llama", "llama", "default", 32000, 0, 1, 2, 1},
  };
  for (const VocabFacts& v : facts) {
    SCOPED_TRACE(v.file);
    auto f = OpenOrDie(TestDataPath(std::string("vocab/") + v.file));
    ASSERT_NE(f, nullptr);
    EXPECT_EQ(f->version(), 3u);
    EXPECT_EQ(f->tensors().size(), 0u);
    EXPECT_EQ(f->metadata().size(), v.n_kv);
    EXPECT_EQ(f->total_file_bytes(), v.size);
    // The file ends before the aligned (empty) data section.
    EXPECT_GT(f->shards()[0].data_offset, v.size);
    EXPECT_EQ(f->architecture(), v.arch);
    EXPECT_EQ(*f->GetString("tokenizer.ggml.model"), v.model);
    EXPECT_EQ(*f->GetString("tokenizer.ggml.pre"), v.pre);
    EXPECT_EQ((*f->GetArray("tokenizer.ggml.tokens"))->items.size(), v.tokens);
    EXPECT_EQ((*f->GetArray("tokenizer.ggml.token_type"))->items.size(), v.tokens);
    if (v.merges > 0) {
      EXPECT_EQ((*f->GetArray("tokenizer.ggml.merges"))->items.size(), v.merges);
    } else {
      EXPECT_EQ(f->Find("tokenizer.ggml.merges"), nullptr);
      const Array* scores = *f->GetArray("tokenizer.ggml.scores");
      EXPECT_EQ(scores->elem_type, ValueType::kFloat32);
      EXPECT_EQ(scores->items.size(), v.tokens);
      EXPECT_EQ(*f->GetUint("tokenizer.ggml.unknown_token_id"), 0u);
    }
    EXPECT_EQ(*f->GetUint("tokenizer.ggml.bos_token_id"), v.bos);
    EXPECT_EQ(*f->GetUint("tokenizer.ggml.eos_token_id"), v.eos);
    if (v.add_bos < 0) {
      EXPECT_EQ(f->Find("tokenizer.ggml.add_bos_token"), nullptr);
    } else {
      EXPECT_EQ(*f->GetBool("tokenizer.ggml.add_bos_token"), v.add_bos == 1);
    }
  }
}

TEST(GgufRead, OpenErrors) {
  auto missing = GgufFile::Open("/nonexistent/dir/model.gguf");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  EXPECT_NE(missing.status().message().find("/nonexistent/dir/model.gguf"), std::string::npos);
  auto dir = GgufFile::Open("/tmp");
  ASSERT_FALSE(dir.ok());
  EXPECT_NE(dir.status().message().find("not a regular file"), std::string::npos);
  const std::string empty = ::moesplit::testing::ScratchDir() + "/empty.gguf";
  std::fclose(std::fopen(empty.c_str(), "wb"));
  auto e = GgufFile::Open(empty);
  ASSERT_FALSE(e.ok());
  EXPECT_EQ(e.status().code(), StatusCode::kDataLoss);
  EXPECT_NE(e.status().message().find("empty.gguf: offset 0: truncated"), std::string::npos)
      << e.status().message();
}

TEST(GgufSplitName, ParseAndMake) {
  auto n = ParseSplitName("/models/DeepSeek-R1-Q4_K_M-00002-of-00009.gguf");
  ASSERT_TRUE(n.has_value());
  EXPECT_EQ(n->prefix, "/models/DeepSeek-R1-Q4_K_M");
  EXPECT_EQ(n->no, 2);
  EXPECT_EQ(n->count, 9);
  EXPECT_EQ(MakeSplitPath(n->prefix, 3, 9), "/models/DeepSeek-R1-Q4_K_M-00003-of-00009.gguf");
  EXPECT_FALSE(ParseSplitName("model.gguf").has_value());
  EXPECT_FALSE(ParseSplitName("m-00000-of-00009.gguf").has_value());
  EXPECT_FALSE(ParseSplitName("m-00010-of-00009.gguf").has_value());
  EXPECT_FALSE(ParseSplitName("m-0001a-of-00009.gguf").has_value());
  EXPECT_FALSE(ParseSplitName("m-00001_of-00009.gguf").has_value());
  EXPECT_TRUE(ParseSplitName("-00001-of-00001.gguf").has_value());
}

TEST(GgufValue, TypedAccessAndDisplay) {
  EXPECT_EQ(*Value::I8(-5).AsInt(), -5);
  EXPECT_FALSE(Value::I8(-5).AsUint().ok());
  EXPECT_FALSE(Value::U64(~0ull).AsInt().ok());
  EXPECT_EQ(*Value::U16(7).AsFloat(), 7.0);
  EXPECT_FALSE(Value::Str("x").AsInt().ok());
  EXPECT_FALSE(Value::U8(1).AsBool().ok());
  EXPECT_EQ(Value::Str("a\"b\n").ToDisplayString(), "\"a\\\"b\\n\"");
  EXPECT_EQ(Value::F32(2.5f).ToDisplayString(), "2.5");
  EXPECT_EQ(Value::F32(1e-6f).ToDisplayString(), "1e-06");  // not 9.99999997e-07
  EXPECT_EQ(Value::F64(0.1).ToDisplayString(), "0.1");
  EXPECT_EQ(Value::F32(0.0707f).ToDisplayString(), "0.0707");
  EXPECT_EQ(Value::I64(-3).ToDisplayString(), "-3");
  EXPECT_EQ(Value::StrArray({"a", "b"}).ToDisplayString(), "[string x 2]");
  EXPECT_EQ(Value::Str(std::string(500, 'x')).ToDisplayString(20).size(), 24u);
  EXPECT_TRUE(Value::I32Array({1, 2}) == Value::I32Array({1, 2}));
  EXPECT_FALSE(Value::I32Array({1, 2}) == Value::I32Array({1, 3}));
  EXPECT_FALSE(Value::U32(1) == Value::U64(1));
  EXPECT_STREQ(ValueTypeName(ValueType::kFloat64), "float64");
}

}  // namespace
}  // namespace moesplit::gguf
