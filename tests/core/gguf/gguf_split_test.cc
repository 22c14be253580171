// Split models: ds-tiny written as 3 shards (llama.cpp's gguf-split layout) and read back.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>
#include <filesystem>

#include "core/gguf/gguf_writer.h"
#include "tests/testdata.h"

namespace moesplit::gguf {
namespace {

namespace fs = std::filesystem;
using ::moesplit::testing::ReadFileBytes;
using ::moesplit::testing::ScratchDir;
using ::moesplit::testing::TestDataPath;

class GgufSplit : public ::testing::Test {
 protected:
  void SetUp() override {
    if (::moesplit::testing::TestDataDir().empty()) GTEST_SKIP() << "no testdata";
    auto f = GgufFile::Open(TestDataPath("models/ds-tiny-Q4_K_M.gguf"));
    ASSERT_TRUE(f.ok()) << f.status().ToString();
    orig_ = std::move(*f);
    dir_ =
        ScratchDir() + "/split-" + ::testing::UnitTest::GetInstance()->current_test_info()->name();
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    prefix_ = dir_ + "/ds";
    Status s = WriteSplit(*orig_, prefix_, 3);
    ASSERT_TRUE(s.ok()) << s.ToString();
  }
  std::string Shard(int no, int count = 3) const { return MakeSplitPath(prefix_, no, count); }

