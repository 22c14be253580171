// Hand-made invalid GGUF images: each must fail with a message that names the file, the offset
// and what was expected.
#include <gtest/gtest.h>

#include "tests/core/gguf/gguf_test_util.h"

namespace moesplit::gguf {
namespace {

using testing::ImageBuilder;
using testing::ParseImage;

// Asserts failure with `code` and that the message contains each of `parts`.
void ExpectError(const std::vector<uint8_t>& img, StatusCode code,
                 std::initializer_list<const char*> parts, const OpenOptions& opt = {}) {
  StatusOr<ParsedGguf> r = ParseImage(img, opt);
  ASSERT_FALSE(r.ok()) << "parsed fine";
  EXPECT_EQ(r.status().code(), code) << r.status().ToString();
  EXPECT_EQ(r.status().message().rfind("crafted.gguf", 0), 0u) << r.status().message();
  for (const char* p : parts) {
    EXPECT_NE(r.status().message().find(p), std::string::npos)
        << "missing '" << p << "' in: " << r.status().message();
  }
}

// A valid file: one KV, one f32 tensor of 4 values.
ImageBuilder ValidImage() {
  ImageBuilder b;
  b.Header(3, 1, 1).KvStr("general.architecture", "x").Tensor("w", {4}, 0, 0).PadTo(32).Zeros(16);
  return b;
}

TEST(GgufCrafted, ValidBaseline) {
  StatusOr<ParsedGguf> r = ParseImage(ValidImage().bytes());
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->tensors.size(), 1u);
  EXPECT_EQ(r->info.data_offset, 128u);  // 24 + 41 (KV) + 33 (tensor info) = 98 -> 128
  EXPECT_EQ(r->tensors[0].nbytes, 16u);
  ImageBuilder v2;
  v2.Header(2, 0, 0);
  EXPECT_TRUE(ParseImage(v2.bytes()).ok());
}

TEST(GgufCrafted, BadMagic) {
  ImageBuilder b;
  b.Raw("GGUX", 4).U32(3).U64(0).U64(0);
  ExpectError(b.bytes(), StatusCode::kDataLoss, {"offset 0:", "bad magic", "expected \"GGUF\""});
  ExpectError({'G', 'G'}, StatusCode::kDataLoss, {"offset 0:", "truncated"});
}

TEST(GgufCrafted, Versions) {
  ImageBuilder v1, v4, be;
  v1.Header(1, 0, 0);
  v4.Header(4, 0, 0);
  be.Header(0x03000000, 0, 0);
  ExpectError(v1.bytes(), StatusCode::kUnimplemented, {"offset 4:", "version 1 is not supported"});
  ExpectError(v4.bytes(), StatusCode::kDataLoss, {"offset 4:", "version 4", "expected 2 or 3"});
  ExpectError(be.bytes(), StatusCode::kDataLoss, {"big-endian"});
}

TEST(GgufCrafted, AbsurdCounts) {
  ImageBuilder t, kv;
  t.Header(3, ~0ull, 0).Zeros(100);
  kv.Header(3, 0, 1ull << 40).Zeros(100);
  ExpectError(t.bytes(), StatusCode::kDataLoss,
              {"offset 8:", "tensor count 18446744073709551615 cannot fit in a 124-byte file"});
  ExpectError(kv.bytes(), StatusCode::kDataLoss,
              {"offset 16:", "key/value count 1099511627776 cannot fit"});
  OpenOptions opt;
  opt.max_tensors = 2;
  ImageBuilder three;
  three.Header(3, 3, 0).Zeros(200);
  ExpectError(three.bytes(), StatusCode::kDataLoss, {"limit 2"}, opt);
}

TEST(GgufCrafted, AbsurdStringLength) {
  ImageBuilder b;
  b.Header(3, 0, 1).U64(1ull << 62).Zeros(20);
  ExpectError(b.bytes(), StatusCode::kDataLoss,
              {"offset 24:", "length 4611686018427387904 runs past the end"});
  ImageBuilder v;
  v.Header(3, 0, 1).Str("k").U32(8).U64(~0ull).Zeros(8);
  ExpectError(v.bytes(), StatusCode::kDataLoss, {"offset 37:", "key 'k'", "string value length"});
}

TEST(GgufCrafted, TensorShapes) {
  ImageBuilder d5, ne0, ovf, blk;
  d5.Header(3, 1, 0).Str("w").U32(5).Zeros(80);
  ne0.Header(3, 1, 0).Tensor("w", {4, 0}, 0, 0).Zeros(64);
  ovf.Header(3, 1, 0).Tensor("w", {1ull << 32, 1ull << 32}, 0, 0).Zeros(64);
  blk.Header(3, 1, 0).Tensor("w", {100}, 12, 0).Zeros(200);
  ExpectError(d5.bytes(), StatusCode::kDataLoss, {"offset 33:", "tensor 'w': n_dims 5", "1..4"});
  ExpectError(ne0.bytes(), StatusCode::kDataLoss, {"offset 45:", "ne[1] = 0"});
  ExpectError(ovf.bytes(), StatusCode::kDataLoss, {"element count overflows int64"});
  ExpectError(blk.bytes(), StatusCode::kDataLoss,
              {"ne[0] = 100 is not a multiple of the q4_K block size 256"});
}

TEST(GgufCrafted, UnknownTypeIdsNameTheTensor) {
  for (uint32_t id : {4u, 99u, 31u}) {
    ImageBuilder b;
    b.Header(3, 1, 0).Tensor("blk.0.ffn_up.weight", {32}, id, 0).Zeros(256);
    ExpectError(b.bytes(), StatusCode::kDataLoss,
                {"offset 63:", "tensor 'blk.0.ffn_up.weight': unknown ggml type id",
                 std::to_string(id).c_str()});
  }
}

TEST(GgufCrafted, TensorPlacement) {
  ImageBuilder mis, ovl, past, past_huge, dup;
  mis.Header(3, 1, 0).Tensor("w", {4}, 0, 8).PadTo(32).Zeros(64);
  ExpectError(mis.bytes(), StatusCode::kDataLoss,
              {"tensor 'w': data offset 8 is not a multiple of the alignment 32"});
  ovl.Header(3, 2, 0).Tensor("a", {16}, 0, 0).Tensor("b", {16}, 0, 32).PadTo(32).Zeros(128);
  ExpectError(ovl.bytes(), StatusCode::kDataLoss,
              {"tensor 'b' at data offset 32 overlaps tensor 'a'"});
  past.Header(3, 1, 0).Tensor("w", {64}, 0, 0).PadTo(32).Zeros(100);
  ExpectError(past.bytes(), StatusCode::kDataLoss,
              {"offset 24:", "tensor 'w': 256 bytes at data offset 0", "run past the end"});
  past_huge.Header(3, 1, 0).Tensor("w", {64}, 0, ~0ull << 5).PadTo(32).Zeros(300);
  ExpectError(past_huge.bytes(), StatusCode::kDataLoss, {"run past the end"});
  dup.Header(3, 2, 0).Tensor("w", {8}, 0, 0).Tensor("w", {8}, 0, 32).PadTo(32).Zeros(64);
  ExpectError(dup.bytes(), StatusCode::kDataLoss, {"offset 57:", "duplicate tensor name 'w'"});
  ImageBuilder no_data;
  no_data.Header(3, 1, 0).Tensor("w", {8}, 0, 0);
  ExpectError(no_data.bytes(), StatusCode::kDataLoss, {"data section would start at offset 64"});
}

TEST(GgufCrafted, DuplicateKey) {
  ImageBuilder b;
  b.Header(3, 0, 2).KvU32("a.b", 1).KvU32("a.b", 2);
  ExpectError(b.bytes(), StatusCode::kDataLoss, {"offset 43:", "duplicate metadata key 'a.b'"});
}

TEST(GgufCrafted, Alignment) {
  for (uint32_t a : {0u, 3u, 48u}) {
    ImageBuilder b;
    b.Header(3, 0, 1).KvU32("general.alignment", a);
    ExpectError(b.bytes(), StatusCode::kDataLoss,
                {"offset 24:", "general.alignment is", "nonzero power of two"});
  }
  ImageBuilder u64;
  u64.Header(3, 0, 1).Str("general.alignment").U32(10).U64(32);
  ExpectError(u64.bytes(), StatusCode::kDataLoss, {"has type uint64 (expected uint32)"});
  // A valid alignment of 64 moves the data section and the offset rule.
  ImageBuilder ok;
  ok.Header(3, 1, 1).KvU32("general.alignment", 64).Tensor("w", {4}, 0, 0).PadTo(64).Zeros(16);
  StatusOr<ParsedGguf> r = ParseImage(ok.bytes());
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->info.alignment, 64u);
  EXPECT_EQ(r->info.data_offset, 128u);
}

