// The derivation of the split MLA tensors from the legacy attn_kv_b (core/engine/mla_split.h)
// against the converter's rule computed by hand: llama.cpp's convert_hf_to_gguf.py views
// kv_b_proj [H*(nope+v), L] as [H, nope+v, L], splits dim 1 into k [H, nope, L] and
// v [H, v, L], and writes k transposed ([H, L, nope]), so
//   k_b[h][l][i] = kv_b[h*(nope+v) + i][l]      (ggml attn_k_b [nope, L, H])
//   v_b[h][j][l] = kv_b[h*(nope+v) + nope + j][l] (ggml attn_v_b [L, v, H]).
#include "core/engine/mla_split.h"

#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "core/base/float16.h"
#include "cpu_kernels/quant/quant.h"

namespace moesplit::engine {
namespace {

// H = 3 heads, L = 256 (one K-quant super-block per kv_b row), nope = 32, v = 16: small, but
// nope != v and H > 1, so a swapped dimension or head stride shows.
constexpr MlaHeadDims kDims{.n_head = 3, .kv_lora = 256, .qk_nope = 32, .v_head = 16};
constexpr int64_t kRows = kDims.n_head * (kDims.qk_nope + kDims.v_head);

std::vector<float> RandomValues(int64_t n, float scale, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, scale);
  std::vector<float> v(static_cast<size_t>(n));
  for (float& x : v) x = dist(rng);
  return v;
}

// kv_b [L, H*(nope+v)] of `type` holding `values` (encoded by the reference codec), and the
// values it decodes to (what the converter's split sees).
struct KvB {
  std::string name = "blk.5.attn_kv_b.weight";
  std::vector<uint8_t> bytes;
  std::vector<float> decoded;  // [kRows x L]
  TensorView view;
};

KvB MakeKvB(GgmlType type, const std::vector<float>& values) {
  const int64_t L = kDims.kv_lora;
  KvB k;
  const size_t row = static_cast<size_t>(RowBytes(type, L));
  k.bytes.resize(row * kRows);
  k.decoded.resize(static_cast<size_t>(kRows * L));
  for (int64_t r = 0; r < kRows; ++r) {
    quant::QuantizeRow(type, &values[static_cast<size_t>(r * L)], &k.bytes[r * row], L);
    quant::DequantizeRow(type, &k.bytes[r * row], &k.decoded[static_cast<size_t>(r * L)], L);
  }
  k.view.name = k.name;
  k.view.type = type;
  k.view.n_dims = 2;
  k.view.ne = {L, kRows, 1, 1};
  k.view.data = k.bytes.data();
  k.view.nbytes = k.bytes.size();
  return k;
}

std::vector<float> Decode(const TensorView& t) {
  std::vector<float> out(static_cast<size_t>(t.NumElements()));
  const size_t row = static_cast<size_t>(t.RowBytes());
  for (int64_t r = 0; r < t.NumRows(); ++r) {
    quant::DequantizeRow(t.type, static_cast<const uint8_t*>(t.data) + r * row,
                         &out[static_cast<size_t>(r * t.ne[0])], t.ne[0]);
  }
  return out;
}

// Derives from a kv_b of `type` and compares with the hand-computed split of its decoded values;
// `tol` relative to the value (0: bit-exact).
void CheckSplit(GgmlType type, GgmlType want_type, float tol) {
  const int64_t H = kDims.n_head, L = kDims.kv_lora, nope = kDims.qk_nope, hv = kDims.v_head;
  const KvB kv = MakeKvB(type, RandomValues(kRows * L, 0.5f, 11));
  MlaSplit split(kv.view, kDims);
  EXPECT_EQ(split.type(), want_type);
  EXPECT_EQ(split.k_b().data, nullptr);  // shapes only until Derive
  ASSERT_TRUE(split.Derive().ok());
  const TensorView kb = split.k_b(), vb = split.v_b();
  EXPECT_EQ(std::string(kb.name), "blk.5.attn_k_b.weight (derived from attn_kv_b)");
  EXPECT_EQ(std::string(vb.name), "blk.5.attn_v_b.weight (derived from attn_kv_b)");
  EXPECT_EQ(kb.ne, (std::array<int64_t, 4>{nope, L, H, 1}));
  EXPECT_EQ(vb.ne, (std::array<int64_t, 4>{L, hv, H, 1}));
  EXPECT_EQ(kb.nbytes + vb.nbytes, MlaSplitBytes(type, kDims));
  const std::vector<float> k = Decode(kb), v = Decode(vb);
  const auto near = [&](float got, float want) {
    return tol == 0 ? got == want : std::fabs(got - want) <= tol * std::fabs(want) + 1e-7f;
  };
  int64_t bad = 0;
  for (int64_t h = 0; h < H; ++h) {
    for (int64_t l = 0; l < L; ++l) {
      for (int64_t i = 0; i < nope; ++i) {
        const float want = kv.decoded[static_cast<size_t>((h * (nope + hv) + i) * L + l)];
        bad += !near(k[static_cast<size_t>((h * L + l) * nope + i)], want);
      }
    }
    for (int64_t j = 0; j < hv; ++j) {
      for (int64_t l = 0; l < L; ++l) {
        const float want = kv.decoded[static_cast<size_t>((h * (nope + hv) + nope + j) * L + l)];
        bad += !near(v[static_cast<size_t>((h * hv + j) * L + l)], want);
      }
    }
  }
  EXPECT_EQ(bad, 0) << TypeName(type);
}

// Float sources keep their type: the split only moves values, bit-exact.
TEST(MlaSplit, FloatTypesAreAnExactRearrangement) {
  CheckSplit(GgmlType::kF32, GgmlType::kF32, 0);
  CheckSplit(GgmlType::kF16, GgmlType::kF16, 0);
  CheckSplit(GgmlType::kBF16, GgmlType::kBF16, 0);
}

// Quantized sources become f16: the decoded values rounded once (f16: 2^-11 relative).
TEST(MlaSplit, QuantizedTypesBecomeF16) {
  for (GgmlType t : {GgmlType::kQ6_K, GgmlType::kQ4_K, GgmlType::kQ8_0, GgmlType::kQ5_0}) {
    CheckSplit(t, GgmlType::kF16, 1.0f / 2048);
  }
}

// The sizes DeviceBytesNeeded counts: k_b H*L*nope and v_b H*v*L values of the derived type.
TEST(MlaSplit, BytesOfTheDerivedTensors) {
  const MlaHeadDims v3{.n_head = 128, .kv_lora = 512, .qk_nope = 128, .v_head = 128};
  EXPECT_EQ(MlaSplitBytes(GgmlType::kQ6_K, v3), uint64_t{2} * 128 * 512 * 128 * 2);  // 32 MiB
  EXPECT_EQ(MlaSplitBytes(GgmlType::kF32, v3), uint64_t{2} * 128 * 512 * 128 * 4);
}

// A value f16 cannot hold is an error naming the tensor, not an infinity on the device.
TEST(MlaSplit, ValuesOutsideF16RangeAreAnError) {
  std::vector<float> values = RandomValues(kRows * kDims.kv_lora, 0.5f, 3);
  values[777] = 1e6f;
  const KvB kv = MakeKvB(GgmlType::kQ8_0, values);
  MlaSplit split(kv.view, kDims);
  const Status s = split.Derive();
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("blk.5.attn_kv_b.weight"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("--device cpu"), std::string::npos) << s.message();
}

}  // namespace
}  // namespace moesplit::engine
