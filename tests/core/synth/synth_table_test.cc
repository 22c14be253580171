// Tensor tables, types and metadata of the presets; ds-tiny against the llama.cpp-made oracle.
#include <gtest/gtest.h>

#include <string>

#include "core/gguf/gguf_file.h"
#include "core/synth/model_spec.h"
#include "core/synth/quant_mix.h"
#include "tests/testdata.h"

namespace moesplit::synth {
namespace {

const char* kOracle = "models/ds-tiny-Q4_K_M.gguf";

ModelSpec Build(BuildOptions o) {
  auto s = BuildModelSpec(o);
  EXPECT_TRUE(s.ok()) << s.status().ToString();
  return std::move(s).value();
}

const TensorSpec* Find(const ModelSpec& s, const std::string& name) {
  for (const TensorSpec& t : s.tensors) {
    if (t.name == name) return &t;
  }
  return nullptr;
}

const gguf::Value* FindKey(const ModelSpec& s, const std::string& key) {
  for (const gguf::KeyValue& kv : s.metadata) {
    if (kv.key == key) return &kv.value;
  }
  return nullptr;
}

TEST(SynthTable, DsTinyTensorTableMatchesOracle) {
  MOESPLIT_REQUIRE_TESTDATA();
  auto oracle = gguf::GgufFile::Open(testing::TestDataPath(kOracle));
  ASSERT_TRUE(oracle.ok()) << oracle.status().ToString();
  const ModelSpec spec = Build({.preset = "ds-tiny"});
  const auto& want = (*oracle)->tensors();
  ASSERT_EQ(spec.tensors.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    const TensorSpec& t = spec.tensors[i];
    SCOPED_TRACE(want[i].name);
    EXPECT_EQ(t.name, want[i].name);
    EXPECT_EQ(TypeName(t.type), std::string(TypeName(want[i].type)));
    ASSERT_EQ(static_cast<int>(t.ne.size()), want[i].n_dims);
    for (size_t d = 0; d < t.ne.size(); ++d) EXPECT_EQ(t.ne[d], want[i].ne[d]);
    EXPECT_EQ(t.Bytes(), want[i].nbytes);
  }
}

TEST(SynthTable, DsTinyMetadataMatchesOracle) {
  MOESPLIT_REQUIRE_TESTDATA();
  auto oracle = gguf::GgufFile::Open(testing::TestDataPath(kOracle));
  ASSERT_TRUE(oracle.ok()) << oracle.status().ToString();
  const ModelSpec spec = Build({.preset = "ds-tiny"});
  const auto& want = (*oracle)->metadata();
  ASSERT_EQ(spec.metadata.size(), want.size());  // 41
  for (size_t i = 0; i < want.size(); ++i) {
    SCOPED_TRACE(want[i].key);
    EXPECT_EQ(spec.metadata[i].key, want[i].key);
    if (want[i].key == "general.name") continue;  // ours says "moesplit ds-tiny"
    EXPECT_TRUE(spec.metadata[i].value == want[i].value)
        << spec.metadata[i].value.ToDisplayString() << " vs " << want[i].value.ToDisplayString();
  }
}

TEST(SynthTable, DsTinyTypeHistogram) {
  const ModelSpec spec = Build({.preset = "ds-tiny"});
  std::map<std::string, int> hist;
  for (const TensorSpec& t : spec.tensors) ++hist[TypeName(t.type)];
  EXPECT_EQ(hist["f32"], 23);
  EXPECT_EQ(hist["q4_K"], 24);
  EXPECT_EQ(hist["q5_0"], 18);
  EXPECT_EQ(hist["q8_0"], 4);
  EXPECT_EQ(hist["q6_K"], 1);
}

TEST(SynthTable, DsV3FullWidthTableAndSize) {
  auto spec = BuildTensorTable({.preset = "ds-v3"});
  ASSERT_TRUE(spec.ok()) << spec.status().ToString();
  // 3 globals + 3 dense layers x 13 + 58 MoE layers x 18 = 1086 tensors.
  EXPECT_EQ(spec->tensors.size(), 3u + 3 * 13 + 58 * 18);
  const TensorSpec* gate = Find(*spec, "blk.3.ffn_gate_exps.weight");
  ASSERT_NE(gate, nullptr);
  EXPECT_EQ(gate->ne, (std::vector<int64_t>{7168, 2048, 256}));
  EXPECT_EQ(gate->type, GgmlType::kQ4_K);
  // attn_k_b rows are qk_nope = 128 wide: Q4_K cannot hold them, llama-quantize uses Q5_0.
  EXPECT_EQ(Find(*spec, "blk.0.attn_k_b.weight")->type, GgmlType::kQ5_0);
  EXPECT_EQ(Find(*spec, "blk.0.attn_q_b.weight")->ne, (std::vector<int64_t>{1536, 128 * 192}));
  EXPECT_EQ(Find(*spec, "output.weight")->type, GgmlType::kQ6_K);
  // use_more_bits(i, 61): layers < 7, >= 53 and (i - 7) % 3 == 2 get Q6_K ffn_down.
  EXPECT_EQ(Find(*spec, "blk.6.ffn_down_exps.weight")->type, GgmlType::kQ6_K);
  EXPECT_EQ(Find(*spec, "blk.7.ffn_down_exps.weight")->type, GgmlType::kQ4_K);
  EXPECT_EQ(Find(*spec, "blk.9.ffn_down_exps.weight")->type, GgmlType::kQ6_K);
  EXPECT_EQ(Find(*spec, "blk.60.ffn_down_exps.weight")->type, GgmlType::kQ6_K);
  // Routed experts alone: 58 layers x 3 x 7168 x 2048 x 256 = 653.8 G values; the file is
  // ~377 GiB at Q4_K_M (DeepSeek-R1 Q4_K_M uploads are ~377-404 GB).
  const double gib = TotalTensorBytes(*spec) / 1073741824.0;
  EXPECT_GT(gib, 350.0);
  EXPECT_LT(gib, 420.0);
}

// Kimi-K2 (config.json): 61 layers, the first dense, 384 experts top-8, 64 heads of MLA with
// DeepSeek-V3's widths, vocabulary 163840.
TEST(SynthTable, KimiK2FullWidthTable) {
  auto spec = BuildTensorTable({.preset = "kimi-k2"});
  ASSERT_TRUE(spec.ok()) << spec.status().ToString();
  // 3 globals + 1 dense layer x 13 + 60 MoE layers x 18 tensors.
  EXPECT_EQ(spec->tensors.size(), 3u + 1 * 13 + 60 * 18);
  EXPECT_EQ(Find(*spec, "blk.1.ffn_gate_exps.weight")->ne, (std::vector<int64_t>{7168, 2048, 384}));
  EXPECT_EQ(Find(*spec, "blk.1.ffn_gate_inp.weight")->ne, (std::vector<int64_t>{7168, 384}));
  EXPECT_EQ(Find(*spec, "blk.0.ffn_gate.weight")->ne, (std::vector<int64_t>{7168, 18432}));
  EXPECT_EQ(Find(*spec, "blk.1.ffn_gate.weight"), nullptr);
  EXPECT_EQ(Find(*spec, "blk.60.ffn_up_shexp.weight")->ne, (std::vector<int64_t>{7168, 2048}));
  // 64 heads x (128 nope + 64 rope) query rows, 64 x 128 value columns into the output.
  EXPECT_EQ(Find(*spec, "blk.0.attn_q_b.weight")->ne, (std::vector<int64_t>{1536, 64 * 192}));
  EXPECT_EQ(Find(*spec, "blk.0.attn_k_b.weight")->ne, (std::vector<int64_t>{128, 512, 64}));
  EXPECT_EQ(Find(*spec, "blk.0.attn_output.weight")->ne, (std::vector<int64_t>{64 * 128, 7168}));
  EXPECT_EQ(Find(*spec, "token_embd.weight")->ne, (std::vector<int64_t>{7168, 163840}));
  // Routed experts: 60 x 384 x 3 x 7168 x 2048 = 1014.7 G values; everything else ~12 G, so
  // the total is the "1T parameters" Moonshot states.
  int64_t routed = 0, total = 0;
  for (const TensorSpec& t : spec->tensors) {
    total += t.NumElements();
    if (t.name.find("_exps.") != std::string::npos) routed += t.NumElements();
  }
  EXPECT_EQ(routed, int64_t{60} * 384 * 3 * 7168 * 2048);
  EXPECT_GT(total, routed);
  EXPECT_LT(total, routed + int64_t{15'000'000'000});
}

TEST(SynthTable, KimiK2Metadata) {
  const ModelSpec spec = Build({.preset = "kimi-k2", .layers = 2});
  EXPECT_EQ(FindKey(spec, "deepseek2.expert_count")->AsInt().value(), 384);
  EXPECT_EQ(FindKey(spec, "deepseek2.expert_used_count")->AsInt().value(), 8);
  EXPECT_EQ(FindKey(spec, "deepseek2.expert_group_count")->AsInt().value(), 1);
  EXPECT_EQ(FindKey(spec, "deepseek2.leading_dense_block_count")->AsInt().value(), 1);
  EXPECT_EQ(FindKey(spec, "deepseek2.attention.head_count")->AsInt().value(), 64);
  EXPECT_FLOAT_EQ(FindKey(spec, "deepseek2.expert_weights_scale")->AsFloat().value(), 2.827f);
  EXPECT_FLOAT_EQ(FindKey(spec, "deepseek2.rope.freq_base")->AsFloat().value(), 50000.0f);
  EXPECT_FLOAT_EQ(FindKey(spec, "deepseek2.rope.scaling.factor")->AsFloat().value(), 32.0f);
  EXPECT_EQ(FindKey(spec, "deepseek2.context_length")->AsInt().value(), 131072);
  EXPECT_EQ(FindKey(spec, "tokenizer.ggml.pre")->AsString().value(), "kimi-k2");
  EXPECT_EQ(FindKey(spec, "tokenizer.ggml.bos_token_id")->AsInt().value(), 163584);
  EXPECT_EQ(FindKey(spec, "tokenizer.ggml.eos_token_id")->AsInt().value(), 163585);
  EXPECT_EQ(FindKey(spec, "tokenizer.chat_template"), nullptr);
}

TEST(SynthTable, DsV3FewLayersAndLegacyLayout) {
  const ModelSpec spec = Build({.preset = "ds-v3", .layers = 4, .mla = MlaLayout::kLegacy});
  EXPECT_EQ(spec.hp.n_layer, 4);
  EXPECT_EQ(FindKey(spec, "deepseek2.block_count")->AsUint().value(), 4u);
  EXPECT_EQ(FindKey(spec, "deepseek2.attention.head_count_kv")->AsUint().value(), 128u);
  EXPECT_EQ(FindKey(spec, "deepseek2.attention.key_length")->AsUint().value(), 192u);
  EXPECT_EQ(FindKey(spec, "deepseek2.attention.value_length")->AsUint().value(), 128u);
  EXPECT_EQ(FindKey(spec, "deepseek2.attention.key_length_mla"), nullptr);
  const TensorSpec* kvb = Find(spec, "blk.0.attn_kv_b.weight");
  ASSERT_NE(kvb, nullptr);
  EXPECT_EQ(kvb->ne, (std::vector<int64_t>{512, 128 * 256}));
  EXPECT_EQ(kvb->type, GgmlType::kQ4_K);  // use_more_bits(0, 4) is false: 0 >= 7*4/8 = 3? no
  EXPECT_EQ(Find(spec, "blk.2.attn_kv_b.weight")->type, GgmlType::kQ6_K);  // (2 - 0) % 3 == 2
  EXPECT_EQ(Find(spec, "blk.3.attn_kv_b.weight")->type, GgmlType::kQ6_K);  // 3 >= 3
  EXPECT_EQ(Find(spec, "blk.0.attn_k_b.weight"), nullptr);
  EXPECT_NEAR(FindKey(spec, "deepseek2.rope.scaling.yarn_log_multiplier")->AsFloat().value(), 0.1,
              1e-6);
  EXPECT_EQ(FindKey(spec, "deepseek2.rope.scaling.type")->AsString().value(), "yarn");
}

TEST(SynthTable, DsV2LiteTable) {
  const ModelSpec spec = Build({.preset = "ds-v2-lite"});
  EXPECT_EQ(spec.tensors.size(), 3u + 1 * 11 + 26 * 15);  // no q_a/q_a_norm/q_b, no exp_probs_b
  EXPECT_EQ(Find(spec, "blk.0.attn_q.weight")->ne, (std::vector<int64_t>{2048, 16 * 192}));
  EXPECT_EQ(Find(spec, "blk.1.ffn_up_shexp.weight")->ne, (std::vector<int64_t>{2048, 2816}));
  EXPECT_EQ(Find(spec, "blk.1.exp_probs_b.bias"), nullptr);
  EXPECT_EQ(FindKey(spec, "deepseek2.attention.q_lora_rank"), nullptr);
  EXPECT_EQ(FindKey(spec, "deepseek2.expert_weights_norm"), nullptr);
  EXPECT_EQ(FindKey(spec, "deepseek2.expert_gating_func")->AsUint().value(), 1u);
  EXPECT_EQ(FindKey(spec, "tokenizer.ggml.tokens")->AsArray().value()->items.size(), 102400u);
  EXPECT_TRUE(spec.warnings.empty());
  EXPECT_FALSE(Build({.preset = "ds-v2-lite", .layers = 2}).warnings.empty());
}

TEST(SynthTable, GqaPresets) {
  const ModelSpec q = Build({.preset = "qwen3moe-tiny"});
  EXPECT_EQ(q.tensors.size(), 3u + 4 * 12);
  EXPECT_EQ(Find(q, "blk.0.attn_k_norm.weight")->ne, (std::vector<int64_t>{64}));
  EXPECT_EQ(Find(q, "blk.0.attn_v.weight")->type, GgmlType::kQ4_K);
  EXPECT_EQ(Find(q, "blk.2.attn_v.weight")->type, GgmlType::kQ6_K);  // use_more_bits(2, 4)
  EXPECT_EQ(FindKey(q, "qwen3moe.expert_feed_forward_length")->AsUint().value(), 128u);
  const ModelSpec m = Build({.preset = "mixtral-tiny"});
  EXPECT_EQ(m.tensors.size(), 3u + 4 * 10);
  // 8-expert rules: attn_v / attn_k Q8_0, attn_output Q5_K.
  EXPECT_EQ(Find(m, "blk.1.attn_v.weight")->type, GgmlType::kQ8_0);
  EXPECT_EQ(Find(m, "blk.1.attn_k.weight")->type, GgmlType::kQ8_0);
  EXPECT_EQ(Find(m, "blk.1.attn_output.weight")->type, GgmlType::kQ5_K);
  EXPECT_EQ(Find(m, "blk.1.ffn_gate_exps.weight")->ne, (std::vector<int64_t>{256, 512, 8}));
  EXPECT_EQ(FindKey(m, "llama.rope.dimension_count")->AsUint().value(), 32u);
}

TEST(SynthTable, OtherQuantMixes) {
  for (QuantMix mix : {QuantMix::kQ8_0, QuantMix::kF16, QuantMix::kBF16}) {
    const ModelSpec s = Build({.preset = "ds-tiny", .quant = mix});
    EXPECT_EQ(FindKey(s, "general.file_type")->AsUint().value(), QuantMixFileType(mix));
    for (const TensorSpec& t : s.tensors) {
      if (KeepsSourceType(t)) {
        EXPECT_EQ(t.type, GgmlType::kF32) << t.name;
      } else {
        EXPECT_EQ(t.type, mix == QuantMix::kQ8_0  ? GgmlType::kQ8_0
                          : mix == QuantMix::kF16 ? GgmlType::kF16
                                                  : GgmlType::kBF16)
            << t.name;
      }
    }
  }
}

// llama-quantize IQ4_XS without an imatrix: IQ4_XS by default, output Q6_K, ffn_down* Q5_K in the
// first eighth of the layers, rows of 128 values (not a multiple of 256) IQ4_NL; file type 30.
TEST(SynthTable, Iq4XsMix) {
  const ModelSpec v3 = Build({.preset = "ds-v3", .layers = 16, .quant = QuantMix::kIQ4_XS});
  EXPECT_EQ(FindKey(v3, "general.file_type")->AsUint().value(), 30u);
  EXPECT_EQ(Find(v3, "output.weight")->type, GgmlType::kQ6_K);
  EXPECT_EQ(Find(v3, "token_embd.weight")->type, GgmlType::kIQ4_XS);
  EXPECT_EQ(Find(v3, "blk.1.ffn_down.weight")->type, GgmlType::kQ5_K);  // 1 < 16 / 8
  EXPECT_EQ(Find(v3, "blk.2.ffn_down.weight")->type, GgmlType::kIQ4_XS);
  EXPECT_EQ(Find(v3, "blk.5.ffn_down_exps.weight")->type, GgmlType::kIQ4_XS);
  EXPECT_EQ(Find(v3, "blk.5.ffn_gate_exps.weight")->type, GgmlType::kIQ4_XS);
  EXPECT_EQ(Find(v3, "blk.5.attn_k_b.weight")->type, GgmlType::kIQ4_NL);  // ne[0] = 128
  EXPECT_EQ(Find(v3, "blk.5.ffn_gate_inp.weight")->type, GgmlType::kF32);
  const ModelSpec lite = Build({.preset = "ds-v2-lite", .quant = QuantMix::kIQ4_XS});
  EXPECT_EQ(Find(lite, "blk.5.ffn_down_exps.weight")->type, GgmlType::kIQ4_NL);  // ne[0] = 1408
  EXPECT_EQ(Find(lite, "blk.5.ffn_up_exps.weight")->type, GgmlType::kIQ4_XS);
  EXPECT_EQ(Find(lite, "blk.2.ffn_down_exps.weight")->type, GgmlType::kQ5_1);  // Q5_K's fallback
}

// llama-quantize Q3_K_M without an imatrix: Q3_K by default, output Q6_K, attn_v-like Q5_K for
// the first two then Q4_K, attn_output Q4_K, ffn_down* Q5_K below n_layer / 16 then Q4_K, rows
// of 128 values Q4_0 (Q3_K's fallback) or Q5_0 (Q4_K's); file type 12.
TEST(SynthTable, Q3KMMix) {
  const ModelSpec v3 = Build({.preset = "ds-v3", .layers = 32, .quant = QuantMix::kQ3_K_M});
  EXPECT_EQ(FindKey(v3, "general.file_type")->AsUint().value(), 12u);
  EXPECT_EQ(Find(v3, "output.weight")->type, GgmlType::kQ6_K);
  EXPECT_EQ(Find(v3, "token_embd.weight")->type, GgmlType::kQ3_K);
  EXPECT_EQ(Find(v3, "blk.1.ffn_down.weight")->type, GgmlType::kQ5_K);  // 1 < 32 / 16
  EXPECT_EQ(Find(v3, "blk.2.ffn_down.weight")->type, GgmlType::kQ4_K);
  EXPECT_EQ(Find(v3, "blk.5.ffn_down_exps.weight")->type, GgmlType::kQ4_K);
  EXPECT_EQ(Find(v3, "blk.5.ffn_down_shexp.weight")->type, GgmlType::kQ4_K);
  EXPECT_EQ(Find(v3, "blk.5.ffn_gate_exps.weight")->type, GgmlType::kQ3_K);
  EXPECT_EQ(Find(v3, "blk.5.ffn_up_exps.weight")->type, GgmlType::kQ3_K);
  EXPECT_EQ(Find(v3, "blk.5.attn_q_b.weight")->type, GgmlType::kQ3_K);
  EXPECT_EQ(Find(v3, "blk.5.attn_output.weight")->type, GgmlType::kQ4_K);
  EXPECT_EQ(Find(v3, "blk.5.attn_k_b.weight")->type, GgmlType::kQ4_0);  // ne[0] = 128
  EXPECT_EQ(Find(v3, "blk.5.ffn_gate_inp.weight")->type, GgmlType::kF32);
  // attn_kv_b (legacy layout): the first two Q5_K, then Q4_K.
  const ModelSpec legacy = Build(
      {.preset = "ds-v3", .layers = 4, .quant = QuantMix::kQ3_K_M, .mla = MlaLayout::kLegacy});
  EXPECT_EQ(Find(legacy, "blk.0.attn_kv_b.weight")->type, GgmlType::kQ5_K);
  EXPECT_EQ(Find(legacy, "blk.1.attn_kv_b.weight")->type, GgmlType::kQ5_K);
  EXPECT_EQ(Find(legacy, "blk.2.attn_kv_b.weight")->type, GgmlType::kQ4_K);
  // 8 experts (Mixtral): attn_v / attn_k Q8_0, attn_output Q5_K.
  const ModelSpec mix = Build({.preset = "mixtral-tiny", .quant = QuantMix::kQ3_K_M});
  EXPECT_EQ(Find(mix, "blk.1.attn_v.weight")->type, GgmlType::kQ8_0);
  EXPECT_EQ(Find(mix, "blk.1.attn_k.weight")->type, GgmlType::kQ8_0);
  EXPECT_EQ(Find(mix, "blk.1.attn_output.weight")->type, GgmlType::kQ5_K);
  EXPECT_EQ(Find(mix, "blk.1.ffn_gate_exps.weight")->type, GgmlType::kQ3_K);
  EXPECT_TRUE(QuantMixFromName("q3_k_m").ok());
}

// UD-Q2_K_XL-like: routed experts Q2_K, their down Q3_K in the first and last eighth of the
// layers; attention Q4_K (attn_v-like Q6_K); shared experts and the dense layers' FFN Q4_K / Q6_K
// down; token_embd Q4_K, output Q6_K; Q2_K / Q3_K rows of 1408 values fall back to Q4_0; file
// type 10.
TEST(SynthTable, UdQ2KXLMix) {
  const ModelSpec v3 = Build({.preset = "ds-v3", .layers = 16, .quant = QuantMix::kUdQ2_K_XL});
  EXPECT_EQ(FindKey(v3, "general.file_type")->AsUint().value(), 10u);
  EXPECT_EQ(Find(v3, "output.weight")->type, GgmlType::kQ6_K);
  EXPECT_EQ(Find(v3, "token_embd.weight")->type, GgmlType::kQ4_K);
  EXPECT_EQ(Find(v3, "blk.0.ffn_gate.weight")->type, GgmlType::kQ4_K);  // dense lead layers
  EXPECT_EQ(Find(v3, "blk.0.ffn_down.weight")->type, GgmlType::kQ6_K);
  EXPECT_EQ(Find(v3, "blk.3.ffn_gate_exps.weight")->type, GgmlType::kQ2_K);
  EXPECT_EQ(Find(v3, "blk.3.ffn_up_exps.weight")->type, GgmlType::kQ2_K);
  EXPECT_EQ(Find(v3, "blk.3.ffn_down_exps.weight")->type, GgmlType::kQ2_K);
  EXPECT_EQ(Find(v3, "blk.14.ffn_down_exps.weight")->type, GgmlType::kQ3_K);  // 14 >= 7 * 16 / 8
  EXPECT_EQ(Find(v3, "blk.14.ffn_gate_exps.weight")->type, GgmlType::kQ2_K);
  EXPECT_EQ(Find(v3, "blk.3.ffn_gate_shexp.weight")->type, GgmlType::kQ4_K);
  EXPECT_EQ(Find(v3, "blk.3.ffn_down_shexp.weight")->type, GgmlType::kQ6_K);
  EXPECT_EQ(Find(v3, "blk.3.attn_q_b.weight")->type, GgmlType::kQ4_K);
  EXPECT_EQ(Find(v3, "blk.3.attn_output.weight")->type, GgmlType::kQ4_K);
  EXPECT_EQ(Find(v3, "blk.3.attn_k_b.weight")->type, GgmlType::kQ5_0);  // Q4_K's fallback
  EXPECT_EQ(Find(v3, "blk.3.ffn_gate_inp.weight")->type, GgmlType::kF32);
  const ModelSpec lite = Build({.preset = "ds-v2-lite", .quant = QuantMix::kUdQ2_K_XL});
  EXPECT_EQ(Find(lite, "blk.5.ffn_down_exps.weight")->type, GgmlType::kQ4_0);  // ne[0] = 1408
  EXPECT_EQ(Find(lite, "blk.5.ffn_up_exps.weight")->type, GgmlType::kQ2_K);
  EXPECT_TRUE(QuantMixFromName("ud-q2_k_xl").ok());
}

// MXFP4_MOE (llama-quantize's file type 38): routed experts MXFP4, every other weight Q8_0,
// norms and the router F32.
TEST(SynthTable, Mxfp4MoeMix) {
  const ModelSpec v2 = Build({.preset = "ds-v2-lite", .layers = 3, .quant = QuantMix::kMXFP4_MOE});
  EXPECT_EQ(FindKey(v2, "general.file_type")->AsUint().value(), 38u);
  EXPECT_EQ(Find(v2, "blk.1.ffn_gate_exps.weight")->type, GgmlType::kMXFP4);
  EXPECT_EQ(Find(v2, "blk.1.ffn_up_exps.weight")->type, GgmlType::kMXFP4);
  EXPECT_EQ(Find(v2, "blk.1.ffn_down_exps.weight")->type, GgmlType::kMXFP4);  // 1408 = 44 x 32
  EXPECT_EQ(Find(v2, "blk.1.ffn_gate_shexp.weight")->type, GgmlType::kQ8_0);
  EXPECT_EQ(Find(v2, "blk.0.ffn_down.weight")->type, GgmlType::kQ8_0);
  EXPECT_EQ(Find(v2, "output.weight")->type, GgmlType::kQ8_0);
  EXPECT_EQ(Find(v2, "blk.1.ffn_gate_inp.weight")->type, GgmlType::kF32);
  EXPECT_EQ(QuantMixFromName("mxfp4_moe").value(), QuantMix::kMXFP4_MOE);
  EXPECT_STREQ(QuantMixName(QuantMix::kMXFP4_MOE), "MXFP4_MOE");
}

// Q4_0 (llama-quantize's file type 2 with an importance matrix, bartowski's Q4_0 files): Q4_0
// everywhere but the output (Q6_K) and every ffn_down of the first n_layer / 8 layers (Q4_1:
// DeepSeek-V2-Lite's 27 layers -> layers 0-2, the dense one, then routed and shared experts).
TEST(SynthTable, Q4_0Mix) {
  const ModelSpec v2 = Build({.preset = "ds-v2-lite", .quant = QuantMix::kQ4_0});
  EXPECT_EQ(FindKey(v2, "general.file_type")->AsUint().value(), 2u);
  EXPECT_EQ(Find(v2, "blk.0.ffn_down.weight")->type, GgmlType::kQ4_1);
  EXPECT_EQ(Find(v2, "blk.0.ffn_up.weight")->type, GgmlType::kQ4_0);
  EXPECT_EQ(Find(v2, "blk.2.ffn_down_exps.weight")->type, GgmlType::kQ4_1);  // 1408 = 44 x 32
  EXPECT_EQ(Find(v2, "blk.2.ffn_down_shexp.weight")->type, GgmlType::kQ4_1);
  EXPECT_EQ(Find(v2, "blk.2.ffn_gate_exps.weight")->type, GgmlType::kQ4_0);
  EXPECT_EQ(Find(v2, "blk.3.ffn_down_exps.weight")->type, GgmlType::kQ4_0);
  EXPECT_EQ(Find(v2, "blk.26.ffn_down_shexp.weight")->type, GgmlType::kQ4_0);
  EXPECT_EQ(Find(v2, "blk.3.attn_k_b.weight")->type, GgmlType::kQ4_0);  // 128 = 4 x 32
  EXPECT_EQ(Find(v2, "output.weight")->type, GgmlType::kQ6_K);
  EXPECT_EQ(Find(v2, "token_embd.weight")->type, GgmlType::kQ4_0);
  EXPECT_EQ(Find(v2, "blk.1.ffn_gate_inp.weight")->type, GgmlType::kF32);
  EXPECT_EQ(QuantMixFromName("q4_0").value(), QuantMix::kQ4_0);
  EXPECT_STREQ(QuantMixName(QuantMix::kQ4_0), "Q4_0");
}

// The UD-IQ mixes (Unsloth's dynamic DeepSeek shapes, quant_mix.cc): routed gate / up in the
// lattice type; routed down one step higher in the first 3 MoE layers (ds-v3: layers 3..5,
// after its 3 dense ones); shared experts Q6_K; dense FFN Q4_K / Q6_K down; attention Q4_K with
// attn_kv_b Q6_K; token_embd Q4_K; output Q6_K; rows of 128 or 1408 values fall back to IQ4_NL
// (ggml's fallback for the lattice types) or Q5_0 (Q4_K's).
struct UdIqCase {
  QuantMix mix;
  uint32_t file_type;
  GgmlType experts, down_early, down_rest;
};

TEST(SynthTable, UdIqMixes) {
  const UdIqCase cases[] = {
      {QuantMix::kUdIQ2_XXS, 19, GgmlType::kIQ2_XXS, GgmlType::kQ2_K, GgmlType::kIQ2_XXS},
      {QuantMix::kUdIQ1_M, 31, GgmlType::kIQ1_M, GgmlType::kIQ2_XXS, GgmlType::kIQ2_XXS},
      {QuantMix::kUdIQ1_S, 24, GgmlType::kIQ1_S, GgmlType::kIQ2_XXS, GgmlType::kIQ1_S},
  };
  for (const UdIqCase& c : cases) {
    SCOPED_TRACE(QuantMixName(c.mix));
    const ModelSpec v3 = Build({.preset = "ds-v3", .layers = 8, .quant = c.mix});
    EXPECT_EQ(FindKey(v3, "general.file_type")->AsUint().value(), c.file_type);
    EXPECT_EQ(Find(v3, "output.weight")->type, GgmlType::kQ6_K);
    EXPECT_EQ(Find(v3, "token_embd.weight")->type, GgmlType::kQ4_K);
    EXPECT_EQ(Find(v3, "blk.0.ffn_gate.weight")->type, GgmlType::kQ4_K);  // dense lead layers
    EXPECT_EQ(Find(v3, "blk.2.ffn_up.weight")->type, GgmlType::kQ4_K);
    EXPECT_EQ(Find(v3, "blk.2.ffn_down.weight")->type, GgmlType::kQ6_K);
    for (const char* l : {"3", "5", "6", "7"}) {
      const std::string b = std::string("blk.") + l + ".";
      EXPECT_EQ(Find(v3, b + "ffn_gate_exps.weight")->type, c.experts) << l;
      EXPECT_EQ(Find(v3, b + "ffn_up_exps.weight")->type, c.experts) << l;
      EXPECT_EQ(Find(v3, b + "ffn_gate_shexp.weight")->type, GgmlType::kQ6_K) << l;
      EXPECT_EQ(Find(v3, b + "ffn_down_shexp.weight")->type, GgmlType::kQ6_K) << l;
    }
    EXPECT_EQ(Find(v3, "blk.3.ffn_down_exps.weight")->type, c.down_early);
    EXPECT_EQ(Find(v3, "blk.5.ffn_down_exps.weight")->type, c.down_early);
    EXPECT_EQ(Find(v3, "blk.6.ffn_down_exps.weight")->type, c.down_rest);
    EXPECT_EQ(Find(v3, "blk.7.ffn_down_exps.weight")->type, c.down_rest);
    EXPECT_EQ(Find(v3, "blk.3.attn_q_b.weight")->type, GgmlType::kQ4_K);
    EXPECT_EQ(Find(v3, "blk.3.attn_output.weight")->type, GgmlType::kQ4_K);
    EXPECT_EQ(Find(v3, "blk.3.attn_k_b.weight")->type, GgmlType::kQ5_0);  // ne[0] = 128
    EXPECT_EQ(Find(v3, "blk.3.ffn_gate_inp.weight")->type, GgmlType::kF32);
    EXPECT_EQ(Find(v3, "blk.3.ffn_norm.weight")->type, GgmlType::kF32);
    const ModelSpec legacy =
        Build({.preset = "ds-v3", .layers = 4, .quant = c.mix, .mla = MlaLayout::kLegacy});
    EXPECT_EQ(Find(legacy, "blk.3.attn_kv_b.weight")->type, GgmlType::kQ6_K);
    // ds-tiny: one dense layer, so layers 1..3 are all "early"; its routed down rows are 128
    // values, ds-v2-lite's 1408: IQ4_NL (or Q4_0 for Q2_K) instead.
    const ModelSpec tiny = Build({.preset = "ds-tiny", .quant = c.mix});
    EXPECT_EQ(Find(tiny, "blk.1.ffn_gate_exps.weight")->type, c.experts);
    EXPECT_EQ(Find(tiny, "blk.3.ffn_down_exps.weight")->type,
              c.down_early == GgmlType::kQ2_K ? GgmlType::kQ4_0 : GgmlType::kIQ4_NL);
    const ModelSpec lite = Build({.preset = "ds-v2-lite", .quant = c.mix});
    EXPECT_EQ(Find(lite, "blk.9.ffn_down_exps.weight")->type, GgmlType::kIQ4_NL);
    EXPECT_EQ(Find(lite, "blk.9.ffn_up_exps.weight")->type, c.experts);
    // Non-DeepSeek MoE (no dense lead, no shared experts): the first MoE layer is 0.
    const ModelSpec qwen = Build({.preset = "qwen3moe-tiny", .quant = c.mix});
    EXPECT_EQ(Find(qwen, "blk.0.ffn_gate_exps.weight")->type, c.experts);
  }
  EXPECT_TRUE(QuantMixFromName("ud-iq1_s").ok());
  EXPECT_TRUE(QuantMixFromName("UD-IQ1_M").ok());
  EXPECT_TRUE(QuantMixFromName("Ud-Iq2_xxs").ok());
  EXPECT_FALSE(QuantMixFromName("IQ1_S").ok());  // only the UD shapes are offered for IQ1
}

// llama-quantize's IQ2_XS / IQ2_M / IQ3_XXS / IQ3_M with an importance matrix (quant_mix.cc
// LlamaIqType). Every tensor type of make-model's four mixes was checked against llama-quantize
// 0a50d9909's files of the same ds-v2-lite-tiny model in both MLA layouts (and every lattice
// block with an all-ones imatrix, docs/PERFORMANCE.md); here the rules at DeepSeek-V3 widths
// (8 layers: the first n_layer / 8 = 1 ffn_down tensor in llama's order, blk.0's dense one, is
// the IQ2 mixes' step up) and V2-Lite's (attn_q without q_lora; 27 / 8 = 3 ffn_down tensors:
// blk.0.ffn_down, blk.1.ffn_down_exps, blk.1.ffn_down_shexp).
struct LlamaIqCase {
  QuantMix mix;
  uint32_t file_type;
  GgmlType base, output, embd, first_down, attn_output, kv_b, v2_attn_q;
};

TEST(SynthTable, LlamaIqMixes) {
  using T = GgmlType;
  const LlamaIqCase cases[] = {
      {QuantMix::kIQ2_XS, 20, T::kIQ2_XS, T::kQ5_K, T::kQ2_K, T::kQ2_K, T::kIQ2_XS, T::kQ4_K,
       T::kIQ2_XS},
      {QuantMix::kIQ2_M, 29, T::kIQ2_S, T::kQ5_K, T::kIQ3_S, T::kIQ3_S, T::kIQ3_S, T::kQ4_K,
       T::kIQ2_S},
      {QuantMix::kIQ3_XXS, 23, T::kIQ3_XXS, T::kQ5_K, T::kIQ3_S, T::kIQ3_XXS, T::kIQ3_S,
       T::kIQ3_XXS, T::kIQ2_S},
      {QuantMix::kIQ3_M, 27, T::kIQ3_S, T::kQ6_K, T::kIQ3_S, T::kQ4_K, T::kQ4_K, T::kQ4_K,
       T::kIQ3_S},
  };
  for (const LlamaIqCase& c : cases) {
    SCOPED_TRACE(QuantMixName(c.mix));
    EXPECT_EQ(QuantMixFromName(QuantMixName(c.mix)).value(), c.mix);
    const ModelSpec v3 =
        Build({.preset = "ds-v3", .layers = 8, .quant = c.mix, .mla = MlaLayout::kLegacy});
    EXPECT_EQ(FindKey(v3, "general.file_type")->AsUint().value(), c.file_type);
    EXPECT_EQ(Find(v3, "output.weight")->type, c.output);
    EXPECT_EQ(Find(v3, "token_embd.weight")->type, c.embd);
    EXPECT_EQ(Find(v3, "blk.0.ffn_down.weight")->type, c.first_down);
    EXPECT_EQ(Find(v3, "blk.1.ffn_down.weight")->type,
              c.mix == QuantMix::kIQ3_M ? T::kIQ3_S : c.base);
    for (const char* n : {"ffn_gate_exps", "ffn_up_exps", "ffn_down_exps", "ffn_gate_shexp",
                          "ffn_down_shexp", "attn_q_a", "attn_q_b", "attn_kv_a_mqa"}) {
      EXPECT_EQ(Find(v3, std::string("blk.5.") + n + ".weight")->type, c.base) << n;
    }
    EXPECT_EQ(Find(v3, "blk.5.attn_output.weight")->type, c.attn_output);
    EXPECT_EQ(Find(v3, "blk.5.attn_kv_b.weight")->type, c.kv_b);
    EXPECT_EQ(Find(v3, "blk.5.ffn_gate_inp.weight")->type, T::kF32);
    const ModelSpec split = Build({.preset = "ds-v3", .layers = 4, .quant = c.mix});
    EXPECT_EQ(Find(split, "blk.3.attn_k_b.weight")->type, T::kIQ4_NL);  // ne[0] = 128
    const ModelSpec lite = Build({.preset = "ds-v2-lite", .quant = c.mix});
    EXPECT_EQ(Find(lite, "blk.0.attn_q.weight")->type, c.v2_attn_q);
    if (c.mix == QuantMix::kIQ2_XS || c.mix == QuantMix::kIQ2_M) {
      EXPECT_EQ(Find(lite, "blk.1.ffn_down_shexp.weight")->type, c.first_down);  // rank 2
      EXPECT_EQ(Find(lite, "blk.2.ffn_down_shexp.weight")->type, c.base);        // rank 4
    }
  }
}

TEST(SynthTable, BadArguments) {
  auto bad = BuildModelSpec({.preset = "ds-v4"});
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("ds-tiny"), std::string::npos);  // lists presets
  EXPECT_FALSE(BuildModelSpec({.preset = "ds-v3", .layers = -1}).ok());
  EXPECT_FALSE(BuildModelSpec({.preset = "ds-v3", .layers = 5000}).ok());
  EXPECT_FALSE(BuildModelSpec({.preset = "ds-v3", .layers = 27}).ok());  // llama.cpp: V2-Lite
  EXPECT_FALSE(QuantMixFromName("Q3_K_S").ok());
  EXPECT_TRUE(QuantMixFromName("q4_k_m").ok());
  EXPECT_FALSE(MlaLayoutFromName("fused").ok());
  // Fewer layers than leading dense blocks: all dense, still valid.
  const ModelSpec two = Build({.preset = "ds-v3", .layers = 2});
  EXPECT_EQ(FindKey(two, "deepseek2.leading_dense_block_count")->AsUint().value(), 2u);
}

}  // namespace
}  // namespace moesplit::synth
