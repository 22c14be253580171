#include "apps/model_summary.h"

#include <cstdio>
#include <set>

namespace moesplit::app {

std::string HumanBytes(uint64_t bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = static_cast<double>(bytes);
  int u = 0;
  while (v >= 1024.0 && u < 4) {
    v /= 1024.0;
    ++u;
  }
  char buf[32];
  if (u == 0) {
    std::snprintf(buf, sizeof(buf), "%llu B", static_cast<unsigned long long>(bytes));
  } else {
    std::snprintf(buf, sizeof(buf), "%.2f %s", v, units[u]);
  }
  return buf;
}

namespace {

void Add(ByteCount& c, const gguf::TensorInfo& t) {
  c.tensors += 1;
  c.elements += t.NumElements();
  c.bytes += t.nbytes;
}

// One line about the vocabulary from the tokenizer.ggml.* keys that are present.
std::string TokenizerLine(const gguf::GgufFile& file, int64_t vocab_size) {
  auto model = file.GetString("tokenizer.ggml.model");
  if (!model.ok()) return "";
  std::string s = *model;
  if (auto pre = file.GetString("tokenizer.ggml.pre"); pre.ok()) s += " / " + *pre;
  s += StrCat(", ", vocab_size, " tokens");
  if (auto m = file.GetArray("tokenizer.ggml.merges"); m.ok()) {
    s += StrCat(", ", (*m)->items.size(), " merges");
  }
  if (auto v = file.GetUint("tokenizer.ggml.bos_token_id"); v.ok()) s += StrCat(", BOS ", *v);
  if (auto v = file.GetUint("tokenizer.ggml.eos_token_id"); v.ok()) s += StrCat(", EOS ", *v);
  if (auto v = file.GetBool("tokenizer.ggml.add_bos_token"); v.ok()) {
    s += StrCat(", add_bos ", *v ? "true" : "false");
  }
  return s;
}

void FillMetadata(const gguf::GgufFile& file, ModelSummary& s) {
  s.architecture = file.architecture();
  if (auto v = file.GetString("general.name"); v.ok()) s.name = *v;
  if (auto v = file.GetUint("general.file_type"); v.ok()) {
    s.file_type = FileTypeName(static_cast<uint32_t>(*v));
  }
  if (auto v = file.GetArray("tokenizer.ggml.tokens"); v.ok()) {
    s.vocab_size = static_cast<int64_t>((*v)->items.size());
  }
  s.tokenizer = TokenizerLine(file, s.vocab_size);
  if (!s.architecture.empty()) {
    const std::string prefix = s.architecture + ".";
    for (const gguf::KeyValue& kv : file.metadata()) {
      if (kv.key.starts_with(prefix)) {
        s.hparams.emplace_back(kv.key.substr(prefix.size()), kv.value.ToDisplayString());
      }
    }
    if (auto v = file.GetUint(prefix + "expert_count"); v.ok()) s.expert_count = *v;
    if (auto v = file.GetUint(prefix + "expert_used_count"); v.ok()) s.expert_used = *v;
  }
}

}  // namespace

ModelSummary Summarize(const gguf::GgufFile& file) {
  ModelSummary s;
  s.file_bytes = file.total_file_bytes();
  FillMetadata(file, s);
  std::set<int> moe_layers;
  for (const gguf::TensorInfo& t : file.tensors()) {
    Add(s.total, t);
    Add(s.by_type[TypeName(t.type)], t);
    const TensorRole role = ClassifyTensor(t.name);
    Add(s.by_role[static_cast<int>(role)], t);
    if (role == TensorRole::kRoutedExperts) moe_layers.insert(LayerOfTensor(t.name));
  }
  s.moe_layers = static_cast<int64_t>(moe_layers.size());
  const ByteCount& routed = s.by_role[static_cast<int>(TensorRole::kRoutedExperts)];
  const ByteCount& embd = s.by_role[static_cast<int>(TensorRole::kEmbeddings)];
  if (s.expert_count > 0 && s.expert_used > 0 && s.expert_used <= s.expert_count) {
    // Experts of one layer are equal-sized, so k of N experts read k/N of the layer's bytes.
    s.routed_bytes_per_token = routed.bytes / s.expert_count * s.expert_used;
  }
  s.dense_bytes_per_token = s.total.bytes - routed.bytes - embd.bytes;
  return s;
}

}  // namespace moesplit::app
