// GgufWriter: byte-identical copies of llama.cpp files, every value type, streaming, errors.
#include "core/gguf/gguf_writer.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>

#include "tests/testdata.h"

namespace moesplit::gguf {
namespace {

using ::moesplit::testing::ReadFileBytes;
using ::moesplit::testing::ScratchDir;
using ::moesplit::testing::TestDataPath;

TEST(GgufWriter, CopyOfDsTinyIsByteIdentical) {
  MOESPLIT_REQUIRE_TESTDATA();
  const std::string src = TestDataPath("models/ds-tiny-Q4_K_M.gguf");
  auto f = GgufFile::Open(src);
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  const std::string dst = ScratchDir() + "/ds-tiny-copy.gguf";
  Status s = WriteCopy(**f, dst);
  ASSERT_TRUE(s.ok()) << s.ToString();
  const std::vector<uint8_t> a = ReadFileBytes(src), b = ReadFileBytes(dst);
  ASSERT_EQ(a.size(), b.size());
  EXPECT_TRUE(a == b) << "first difference at byte "
                      << (std::mismatch(a.begin(), a.end(), b.begin()).first - a.begin());
}

TEST(GgufWriter, CopyOfVocabKeepsMetadata) {
  MOESPLIT_REQUIRE_TESTDATA();
  auto f = GgufFile::Open(TestDataPath("vocab/ggml-vocab-llama-spm.gguf"));
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  const std::string dst = ScratchDir() + "/vocab-copy.gguf";
  ASSERT_TRUE(WriteCopy(**f, dst).ok());
  auto g = GgufFile::Open(dst);
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  ASSERT_EQ((*g)->metadata().size(), (*f)->metadata().size());
  for (size_t i = 0; i < (*f)->metadata().size(); ++i) {
    EXPECT_EQ((*g)->metadata()[i].key, (*f)->metadata()[i].key);
    EXPECT_TRUE((*g)->metadata()[i].value == (*f)->metadata()[i].value) << (*f)->metadata()[i].key;
  }
  // Our writer pads the header like llama.cpp's: the copy is the original rounded up to 32.
  EXPECT_EQ((*g)->total_file_bytes(), (723869 + 31) / 32 * 32);
}

// One value of every type, with edge values, plus nested arrays.
std::vector<KeyValue> AllTypes() {
  Array nested{ValueType::kArray, {Value::I32Array({1, -2, 3}), Value::I32Array({})}};
  Array deep{ValueType::kArray, {Value::Arr(nested), Value::Arr(Array{ValueType::kArray, {}})}};
  Array strs{ValueType::kArray, {Value::StrArray({"a", "", "ü\n"}), Value::StrArray({})}};
  Array bools{ValueType::kBool, {Value::Bool(true), Value::Bool(false)}};
  Array f64s{ValueType::kFloat64, {Value::F64(-0.0), Value::F64(1e300)}};
  return {
      {"t.u8", Value::U8(255)},
      {"t.i8", Value::I8(-128)},
      {"t.u16", Value::U16(65535)},
      {"t.i16", Value::I16(-32768)},
      {"t.u32", Value::U32(4294967295u)},
      {"t.i32", Value::I32(std::numeric_limits<int32_t>::min())},
      {"t.f32", Value::F32(std::numeric_limits<float>::quiet_NaN())},
      {"t.bool", Value::Bool(true)},
      {"t.str", Value::Str(std::string("nul\0inside", 10))},
      {"t.empty_str", Value::Str("")},
      {"t.u64", Value::U64(std::numeric_limits<uint64_t>::max())},
      {"t.i64", Value::I64(std::numeric_limits<int64_t>::min())},
      {"t.f64", Value::F64(3.141592653589793)},
      {"t.arr_f32", Value::F32Array({1.5f, -2.25f})},
      {"t.arr_nested", Value::Arr(nested)},
      {"t.arr_deep", Value::Arr(deep)},
      {"t.arr_strs", Value::Arr(strs)},
      {"t.arr_bool", Value::Arr(bools)},
      {"t.arr_f64", Value::Arr(f64s)},
      {"t.arr_empty", Value::Arr(Array{ValueType::kUint8, {}})},
  };
}

std::vector<uint8_t> Pattern(size_t n, uint8_t seed) {
  std::vector<uint8_t> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<uint8_t>(seed + i * 7);
  return v;
}

TEST(GgufWriter, SyntheticEveryTypeRoundTrips) {
  const std::string path = ScratchDir() + "/all-types.gguf";
  GgufWriter w(path, 64);
  for (KeyValue& kv : AllTypes()) w.AddKeyValue(kv.key, kv.value);
  w.AddTensor("a", GgmlType::kF32, {3});             // 12 bytes
  w.AddTensor("b", GgmlType::kQ4_K, {256, 2});       // 288 bytes
  w.AddTensor("c", GgmlType::kQ8_0, {32, 1, 2, 3});  // 204 bytes
  ASSERT_TRUE(w.Begin().ok());
  const std::vector<std::vector<uint8_t>> data = {Pattern(12, 1), Pattern(288, 2), Pattern(204, 3)};
  for (const auto& d : data) {  // odd-sized chunks
    for (size_t i = 0; i < d.size(); i += 5) {
      ASSERT_TRUE(w.WriteTensorData(d.data() + i, std::min<size_t>(5, d.size() - i)).ok());
    }
  }
  EXPECT_EQ(w.current_tensor(), 3u);
  ASSERT_TRUE(w.Finish().ok());

  auto f = GgufFile::Open(path);
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  const std::vector<KeyValue> want = AllTypes();
  ASSERT_EQ((*f)->metadata().size(), want.size() + 1);  // + general.alignment
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_EQ((*f)->metadata()[i].key, want[i].key);
    EXPECT_TRUE((*f)->metadata()[i].value == want[i].value) << want[i].key;
  }
  EXPECT_EQ(*(*f)->GetUint("general.alignment"), 64u);
  EXPECT_EQ((*f)->Find("general.alignment")->type, ValueType::kUint32);
  EXPECT_EQ((*f)->shards()[0].alignment, 64u);
  EXPECT_EQ((*f)->shards()[0].data_offset % 64, 0u);
  ASSERT_EQ((*f)->tensors().size(), 3u);
  const uint64_t offsets[] = {0, 64, 384};  // 12 -> 64, 288 -> 320
  for (size_t i = 0; i < 3; ++i) {
    const TensorInfo& t = (*f)->tensors()[i];
    EXPECT_EQ(t.offset, offsets[i]);
    ASSERT_EQ(t.nbytes, data[i].size());
    EXPECT_EQ(std::memcmp(t.data, data[i].data(), t.nbytes), 0);
  }
  EXPECT_EQ((*f)->tensors()[2].n_dims, 4);
  EXPECT_EQ((*f)->tensors()[2].ne[3], 3);
}

TEST(GgufWriter, DeclarationErrorsReportedByBegin) {
  const std::string dir = ScratchDir();
  {
    GgufWriter w(dir + "/e1.gguf");
    w.AddKeyValue("k", Value::U8(1));
    w.AddKeyValue("k", Value::U8(2));
    Status s = w.Begin();
    EXPECT_NE(s.message().find("duplicate key 'k'"), std::string::npos) << s.ToString();
  }
  {
    GgufWriter w(dir + "/e2.gguf");
    w.AddTensor("t", GgmlType::kF32, {4});
    w.AddTensor("t", GgmlType::kF32, {4});
    EXPECT_NE(w.Begin().message().find("duplicate tensor name 't'"), std::string::npos);
  }
  {
    GgufWriter w(dir + "/e3.gguf");
    w.AddTensor("q", GgmlType::kQ4_K, {128});
    EXPECT_NE(w.Begin().message().find("block size 256"), std::string::npos);
  }
  {
    GgufWriter w(dir + "/e4.gguf");
    w.AddTensor("z", GgmlType::kF32, {4, 0});
    EXPECT_NE(w.Begin().message().find("ne[1] = 0"), std::string::npos);
  }
  {
    GgufWriter w(dir + "/e5.gguf", 48);
    EXPECT_NE(w.Begin().message().find("power of two"), std::string::npos);
  }
  {
    GgufWriter w(dir + "/e6.gguf");
    w.AddKeyValue("bad", Value{ValueType::kUint8, uint64_t{300}});
    EXPECT_NE(w.Begin().message().find("does not fit in uint8"), std::string::npos);
  }
}

TEST(GgufWriter, StreamingMisuse) {
  GgufWriter w(ScratchDir() + "/misuse.gguf");
  w.AddTensor("t", GgmlType::kF32, {4});
  uint8_t buf[32] = {};
  EXPECT_FALSE(w.WriteTensorData(buf, 4).ok());  // before Begin
  ASSERT_TRUE(w.Begin().ok());
  Status over = w.WriteTensorData(buf, 17);
  EXPECT_NE(over.message().find("only 16 of its 16 bytes remain"), std::string::npos)
      << over.ToString();
  ASSERT_TRUE(w.WriteTensorData(buf, 8).ok());
  Status fin = w.Finish();
  EXPECT_NE(fin.message().find("tensor 't' got 8 of 16 bytes"), std::string::npos)
      << fin.ToString();
}

TEST(GgufWriter, IoErrorsNameTheFile) {
  {
    GgufWriter w("/nonexistent/dir/out.gguf");
    Status s = w.Begin();
    EXPECT_EQ(s.code(), StatusCode::kIoError);
    EXPECT_NE(s.message().find("/nonexistent/dir/out.gguf"), std::string::npos);
  }
  {
    // /dev/full: every write fails with ENOSPC, as on a full disk.
    GgufWriter w("/dev/full");
    w.AddTensor("t", GgmlType::kF32, {1 << 20});
    Status s = w.Begin();
    std::vector<uint8_t> big(4 << 20);
    if (s.ok()) s = w.WriteTensorData(big.data(), big.size());
    if (s.ok()) s = w.Finish();
    EXPECT_EQ(s.code(), StatusCode::kIoError);
    EXPECT_NE(s.message().find("/dev/full"), std::string::npos) << s.ToString();
  }
}

}  // namespace
}  // namespace moesplit::gguf
