#include <gtest/gtest.h>

#include "core/model/tensor_role.h"

namespace moesplit {
namespace {

TEST(TensorRole, DeepSeekNames) {
  EXPECT_EQ(ClassifyTensor("blk.3.ffn_up_exps.weight"), TensorRole::kRoutedExperts);
  EXPECT_EQ(ClassifyTensor("blk.3.ffn_down_shexp.weight"), TensorRole::kSharedExperts);
  EXPECT_EQ(ClassifyTensor("blk.0.ffn_gate.weight"), TensorRole::kDenseFfn);
  EXPECT_EQ(ClassifyTensor("blk.3.ffn_gate_inp.weight"), TensorRole::kRouter);
  EXPECT_EQ(ClassifyTensor("blk.3.exp_probs_b.bias"), TensorRole::kRouter);
  EXPECT_EQ(ClassifyTensor("blk.3.attn_kv_a_mqa.weight"), TensorRole::kAttention);
  EXPECT_EQ(ClassifyTensor("blk.3.attn_k_b.weight"), TensorRole::kAttention);
  EXPECT_EQ(ClassifyTensor("blk.3.attn_kv_a_norm.weight"), TensorRole::kNorms);
  EXPECT_EQ(ClassifyTensor("blk.3.ffn_norm.weight"), TensorRole::kNorms);
  EXPECT_EQ(ClassifyTensor("output_norm.weight"), TensorRole::kNorms);
  EXPECT_EQ(ClassifyTensor("token_embd.weight"), TensorRole::kEmbeddings);
  EXPECT_EQ(ClassifyTensor("output.weight"), TensorRole::kOutput);
  EXPECT_EQ(ClassifyTensor("rope_freqs.weight"), TensorRole::kOther);
  EXPECT_EQ(ClassifyTensor("blk.1.ffn_gate.3.weight"), TensorRole::kRoutedExperts);  // old Mixtral
}

TEST(TensorRole, LayerIndex) {
  EXPECT_EQ(LayerOfTensor("blk.60.ffn_up_exps.weight"), 60);
  EXPECT_EQ(LayerOfTensor("token_embd.weight"), -1);
  EXPECT_EQ(LayerOfTensor("blk.x.attn_q.weight"), -1);
  EXPECT_EQ(LayerOfTensor("blk."), -1);
}

}  // namespace
}  // namespace moesplit