TEST(GgufCrafted, ArraysDepthLengthAndTypes) {
  ImageBuilder bomb;
  bomb.Header(3, 0, 1).Str("k").U32(9);
  for (int i = 0; i < 1000; ++i) bomb.U32(9).U64(1);
  ExpectError(bomb.bytes(), StatusCode::kDataLoss, {"key 'k'", "arrays nested 9 deep (limit 8)"});
  ImageBuilder longarr;
  longarr.Header(3, 0, 1).Str("k").U32(9).U32(0).U64(1ull << 40).Zeros(64);
  ExpectError(longarr.bytes(), StatusCode::kDataLoss,
              {"offset 37:", "array of 1099511627776 uint8 cannot fit"});
  ImageBuilder strs;  // 2^59 strings: count * 8 would overflow a naive check
  strs.Header(3, 0, 1).Str("k").U32(9).U32(8).U64(1ull << 61).Zeros(64);
  ExpectError(strs.bytes(), StatusCode::kDataLoss, {"cannot fit"});
  OpenOptions opt;
  opt.max_array_len = 10;
  ImageBuilder limited;
  limited.Header(3, 0, 1).Str("k").U32(9).U32(0).U64(11).Zeros(11);
  ExpectError(limited.bytes(), StatusCode::kDataLoss, {"array length 11 exceeds the limit of 10"},
              opt);
  ImageBuilder badtype;
  badtype.Header(3, 0, 1).Str("k").U32(13).U32(0);
  ExpectError(badtype.bytes(), StatusCode::kDataLoss, {"offset 33:", "unknown value type", "13"});
  ImageBuilder badelem;
  badelem.Header(3, 0, 1).Str("k").U32(9).U32(77).U64(0);
  ExpectError(badelem.bytes(), StatusCode::kDataLoss, {"unknown array element type 77"});
  ImageBuilder badbool;
  badbool.Header(3, 0, 1).Str("k").U32(7).U8(2);
  ExpectError(badbool.bytes(), StatusCode::kDataLoss, {"offset 37:", "bool value 2"});
}

TEST(GgufCrafted, VocabOnlyMayEndBeforeDataSection) {
  ImageBuilder b;
  b.Header(3, 0, 1).KvStr("general.architecture", "llama");  // 24 + 45 = 69 bytes
  StatusOr<ParsedGguf> r = ParseImage(b.bytes());
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->info.data_offset, 96u);
  EXPECT_EQ(r->info.file_size, 69u);
}

}  // namespace
}  // namespace moesplit::gguf
