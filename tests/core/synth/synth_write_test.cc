// Writing presets to GGUF and reading them back; determinism of the random weights.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>

#include "apps/cmd_inspect.h"
#include "core/gguf/gguf_file.h"
#include "core/gguf/gguf_writer.h"
#include "core/synth/model_spec.h"
#include "core/synth/model_writer.h"
#include "cpu_kernels/quant/quant.h"
#include "tests/testdata.h"

namespace moesplit::synth {
namespace {

std::string Scratch(const std::string& name) { return testing::ScratchDir() + "/" + name; }

ModelSpec Build(BuildOptions o) {
  auto s = BuildModelSpec(o);
  EXPECT_TRUE(s.ok()) << s.status().ToString();
  return std::move(s).value();
}

WriteStats Write(const ModelSpec& spec, const std::string& path, uint64_t seed = 1234,
                 int threads = 2) {
  auto st = WriteModel(spec, {.path = path, .seed = seed, .threads = threads});
  EXPECT_TRUE(st.ok()) << st.status().ToString();
  return st.ok() ? *st : WriteStats{};
}

// Reads `path` back and checks it holds exactly `spec`.
void ExpectRoundTrip(const ModelSpec& spec, const std::string& path) {
  auto file = gguf::GgufFile::Open(path);
  ASSERT_TRUE(file.ok()) << file.status().ToString();
  const auto& tensors = (*file)->tensors();
  ASSERT_EQ(tensors.size(), spec.tensors.size());
  for (size_t i = 0; i < tensors.size(); ++i) {
    EXPECT_EQ(tensors[i].name, spec.tensors[i].name);
    EXPECT_EQ(tensors[i].type, spec.tensors[i].type);
    EXPECT_EQ(tensors[i].nbytes, spec.tensors[i].Bytes());
  }
  const auto& md = (*file)->metadata();
  ASSERT_EQ(md.size(), spec.metadata.size());
  for (size_t i = 0; i < md.size(); ++i) {
    EXPECT_EQ(md[i].key, spec.metadata[i].key);
    EXPECT_TRUE(md[i].value == spec.metadata[i].value) << md[i].key;
  }
}

TEST(SynthWrite, EveryTinyPresetRoundTrips) {
  for (const char* preset : {"ds-tiny", "qwen3moe-tiny", "mixtral-tiny"}) {
    SCOPED_TRACE(preset);
    const ModelSpec spec = Build({.preset = preset});
    const std::string path = Scratch(std::string(preset) + ".gguf");
    const WriteStats st = Write(spec, path);
    EXPECT_EQ(st.n_tensors, spec.tensors.size());
    EXPECT_GT(st.file_bytes, st.tensor_bytes);
    ExpectRoundTrip(spec, path);
    // Reader -> writer reproduces the file byte for byte.
    auto file = gguf::GgufFile::Open(path);
    ASSERT_TRUE(file.ok()) << file.status().ToString();
    const std::string copy = path + ".copy.gguf";
    ASSERT_TRUE(gguf::WriteCopy(**file, copy).ok());
    EXPECT_EQ(testing::ReadFileBytes(path), testing::ReadFileBytes(copy));
    // And `moesplit inspect` accepts it.
    std::ostringstream out, err;
    app::InspectArgs args;
    args.path = path;
    args.tensors = true;
    EXPECT_EQ(app::RunInspect(args, out, err), 0) << err.str();
  }
}

TEST(SynthWrite, QuantMixesAndLegacyLayoutRoundTrip) {
  for (QuantMix mix : {QuantMix::kQ8_0, QuantMix::kF16, QuantMix::kBF16}) {
    const ModelSpec spec = Build({.preset = "ds-tiny", .quant = mix});
    const std::string path = Scratch(std::string("ds-tiny-") + QuantMixName(mix) + ".gguf");
    Write(spec, path);
    ExpectRoundTrip(spec, path);
  }
  const ModelSpec legacy = Build({.preset = "ds-tiny", .mla = MlaLayout::kLegacy});
  Write(legacy, Scratch("ds-tiny-legacy.gguf"));
  ExpectRoundTrip(legacy, Scratch("ds-tiny-legacy.gguf"));
}

// The UD-IQ, llama-quantize IQ and MXFP4_MOE mixes write lattice- / MXFP4-quantized expert
// tensors that read back
// with their types and decode to finite weights of about the generated spread (sd 0.02; a
// 1.5-2 bit code keeps roughly 0.8-0.95 of it, so the bound is loose but excludes zeros and
// garbage scales).
TEST(SynthWrite, UdIqMixesRoundTrip) {
  for (QuantMix mix :
       {QuantMix::kUdIQ2_XXS, QuantMix::kUdIQ1_M, QuantMix::kUdIQ1_S, QuantMix::kIQ2_XS,
        QuantMix::kIQ2_M, QuantMix::kIQ3_XXS, QuantMix::kIQ3_M, QuantMix::kMXFP4_MOE}) {
    SCOPED_TRACE(QuantMixName(mix));
    const ModelSpec spec = Build({.preset = "ds-tiny", .quant = mix});
    const std::string path = Scratch(std::string("ds-tiny-") + QuantMixName(mix) + ".gguf");
    Write(spec, path);
    ExpectRoundTrip(spec, path);
    auto file = gguf::GgufFile::Open(path);
    ASSERT_TRUE(file.ok()) << file.status().ToString();
    const gguf::TensorInfo* w = (*file)->FindTensor("blk.2.ffn_up_exps.weight");
    ASSERT_NE(w, nullptr);
    EXPECT_TRUE(quant::IsDecodeOnly(w->type));  // a lattice type or MXFP4
    std::vector<float> g(w->NumElements());
    quant::DequantizeRow(w->type, w->data, g.data(), g.size());
    double sq = 0;
    for (float x : g) {
      ASSERT_TRUE(std::isfinite(x));
      sq += double(x) * x;
    }
    const double sd = std::sqrt(sq / g.size());
    EXPECT_GT(sd, 0.012);
    EXPECT_LT(sd, 0.028);
  }
}

TEST(SynthWrite, SameSeedSameBytesWhateverTheThreads) {
  const ModelSpec spec = Build({.preset = "ds-tiny"});
  Write(spec, Scratch("det-a.gguf"), 7, 1);
  Write(spec, Scratch("det-b.gguf"), 7, 4);
  Write(spec, Scratch("det-c.gguf"), 8, 2);
  const auto a = testing::ReadFileBytes(Scratch("det-a.gguf"));
  EXPECT_FALSE(a.empty());
  EXPECT_EQ(a, testing::ReadFileBytes(Scratch("det-b.gguf")));
  EXPECT_NE(a, testing::ReadFileBytes(Scratch("det-c.gguf")));
}

TEST(SynthWrite, WeightStatistics) {
  const ModelSpec spec = Build({.preset = "ds-tiny", .quant = QuantMix::kF16});
  const std::string path = Scratch("ds-tiny-stats.gguf");
  Write(spec, path);
  auto file = gguf::GgufFile::Open(path);
  ASSERT_TRUE(file.ok()) << file.status().ToString();
  const gguf::TensorInfo* norm = (*file)->FindTensor("blk.0.attn_norm.weight");
  ASSERT_NE(norm, nullptr);
  std::vector<float> v(norm->NumElements());
  quant::DequantizeRow(norm->type, norm->data, v.data(), v.size());
  for (float x : v) EXPECT_EQ(x, 1.0f);
  const gguf::TensorInfo* w = (*file)->FindTensor("blk.1.ffn_gate_exps.weight");
  std::vector<float> g(w->NumElements());
  quant::DequantizeRow(w->type, w->data, g.data(), g.size());
  double sum = 0, sq = 0;
  for (float x : g) sum += x, sq += double(x) * x;
  const double mean = sum / g.size(), sd = std::sqrt(sq / g.size() - mean * mean);
  EXPECT_NEAR(mean, 0.0, 1e-3);
  EXPECT_NEAR(sd, 0.02, 1e-3);
}

TEST(SynthWrite, UnwritableOutputIsAnError) {
  const ModelSpec spec = Build({.preset = "ds-tiny"});
  auto st = WriteModel(spec, {.path = "/nonexistent-dir/x.gguf"});
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.status().message().find("/nonexistent-dir/x.gguf"), std::string::npos)
      << st.status().ToString();
}

// The file appears under its name only when complete: written as NAME.partial, then renamed.
TEST(SynthWrite, NoPartialFileLeftBehind) {
  const std::string path = Scratch("renamed.gguf");
  std::remove(path.c_str());
  auto st = WriteModel(Build({.preset = "ds-tiny"}), {.path = path});
  ASSERT_TRUE(st.ok()) << st.status().ToString();
  EXPECT_TRUE(std::ifstream(path).good());
  EXPECT_FALSE(std::ifstream(path + ".partial").good());
}

}  // namespace
}  // namespace moesplit::synth