  std::unique_ptr<GgufFile> orig_;
  std::string dir_, prefix_;
};

void ExpectSameModel(const GgufFile& a, const GgufFile& b) {
  ASSERT_EQ(a.tensors().size(), b.tensors().size());
  for (size_t i = 0; i < a.tensors().size(); ++i) {
    const TensorInfo& x = a.tensors()[i];
    const TensorInfo& y = b.tensors()[i];
    SCOPED_TRACE(x.name);
    EXPECT_EQ(x.name, y.name);
    EXPECT_EQ(x.type, y.type);
    EXPECT_EQ(x.n_dims, y.n_dims);
    EXPECT_EQ(x.ne, y.ne);
    ASSERT_EQ(x.nbytes, y.nbytes);
    EXPECT_EQ(std::memcmp(x.data, y.data, x.nbytes), 0);
  }
}

TEST_F(GgufSplit, OpenViaFirstAndSecondShard) {
  for (int via : {1, 2, 3}) {
    SCOPED_TRACE(via);
    auto f = GgufFile::Open(Shard(via));
    ASSERT_TRUE(f.ok()) << f.status().ToString();
    ASSERT_EQ((*f)->shards().size(), 3u);
    EXPECT_EQ((*f)->path(), Shard(1));
    EXPECT_EQ((*f)->tensors().size(), 70u);
    ExpectSameModel(*orig_, **f);
    // Tensors 0..22 in shard 0, 23..45 in shard 1, 46..69 in shard 2 (i*70/3).
    EXPECT_EQ((*f)->tensors()[22].shard, 0);
    EXPECT_EQ((*f)->tensors()[23].shard, 1);
    EXPECT_EQ((*f)->tensors()[69].shard, 2);
    EXPECT_EQ((*f)->tensors()[23].offset, 0u);
    // Model metadata (from shard 0) plus the three split keys.
    EXPECT_EQ((*f)->metadata().size(), 41u + 3u);
    EXPECT_EQ((*f)->Find("split.count")->type, ValueType::kUint16);
    EXPECT_EQ((*f)->Find("split.tensors.count")->type, ValueType::kInt32);
    EXPECT_EQ(*(*f)->GetUint("split.tensors.count"), 70u);
    EXPECT_EQ((*f)->architecture(), "deepseek2");
    EXPECT_NE((*f)->FindTensor("output.weight"), nullptr);
  }
}

TEST_F(GgufSplit, MergedCopyIsByteIdenticalToOriginal) {
  auto f = GgufFile::Open(Shard(2));
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  const std::string merged = dir_ + "/merged.gguf";
  ASSERT_TRUE(WriteCopy(**f, merged).ok());
  EXPECT_TRUE(ReadFileBytes(merged) == ReadFileBytes(TestDataPath("models/ds-tiny-Q4_K_M.gguf")));
}

TEST_F(GgufSplit, OnlyOneShardWhenAsked) {
  OpenOptions opt;
  opt.load_all_shards = false;
  auto f = GgufFile::Open(Shard(2), opt);
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  EXPECT_EQ((*f)->shards().size(), 1u);
  EXPECT_EQ((*f)->tensors().size(), 23u);
  EXPECT_EQ((*f)->metadata().size(), 3u);  // other shards carry only split keys
}

TEST_F(GgufSplit, MissingShard) {
  fs::remove(Shard(3));
  auto f = GgufFile::Open(Shard(1));
  ASSERT_FALSE(f.ok());
  EXPECT_EQ(f.status().code(), StatusCode::kNotFound);
  EXPECT_NE(f.status().message().find("shard 3 of 3 is missing"), std::string::npos)
      << f.status().message();
  EXPECT_NE(f.status().message().find(Shard(3)), std::string::npos);
}

TEST_F(GgufSplit, WrongSplitCount) {
  // A shard of a 2-way split put where shard 2 of 3 belongs: split.count says 2.
  ASSERT_TRUE(WriteSplit(*orig_, dir_ + "/two", 2).ok());
  fs::copy_file(MakeSplitPath(dir_ + "/two", 2, 2), Shard(2), fs::copy_options::overwrite_existing);
  auto f = GgufFile::Open(Shard(1));
  ASSERT_FALSE(f.ok());
  EXPECT_EQ(f.status().code(), StatusCode::kDataLoss);
  EXPECT_NE(f.status().message().find("split.count = 2"), std::string::npos)
      << f.status().message();
  EXPECT_NE(f.status().message().find(Shard(2)), std::string::npos);
  // Opening that shard by its own name: the name says 2 of 3, the keys say 2 of 2.
  auto g = GgufFile::Open(Shard(2));
  ASSERT_FALSE(g.ok());
  EXPECT_NE(g.status().message().find("file name says shard 2 of 3"), std::string::npos)
      << g.status().message();
}

TEST_F(GgufSplit, SplitKeysWithoutFileNamePattern) {
  const std::string renamed = dir_ + "/renamed.gguf";
  fs::copy_file(Shard(1), renamed);
  auto f = GgufFile::Open(renamed);
  ASSERT_FALSE(f.ok());
  EXPECT_NE(f.status().message().find("does not match NAME-NNNNN-of-MMMMM.gguf"), std::string::npos)
      << f.status().message();
  EXPECT_NE(f.status().message().find("renamed.gguf"), std::string::npos);
}

TEST_F(GgufSplit, FileNamePatternWithoutSplitKeys) {
  const std::string path = dir_ + "/plain-00001-of-00002.gguf";
  ASSERT_TRUE(WriteCopy(*orig_, path).ok());
  auto f = GgufFile::Open(path);
  ASSERT_FALSE(f.ok());
  EXPECT_NE(f.status().message().find("no split.no / split.count / split.tensors.count keys"),
            std::string::npos)
      << f.status().message();
}

TEST_F(GgufSplit, PartialSplitKeysNameWhatIsMissing) {
  const std::string path = dir_ + "/partial.gguf";
  GgufWriter w(path);
  w.AddKeyValue("split.count", Value::U16(2));
  ASSERT_TRUE(w.Begin().ok());
  ASSERT_TRUE(w.Finish().ok());
  auto f = GgufFile::Open(path);
  ASSERT_FALSE(f.ok());
  EXPECT_NE(f.status().message().find("lacks split.no, split.tensors.count"), std::string::npos)
      << f.status().message();
}

TEST_F(GgufSplit, BadSplitArguments) {
  EXPECT_FALSE(WriteSplit(*orig_, dir_ + "/x", 0).ok());
  EXPECT_FALSE(WriteSplit(*orig_, dir_ + "/x", 71).ok());
}

}  // namespace
}  // namespace moesplit::gguf
