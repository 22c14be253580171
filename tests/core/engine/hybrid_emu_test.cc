// The hybrid CPU/GPU pass over CudaBackend on the emulated CUDA device (gpu_kernels/emu): the
// real CUDA kernels, streams, events and host functions of the split, compiled by the host
// compiler, against the CPU pass (llama.cpp-checked) on toy models at DeepSeek's MLA widths:
// ds-tiny's structure (experts on the CPU and in device memory; split and legacy MLA layouts, the
// latter also with sharpened attention) and V2-Lite's. llama.cpp's own
// logits (shared/testdata's ds-tiny) cannot be the oracle here: that model's latent is 64 + 16
// wide, and the CUDA MLA kernels take only DeepSeek's 512 + 64.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <initializer_list>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "core/base/float16.h"
#include "core/engine/cuda_backend.h"
#include "core/engine/engine.h"
#include "core/gguf/gguf_file.h"
#include "core/gguf/gguf_writer.h"
#include "core/synth/model_spec.h"
#include "core/synth/model_writer.h"
#include "cpu_kernels/quant/quant.h"
#include "tests/core/engine/hybrid_session.h"
#include "tests/core/engine/logits_util.h"
#include "tests/testdata.h"

namespace moesplit::engine {
namespace {

// Whole-model runs that cost minutes on the emulated device under ASan (~10x the release
// build's time: 203 s for the batched test alone) skip in the sanitizer build; the release
// build runs them on every schedule, and their host code (block tables, gathers, the split's
// queue) runs under ASan in test_engine's HostBackend tests.
#ifdef MOESPLIT_SANITIZER_BUILD
#define MOESPLIT_SKIP_UNDER_SANITIZER() \
  GTEST_SKIP() << "runs in the release build (minutes on the emulated device under ASan)"
#else
#define MOESPLIT_SKIP_UNDER_SANITIZER() (void)0
#endif

using moesplit::testing::Pearson;

std::unique_ptr<CudaBackend> Device() {
  auto b = CudaBackend::Create(0);
  EXPECT_TRUE(b.ok()) << b.status().ToString();
  return b.ok() ? std::move(*b) : nullptr;
}

// A toy model at DeepSeek's real MLA widths (kv_lora 512 + rope 64 = the 576-wide latent rows the
// CUDA kernels are built for; shared/testdata's ds-tiny has 64 + 16 and cannot run on them).
std::string WriteMla576(const char* preset, const char* tag, synth::QuantMix quant,
                        int64_t layers = 0, synth::MlaLayout mla = synth::MlaLayout::kSplit) {
  synth::BuildOptions bo;
  bo.preset = preset;
  bo.layers = layers;
  bo.quant = quant;
  bo.mla = mla;
  synth::ModelHparams h = synth::FindPreset(preset).value();
  h.kv_lora = 512, h.qk_nope = 128, h.qk_rope = 64, h.v_head = 128;
  h.n_head = 16;
  bo.hparams = h;
  const synth::ModelSpec spec = synth::BuildModelSpec(bo).value();
  synth::WriteOptions wo;
  wo.path =
      testing::ScratchDir() + "/hybrid-emu-" + tag + "." + std::to_string(::getpid()) + ".gguf";
  wo.seed = 7;
  wo.threads = 2;
  wo.show_progress = false;
  EXPECT_TRUE(synth::WriteModel(spec, wo).ok());
  return wo.path;
}

// A copy of the GGUF at `src` in `path`: its metadata, each tensor t in type_of(t), its data
// written by write(t, type_of(t), writer).
template <typename TypeOf, typename Write>
std::string RewrittenCopy(const std::string& src, const std::string& path, TypeOf type_of,
                          Write write) {
  std::unique_ptr<gguf::GgufFile> in = gguf::GgufFile::Open(src).value();
  gguf::GgufWriter w(path);
  for (const gguf::KeyValue& kv : in->metadata()) w.AddKeyValue(kv.key, kv.value);
  for (const gguf::TensorInfo& t : in->tensors()) {
    w.AddTensor(t.name, type_of(t), std::vector<int64_t>(t.ne.begin(), t.ne.begin() + t.n_dims));
  }
  EXPECT_TRUE(w.Begin().ok());
  for (const gguf::TensorInfo& t : in->tensors()) write(t, type_of(t), w);
  EXPECT_TRUE(w.Finish().ok());
  return path;
}

// A copy of the F16 model at `src` with the f16 values of the tensors whose names contain one of
// `sharpen` multiplied by 16 (exact in f16), so that attention is far from uniform: with
// make-model's N(0, 0.02) weights the scores are so small that a wrong key map (e.g. W_kb
// untransposed) changes the logits by less than the Pearson floor below.
std::string SharpenedCopy(const std::string& src, std::initializer_list<const char*> sharpen) {
  return RewrittenCopy(
      src, src + ".sharp.gguf", [](const gguf::TensorInfo& t) { return t.type; },
      [&](const gguf::TensorInfo& t, GgmlType, gguf::GgufWriter& w) {
        std::vector<uint8_t> bytes(t.data, t.data + t.nbytes);
        bool scale = false;
        for (const char* part : sharpen) scale |= t.name.find(part) != std::string::npos;
        if (scale) {
          EXPECT_EQ(t.type, GgmlType::kF16) << t.name;
          for (size_t i = 0; i + 1 < bytes.size(); i += 2) {
            uint16_t h;
            std::memcpy(&h, &bytes[i], 2);
            h = Fp32ToFp16(Fp16ToFp32(h) * 16.0f);
            std::memcpy(&bytes[i], &h, 2);
          }
        }
        EXPECT_TRUE(w.WriteTensorData(bytes.data(), bytes.size()).ok());
      });
}

// A copy of the F16 model at `src` with every weight whose name contains retype[i].first
// requantized to retype[i].second (the first match wins; rows not a multiple of 256 stay F16).
std::string RequantizedCopy(const std::string& src,
                            std::initializer_list<std::pair<const char*, GgmlType>> retype) {
  auto target = [&](const gguf::TensorInfo& t) {
    for (const auto& [part, type] : retype) {
      if (t.name.find(part) != std::string::npos && t.type == GgmlType::kF16 && t.n_dims >= 2 &&
          t.ne[0] % 256 == 0) {
        return type;
      }
    }
    return t.type;
  };
  return RewrittenCopy(
      src, src + ".requant.gguf", target,
      [](const gguf::TensorInfo& t, GgmlType to, gguf::GgufWriter& w) {
        if (to == t.type) {
          EXPECT_TRUE(w.WriteTensorData(t.data, t.nbytes).ok());
          return;
        }
        const int64_t cols = t.ne[0], rows = t.NumElements() / cols;
        std::vector<float> row(cols);
        std::vector<uint32_t> q((RowBytes(to, cols) + 3) / 4);  // 4-byte aligned for QuantizeRow
        for (int64_t r = 0; r < rows; ++r) {
          const auto* h = reinterpret_cast<const uint16_t*>(t.data) + r * cols;
          for (int64_t c = 0; c < cols; ++c) row[c] = Fp16ToFp32(h[c]);
          quant::QuantizeRow(to, row.data(), q.data(), cols);
          EXPECT_TRUE(w.WriteTensorData(q.data(), RowBytes(to, cols)).ok());
        }
      });
}

// The hybrid pass on the emulated device against the CPU pass (itself checked against
// llama.cpp): a prompt as one batch, then decode steps; reference vs quantized arithmetic and an
// f16 vs f32 cache, so close, not equal.
void CheckAgainstCpu(const std::string& path, ExpertHome home) {
  std::unique_ptr<Model> model = Model::Load(path).value();
  std::unique_ptr<CudaBackend> be = Device();
  ASSERT_NE(be, nullptr);
  std::unique_ptr<Session> hy = HybridSession(*model, be.get(), 512, home);
  ASSERT_NE(hy, nullptr);
  ASSERT_TRUE(hy->hybrid());
  Session cpu(*model, {.ctx_size = 128, .n_threads = 2});
  const std::vector<int32_t> prompt = {3, 17, 99, 250, 7, 600, 12, 41};
  const std::vector<float> a = RunTokens(*hy, prompt, false), b = RunTokens(cpu, prompt, false);
  const std::vector<int32_t> next = {77, 5, 901};
  const std::vector<float> a2 = RunTokens(*hy, next, true), b2 = RunTokens(cpu, next, true);
  const int64_t V = model->config().n_vocab;
  for (int64_t i = 0; i < 8; ++i) EXPECT_GT(Pearson(&a[i * V], &b[i * V], V), 0.999) << i;
  for (int64_t i = 0; i < 3; ++i) EXPECT_GT(Pearson(&a2[i * V], &b2[i * V], V), 0.999) << i;
}

// ds-tiny's structure (q_lora, sigmoid routing with groups, a leading dense layer), Q4_K_M.
TEST(HybridEmu, DsTinyStructureAgreesWithTheCpuPass) {
  const std::string path = WriteMla576("ds-tiny", "ds-tiny-576", synth::QuantMix::kQ4_K_M);
  CheckAgainstCpu(path, ExpertHome::kCpu);
  std::remove(path.c_str());
}

TEST(HybridEmu, DsTinyStructureExpertsOnTheDeviceAgreeWithTheCpuPass) {
  MOESPLIT_SKIP_UNDER_SANITIZER();
  const std::string path = WriteMla576("ds-tiny", "ds-tiny-576-dev", synth::QuantMix::kQ4_K_M);
  CheckAgainstCpu(path, ExpertHome::kDevice);
  std::remove(path.c_str());
}

// The legacy attn_kv_b layout (the popular DeepSeek-R1 Q4_K_M uploads; here kv_b is Q6_K / Q4_K
// [512, 16 x 256]): Create derives f16 attn_k_b / attn_v_b, which the GPU's HeadMatMul reads.
TEST(HybridEmu, DsTinyStructureLegacyLayoutAgreesWithTheCpuPass) {
  MOESPLIT_SKIP_UNDER_SANITIZER();
  const std::string path = WriteMla576("ds-tiny", "ds-tiny-576-legacy", synth::QuantMix::kQ4_K_M, 0,
                                       synth::MlaLayout::kLegacy);
  CheckAgainstCpu(path, ExpertHome::kCpu);
  std::remove(path.c_str());
}

// The same layout in F16 (k_b / v_b an exact rearrangement of kv_b) with sharpened attention
// (attn_q_b, attn_kv_a_mqa, attn_kv_b x16, like tiny_models_test's "-sharp" cases): here the
// scores, hence the derived key map, decide the logits.
TEST(HybridEmu, SharpLegacyLayoutAgreesWithTheCpuPass) {
  const std::string path = WriteMla576("ds-tiny", "ds-tiny-576-legacy-f16", synth::QuantMix::kF16,
                                       0, synth::MlaLayout::kLegacy);
  const std::string sharp = SharpenedCopy(path, {"attn_q_b", "attn_kv_a_mqa", "attn_kv_b"});
  CheckAgainstCpu(sharp, ExpertHome::kCpu);
  std::remove(sharp.c_str());
  std::remove(path.c_str());
}

// Lattice types and MXFP4 on the device's decoders, as llama.cpp's IQ mixes put them on
// attention and shared experts (llama-quantize IQ2_XS / IQ3_XXS leave most attention matrices
// in the file's lattice type): the F16 model's attention IQ2_XXS, its shared experts IQ1_M, its
// dense FFN IQ1_S and its routed experts MXFP4, with the experts in device memory too.
TEST(HybridEmu, DsTinyStructureLatticeTypesAgreeWithTheCpuPass) {
  MOESPLIT_SKIP_UNDER_SANITIZER();
  const std::string f16 = WriteMla576("ds-tiny", "ds-tiny-576-lattice", synth::QuantMix::kF16);
  const std::string path = RequantizedCopy(f16, {{"attn_", GgmlType::kIQ2_XXS},
                                                 {"shexp", GgmlType::kIQ1_M},
                                                 {"_exps", GgmlType::kMXFP4},
                                                 {"ffn_", GgmlType::kIQ1_S}});
  std::remove(f16.c_str());
  {
    std::unique_ptr<gguf::GgufFile> f = gguf::GgufFile::Open(path).value();
    int n[4] = {};
    for (const gguf::TensorInfo& t : f->tensors()) {
      n[0] += t.type == GgmlType::kIQ2_XXS;
      n[1] += t.type == GgmlType::kIQ1_M;
      n[2] += t.type == GgmlType::kMXFP4;
      n[3] += t.type == GgmlType::kIQ1_S;
    }
    for (int i = 0; i < 4; ++i) EXPECT_GT(n[i], 0) << "type " << i << " missing from the copy";
  }
  CheckAgainstCpu(path, ExpertHome::kCpu);
  CheckAgainstCpu(path, ExpertHome::kDevice);
  std::remove(path.c_str());
}

// llama-quantize's IQ2_M mix as make-model writes it (bartowski's DeepSeek shape): IQ2_S
// attention, experts and shared experts, IQ3_S attn_output, token_embd and first ffn_down, Q5_K
// output (ds-tiny's rows that are not a multiple of 256 fall back to IQ4_NL), on the device's
// decoders with the experts in device memory.
TEST(HybridEmu, DsTinyStructureIq2MMixAgreesWithTheCpuPass) {
  MOESPLIT_SKIP_UNDER_SANITIZER();
  const std::string path = WriteMla576("ds-tiny", "ds-tiny-576-iq2m", synth::QuantMix::kIQ2_M);
  {
    std::unique_ptr<gguf::GgufFile> f = gguf::GgufFile::Open(path).value();
    EXPECT_EQ(f->FindTensor("blk.1.attn_kv_a_mqa.weight")->type, GgmlType::kIQ2_S);
    EXPECT_EQ(f->FindTensor("token_embd.weight")->type, GgmlType::kIQ3_S);
  }
  CheckAgainstCpu(path, ExpertHome::kDevice);
  std::remove(path.c_str());
}

// shared/testdata's ds-tiny (llama.cpp's oracle) has a 64 + 16 latent: the pass refuses it with
// a clear error instead of computing garbage.
// An IQ4_XS file (make-model's mix for llama-quantize IQ4_XS: IQ4_XS attention, shared experts
// and dense layers, IQ4_NL where rows are not a multiple of 256) on the device's decoders.
TEST(HybridEmu, DsTinyStructureIq4XsAgreesWithTheCpuPass) {
  MOESPLIT_SKIP_UNDER_SANITIZER();
  const std::string path = WriteMla576("ds-tiny", "ds-tiny-576-iq4xs", synth::QuantMix::kIQ4_XS);
  {
    std::unique_ptr<gguf::GgufFile> f = gguf::GgufFile::Open(path).value();
    int iq4_dense = 0;
    for (const gguf::TensorInfo& t : f->tensors()) {
      const bool iq4 = t.type == GgmlType::kIQ4_XS || t.type == GgmlType::kIQ4_NL;
      iq4_dense += iq4 && t.name.find("_exps") == std::string::npos;
    }
    EXPECT_GT(iq4_dense, 0) << "the mix should put IQ4 types on the device's matrices";
  }
  CheckAgainstCpu(path, ExpertHome::kCpu);
  std::remove(path.c_str());
}

TEST(HybridEmu, NarrowLatentIsAClearError) {
  MOESPLIT_REQUIRE_TESTDATA();
  std::unique_ptr<Model> model =
      Model::Load(testing::TestDataPath("models/ds-tiny-Q4_K_M.gguf")).value();
  std::unique_ptr<CudaBackend> be = Device();
  ASSERT_NE(be, nullptr);
  std::unique_ptr<Session> hy = HybridSession(*model, be.get());
  if (hy == nullptr) return;  // refused at creation: as good
  const std::vector<int32_t> tokens = moesplit::testing::TinySeqA();
  const auto r = hy->Eval(tokens, true);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().ToString().find("576"), std::string::npos) << r.status().ToString();
}

// V2-Lite's structure (no q_lora, softmax routing, 2 shared experts), F16 weights; 6 of its 27
// layers (each emulated layer costs seconds).
TEST(HybridEmu, V2LiteStructureAgreesWithTheCpuPass) {
  MOESPLIT_SKIP_UNDER_SANITIZER();
  const std::string path = WriteMla576("ds-v2-lite-tiny", "v2lite-576", synth::QuantMix::kF16, 6);
  CheckAgainstCpu(path, ExpertHome::kCpu);
  std::remove(path.c_str());
}

// A step that mixes sequences (the server's batched, paged step) on the real kernels: two
// prompts and a third prompt over two blocks that are not consecutive (block 5 then block 0:
// the cache is gathered before attention), then a decode token each; every logits row against
// the same sequence alone on its own engine from block 0. Same arithmetic, other batch
// composition: Pearson >= 0.9999 and the same arg-max (the rule).
TEST(HybridEmu, BatchedPagedStepMatchesEachSequenceAlone) {
  MOESPLIT_SKIP_UNDER_SANITIZER();
  const std::string path = WriteMla576("ds-tiny", "ds-tiny-576-batch", synth::QuantMix::kQ4_K_M);
  std::unique_ptr<Model> model = Model::Load(path).value();
  std::remove(path.c_str());
  const int64_t V = model->config().n_vocab;
  std::vector<std::unique_ptr<CudaBackend>> devices;
  auto make = [&](int64_t ctx) -> std::unique_ptr<Engine> {
    devices.push_back(Device());
    if (devices.back() == nullptr) return nullptr;
    EngineOptions o{.ctx_size = ctx, .n_threads = 2};
    o.backend = devices.back().get();
    o.expert_homes.assign(static_cast<size_t>(model->config().n_layer), ExpertHome::kCpu);
    StatusOr<std::unique_ptr<Engine>> e = Engine::Create(*model, o);
    EXPECT_TRUE(e.ok()) << e.status().ToString();
    return e.ok() ? std::move(*e) : nullptr;
  };
  // 33 tokens: the third prompt's last position lands in its second block (each emulated
  // token costs: the test is kept to what the paths need).
  std::vector<std::vector<int32_t>> prompts = {{3, 17, 99}, {12, 41, 5}, {}};
  for (int k = 0; k < 33; ++k) prompts[2].push_back((389 * k + 11) % 1000 + 2);
  const std::vector<int32_t> next = {5, 9, 13};
  const std::vector<std::vector<int32_t>> tables = {{3}, {1}, {5, 0}};
  // Alone: rows [prompt..., next] per sequence.
  // One engine for the three alone-runs: each starts at position 0 of blocks {0, 1} and
  // overwrites what it reads before reading it.
  std::vector<std::vector<float>> alone(3);
  const std::vector<int32_t> from_zero = {0, 1};
  std::unique_ptr<Engine> e_alone = make(64);
  ASSERT_NE(e_alone, nullptr);
  for (size_t i = 0; i < 3; ++i) {
    Engine* e = e_alone.get();
    const int64_t n = static_cast<int64_t>(prompts[i].size());
    ASSERT_TRUE(e->Step(std::vector<StepSeq>{{prompts[i], from_zero, 0, n}}, &alone[i]).ok());
    const std::span<const int32_t> one(&next[i], 1);
    ASSERT_TRUE(e->Step(std::vector<StepSeq>{{one, from_zero, n, 1}}, &alone[i]).ok());
  }
  std::unique_ptr<Engine> e = make(256);
  ASSERT_NE(e, nullptr);
  std::vector<StepSeq> step;
  for (size_t i = 0; i < 3; ++i) {
    const int64_t n = static_cast<int64_t>(prompts[i].size());
    step.push_back({prompts[i], tables[i], 0, n});
  }
  std::vector<float> together;
  ASSERT_TRUE(e->Step(step, &together).ok());
  step.clear();
  for (size_t i = 0; i < 3; ++i) {
    step.push_back({std::span<const int32_t>(&next[i], 1), tables[i],
                    static_cast<int64_t>(prompts[i].size()), 1});
  }
  ASSERT_TRUE(e->Step(step, &together).ok());
  // together: [all prompt rows of 0, 1, 2] then [next of 0, 1, 2].
  size_t row = 0;
  auto check = [&](size_t i, size_t r) {
    const float* o = &together[row++ * V];
    const float* w = &alone[i][r * V];
    const std::string where = "sequence " + std::to_string(i) + " row " + std::to_string(r);
    EXPECT_GE(Pearson(o, w, V), 0.9999) << where;
    EXPECT_EQ(std::max_element(o, o + V) - o, std::max_element(w, w + V) - w) << where;
  };
  for (size_t i = 0; i < 3; ++i) {
    for (size_t r = 0; r < prompts[i].size(); ++r) check(i, r);
  }
  for (size_t i = 0; i < 3; ++i) check(i, prompts[i].size());
  EXPECT_EQ(row * V, together.size());
}

}  // namespace
}  // namespace moesplit::engine
