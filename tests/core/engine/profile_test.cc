// Session::set_profile: what the phases of bench --verbose count, on the llama.cpp-made tiny
// DeepSeek model (MLA, 1 dense + MoE layers with a shared expert).
#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

#include "core/engine/engine.h"
#include "tests/testdata.h"

namespace moesplit::engine {
namespace {

uint64_t Bytes(const TensorView& t) { return Present(t) ? t.nbytes : 0; }

TEST(Profile, CountsPhasesTokensAndBytes) {
  MOESPLIT_REQUIRE_TESTDATA();
  StatusOr<std::unique_ptr<Model>> model =
      Model::Load(moesplit::testing::TestDataPath("models/ds-tiny-Q4_K_M.gguf"));
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  const ModelConfig& c = (*model)->config();
  const ModelWeights& w = (*model)->weights();
  Session s(**model, {.ctx_size = 64, .n_threads = 2});
  const std::vector<int32_t> prompt = {1, 5, 9, 200, 31, 7, 64, 11};
  StatusOr<std::vector<float>> plain = s.Eval(prompt, false);
  ASSERT_TRUE(plain.ok());

  // The same evaluation with a profile attached: the same logits, and every phase counted.
  Profile p;
  s.Reset();
  s.set_profile(&p);
  StatusOr<std::vector<float>> profiled = s.Eval(prompt, false);
  ASSERT_TRUE(profiled.ok());
  EXPECT_EQ(*plain, *profiled);
  for (int32_t t : {3, 4, 5}) ASSERT_TRUE(s.Eval({&t, 1}, false).ok());
  s.set_profile(nullptr);

  const int64_t n_evals = 4, n_layer = c.n_layer;
  int64_t n_moe = 0;
  for (int64_t il = 0; il < n_layer; ++il) n_moe += c.IsMoeLayer(il) ? 1 : 0;
  ASSERT_GT(n_moe, 0);
  ASSERT_LT(n_moe, n_layer);  // the model has a dense layer too
  EXPECT_EQ(p.tokens, 11);
  EXPECT_EQ(p.evals, n_evals);
  EXPECT_EQ(p[Phase::kEmbed].calls, n_evals);
  EXPECT_EQ(p[Phase::kEmbed].bytes, 11 * w.token_embd.nbytes / c.n_vocab);
  EXPECT_EQ(p[Phase::kAttnProj].calls, n_evals * n_layer);
  EXPECT_EQ(p[Phase::kAttnCore].calls, n_evals * n_layer);
  EXPECT_EQ(p[Phase::kAttnOut].calls, n_evals * n_layer);
  EXPECT_EQ(p[Phase::kNorm].calls, n_evals * (2 * n_layer + 1));
  EXPECT_EQ(p[Phase::kRouter].calls, n_evals * n_moe);
  EXPECT_EQ(p[Phase::kExperts].calls, n_evals * n_moe);
  EXPECT_EQ(p[Phase::kDenseFfn].calls, n_evals * (n_layer - n_moe));
  EXPECT_EQ(p[Phase::kOutput].calls, n_evals);
  EXPECT_EQ(p[Phase::kOutput].bytes, n_evals * w.output.nbytes);
  // per_expert: one expert of every MoE layer.
  uint64_t attn_out = 0, router = 0, shared = 0, per_expert = 0;
  for (int64_t il = 0; il < n_layer; ++il) {
    const LayerWeights& l = w.layers[static_cast<size_t>(il)];
    attn_out += l.attn_output.nbytes;
    router += Bytes(l.ffn_gate_inp);
    shared += Bytes(l.ffn_gate_shexp) + Bytes(l.ffn_up_shexp) + Bytes(l.ffn_down_shexp);
    if (c.IsMoeLayer(il)) {  // Q4_K_M: the down projections' types differ between layers
      per_expert += (l.ffn_gate_exps.nbytes + l.ffn_up_exps.nbytes + l.ffn_down_exps.nbytes) /
                    static_cast<uint64_t>(c.n_expert);
    }
  }
  EXPECT_EQ(p[Phase::kAttnOut].bytes, n_evals * attn_out);
  EXPECT_EQ(p[Phase::kRouter].bytes, n_evals * router);
  // Routed experts: distinct ones per layer and evaluation, k..min(E, 8k) for the prompt and
  // exactly k for a decode token (top-k ids are distinct).
  const uint64_t k = static_cast<uint64_t>(c.n_expert_used), E = c.n_expert;
  const uint64_t decode = 3 * (k * per_expert + shared);
  const uint64_t routed_prompt = p[Phase::kExperts].bytes - decode - shared;
  EXPECT_GE(routed_prompt, k * per_expert);
  EXPECT_LE(routed_prompt, std::min<uint64_t>(E, 8 * k) * per_expert);
  // The phases sit inside the Eval calls.
  EXPECT_LE(p.phase_ns(), p.eval_ns);
  EXPECT_GT(p[Phase::kExperts].ns, 0u);
}

TEST(Profile, DetachedSessionLeavesItAlone) {
  MOESPLIT_REQUIRE_TESTDATA();
  StatusOr<std::unique_ptr<Model>> model =
      Model::Load(moesplit::testing::TestDataPath("models/ds-tiny-Q4_K_M.gguf"));
  ASSERT_TRUE(model.ok());
  Session s(**model, {.ctx_size = 16, .n_threads = 1});
  Profile p;
  s.set_profile(&p);
  const int32_t t = 7;
  ASSERT_TRUE(s.Eval({&t, 1}, false).ok());
  s.set_profile(nullptr);
  const Profile before = p;
  ASSERT_TRUE(s.Eval({&t, 1}, false).ok());
  EXPECT_EQ(p.tokens, before.tokens);
  EXPECT_EQ(p.eval_ns, before.eval_ns);
  EXPECT_EQ(p[Phase::kExperts].calls, before[Phase::kExperts].calls);
  p.Reset();
  EXPECT_EQ(p.tokens, 0);
  EXPECT_EQ(p.phase_ns(), 0u);
}

}  // namespace
}  // namespace moesplit::engine
