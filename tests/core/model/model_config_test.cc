// ModelConfig from GGUF metadata (the llama.cpp oracle file and make-model presets written
// metadata-only), the YaRN / attention-scale derivation, and ModelWeights' missing-tensor report.
#include "core/model/model_config.h"

#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "core/gguf/gguf_writer.h"
#include "core/model/model_weights.h"
#include "core/synth/model_spec.h"
#include "tests/testdata.h"

namespace moesplit {
namespace {

// Writes the preset's metadata (and no tensors) and opens it.
std::unique_ptr<gguf::GgufFile> MetadataOnly(const std::string& preset,
                                             synth::MlaLayout mla = synth::MlaLayout::kSplit) {
  synth::BuildOptions o;
  o.preset = preset;
  o.layers = 4;
  o.mla = mla;
  const synth::ModelSpec spec = synth::BuildModelSpec(o).value();
  const std::string path = testing::ScratchDir() + "/meta-" + preset + ".gguf";
  gguf::GgufWriter w(path);
  for (const gguf::KeyValue& kv : spec.metadata) w.AddKeyValue(kv.key, kv.value);
  EXPECT_TRUE(w.Begin().ok());
  EXPECT_TRUE(w.Finish().ok());
  return gguf::GgufFile::Open(path).value();
}

TEST(ModelConfigTest, OracleDsTiny) {
  MOESPLIT_REQUIRE_TESTDATA();
  auto f = gguf::GgufFile::Open(testing::TestDataPath("models/ds-tiny-Q4_K_M.gguf")).value();
  const ModelConfig c = ModelConfig::FromGguf(*f).value();
  EXPECT_EQ(c.arch, ModelArch::kDeepseek2);
  EXPECT_EQ(c.n_vocab, 1024);
  EXPECT_EQ(c.n_embd, 256);
  EXPECT_EQ(c.n_layer, 4);
  EXPECT_EQ(c.n_head, 4);
  EXPECT_EQ(c.q_lora_rank, 64);
  EXPECT_EQ(c.kv_lora_rank, 64);
  EXPECT_TRUE(c.mla_split);
  EXPECT_EQ(c.head_dim_k, 48);  // key_length_mla: qk_nope 32 + rope 16
  EXPECT_EQ(c.head_dim_v, 32);
  EXPECT_EQ(c.qk_nope, 32);
  EXPECT_EQ(c.qk_rope, 16);
  EXPECT_EQ(c.n_expert, 16);
  EXPECT_EQ(c.n_expert_used, 4);
  EXPECT_EQ(c.n_expert_shared, 1);
  EXPECT_EQ(c.n_expert_groups, 4);
  EXPECT_EQ(c.n_group_used, 2);
  EXPECT_EQ(c.n_dense_lead, 1);
  EXPECT_EQ(c.gating, GatingFunc::kSigmoid);
  EXPECT_TRUE(c.expert_weights_norm);
  EXPECT_FLOAT_EQ(c.expert_weights_scale, 2.5f);
  EXPECT_EQ(c.rope_ext_factor, 0.0f);
  EXPECT_FLOAT_EQ(c.kq_scale, 1.0f / std::sqrt(48.0f));
  EXPECT_FALSE(c.IsMoeLayer(0));
  EXPECT_TRUE(c.IsMoeLayer(1));
  EXPECT_TRUE(ModelWeights::Resolve(*f, c).ok());
}

TEST(ModelConfigTest, DeepseekV3YarnScales) {
  // V3: YaRN factor s = 40, stored yarn_log_multiplier 0.1 = 0.1 * mscale_all_dim (M = 1).
  // kq_scale = (1 + 0.1 * M * ln 40)^2 / sqrt(192) = 1.368888^2 / 13.8564 = 0.135233;
  // the rope magnitude llama.cpp passes cancels ggml's (1 + 0.1 ln 40): 1 / 1.368888.
  const ModelConfig c = ModelConfig::FromGguf(*MetadataOnly("ds-v3")).value();
  EXPECT_EQ(c.rope_scaling, RopeScalingType::kYarn);
  EXPECT_FLOAT_EQ(c.rope_freq_scale, 1.0f / 40.0f);
  EXPECT_EQ(c.rope_ext_factor, 1.0f);
  EXPECT_EQ(c.yarn_orig_ctx, 4096);
  EXPECT_EQ(c.head_dim_k, 192);
  EXPECT_EQ(c.n_rot, 64);
  EXPECT_NEAR(c.kq_scale, 0.135233f, 1e-5);
  EXPECT_NEAR(c.rope_attn_factor_eff, 1.0f / 1.368888f, 1e-5);
  EXPECT_EQ(c.n_expert_groups, 8);
  EXPECT_EQ(c.n_group_used, 4);
}

TEST(ModelConfigTest, KimiK2YarnAndRouting) {
  // Kimi-K2: YaRN factor 32, mscale_all_dim 1 (stored 0.1), rope base 50000:
  // kq_scale = (1 + 0.1 * ln 32)^2 / sqrt(192) = 1.346574^2 / 13.856406 = 0.130861.
  const ModelConfig c = ModelConfig::FromGguf(*MetadataOnly("kimi-k2")).value();
  EXPECT_EQ(c.rope_scaling, RopeScalingType::kYarn);
  EXPECT_FLOAT_EQ(c.rope_freq_scale, 1.0f / 32.0f);
  EXPECT_FLOAT_EQ(c.rope_freq_base, 50000.0f);
  EXPECT_EQ(c.yarn_orig_ctx, 4096);
  EXPECT_NEAR(c.kq_scale, 0.130861f, 1e-5);
  EXPECT_NEAR(c.rope_attn_factor_eff, 1.0f / 1.346574f, 1e-5);
  EXPECT_EQ(c.n_head, 64);
  EXPECT_EQ(c.n_expert, 384);
  EXPECT_EQ(c.n_expert_used, 8);
  EXPECT_EQ(c.n_expert_groups, 1);
  EXPECT_EQ(c.gating, GatingFunc::kSigmoid);
  EXPECT_FLOAT_EQ(c.expert_weights_scale, 2.827f);
  EXPECT_FALSE(c.IsMoeLayer(0));
  EXPECT_TRUE(c.IsMoeLayer(1));
}

TEST(ModelConfigTest, DeepseekV2LiteNoQLoraLegacyStyleScales) {
  // V2-Lite: no q_lora, softmax, mscale_all_dim 0.707 (stored 0.0707):
  // kq_scale = (1 + 0.1 * 0.707 * ln 40)^2 / sqrt(192) = 1.260808^2 / 13.8564 = 0.114722.
  const ModelConfig c =
      ModelConfig::FromGguf(*MetadataOnly("ds-v2-lite", synth::MlaLayout::kLegacy)).value();
  EXPECT_EQ(c.q_lora_rank, 0);
  EXPECT_FALSE(c.mla_split);
  EXPECT_EQ(c.head_dim_k, 192);
  EXPECT_EQ(c.head_dim_v, 128);
  EXPECT_EQ(c.gating, GatingFunc::kSoftmax);
  EXPECT_NEAR(c.kq_scale, 0.114722f, 2e-5);
  EXPECT_NEAR(c.rope_attn_factor_eff, 1.0f / 1.368888f, 1e-5);
}

TEST(ModelConfigTest, Qwen3MoeAndMixtral) {
  const ModelConfig q = ModelConfig::FromGguf(*MetadataOnly("qwen3moe-tiny")).value();
  EXPECT_EQ(q.arch, ModelArch::kQwen3Moe);
  EXPECT_EQ(q.n_head_kv, 2);
  EXPECT_EQ(q.head_dim_k, 64);
  EXPECT_EQ(q.n_ff_exp, 128);
  EXPECT_TRUE(q.expert_weights_norm);
  EXPECT_FLOAT_EQ(q.kq_scale, 1.0f / 8.0f);
  const ModelConfig m = ModelConfig::FromGguf(*MetadataOnly("mixtral-tiny")).value();
  EXPECT_EQ(m.arch, ModelArch::kLlama);
  EXPECT_EQ(m.n_expert, 8);
  EXPECT_EQ(m.n_ff_exp, 512);
  EXPECT_EQ(m.head_dim_k, 32);
}

TEST(ModelConfigTest, MissingTensorsListedTogether) {
  auto f = MetadataOnly("ds-tiny");
  const ModelConfig c = ModelConfig::FromGguf(*f).value();
  const Status s = ModelWeights::Resolve(*f, c).status();
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("missing token_embd.weight"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("missing output_norm.weight"), std::string::npos);
  EXPECT_NE(s.message().find("missing blk.0.attn_q_a.weight"), std::string::npos);
  EXPECT_NE(s.message().find("tensor problem(s)"), std::string::npos);
}

// A ds-tiny file whose routed gate experts are `type` (zero bytes: the values do not matter to
// Resolve).
Status ResolveWithGateExperts(GgmlType type, const std::string& file) {
  synth::BuildOptions o;
  o.preset = "ds-tiny";
  o.layers = 4;
  o.quant = synth::QuantMix::kQ8_0;
  synth::ModelSpec spec = synth::BuildModelSpec(o).value();
  for (synth::TensorSpec& t : spec.tensors) {
    if (t.name.find("ffn_gate_exps") != std::string::npos) t.type = type;
  }
  const std::string path = testing::ScratchDir() + "/" + file;
  gguf::GgufWriter w(path);
  for (const gguf::KeyValue& kv : spec.metadata) w.AddKeyValue(kv.key, kv.value);
  for (const synth::TensorSpec& t : spec.tensors) w.AddTensor(t.name, t.type, t.ne);
  MOESPLIT_RETURN_IF_ERROR(w.Begin());
  for (const synth::TensorSpec& t : spec.tensors) {
    const std::vector<uint8_t> zeros(t.Bytes(), 0);
    MOESPLIT_RETURN_IF_ERROR(w.WriteTensorData(zeros.data(), zeros.size()));
  }
  MOESPLIT_RETURN_IF_ERROR(w.Finish());
  auto f = gguf::GgufFile::Open(path).value();
  return ModelWeights::Resolve(*f, ModelConfig::FromGguf(*f).value()).status();
}

// Every tensor present and well shaped, some in a type moesplit cannot compute with (TQ2_0:
// no decoder, no kernel): the report names the type as not supported yet, and does not send the
// user to re-convert the file.
TEST(ModelConfigTest, UnsupportedTensorTypeIsNotAConversionProblem) {
  const Status s = ResolveWithGateExperts(GgmlType::kTQ2_0, "tq2_0-experts.gguf");
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("blk.1.ffn_gate_exps.weight has type tq2_0"), std::string::npos)
      << s.message();
  EXPECT_NE(s.message().find("tq2_0: not supported by moesplit yet"), std::string::npos)
      << s.message();
  EXPECT_EQ(s.message().find("convert_hf_to_gguf"), std::string::npos) << s.message();
}

// The lattice types with CPU kernels (Unsloth's UD-IQ2_XXS / UD-IQ1_M / UD-IQ1_S experts, the
// IQ3_XXS / IQ3_S / IQ2_XS / IQ2_S of llama.cpp's IQ2 / IQ3 mixes) and MXFP4 (MXFP4_MOE
// files) load.
TEST(ModelConfigTest, LatticeTypesWithKernelsResolve) {
  for (GgmlType t : {GgmlType::kIQ2_XXS, GgmlType::kIQ1_S, GgmlType::kIQ1_M, GgmlType::kIQ3_XXS,
                     GgmlType::kIQ3_S, GgmlType::kIQ2_XS, GgmlType::kIQ2_S, GgmlType::kMXFP4}) {
    const Status s = ResolveWithGateExperts(t, std::string(TypeName(t)) + "-experts.gguf");
    EXPECT_TRUE(s.ok()) << TypeName(t) << ": " << s.message();
  }
}

TEST(ModelConfigTest, MissingTensorsStillPointAtTheConverter) {
  auto f = MetadataOnly("ds-tiny");
  const Status s = ModelWeights::Resolve(*f, ModelConfig::FromGguf(*f).value()).status();
  EXPECT_NE(s.message().find("convert_hf_to_gguf"), std::string::npos) << s.message();
  EXPECT_EQ(s.message().find("not supported by moesplit yet"), std::string::npos);
}

TEST(ModelConfigTest, UnsupportedArchitecture) {
  MOESPLIT_REQUIRE_TESTDATA();
  auto f = gguf::GgufFile::Open(testing::TestDataPath("vocab/ggml-vocab-gpt-2.gguf")).value();
  const Status s = ModelConfig::FromGguf(*f).status();
  EXPECT_EQ(s.code(), StatusCode::kUnimplemented);
  EXPECT_NE(s.message().find("gpt2"), std::string::npos);
}

}  // namespace
}  // namespace moesplit
