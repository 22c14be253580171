#include "apps/cmd_inspect.h"

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <vector>

#include "apps/model_summary.h"
#include "core/gguf/gguf_file.h"
#include "cpu_kernels/quant/quant.h"

namespace moesplit::app {
namespace {

using nlohmann::json;

std::string Fmt(const char* fmt, double a) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), fmt, a);
  return buf;
}

std::string ShapeString(const gguf::TensorInfo& t) {
  std::string s = "[";
  for (int d = 0; d < t.n_dims; ++d) s += (d ? ", " : "") + std::to_string(t.ne[d]);
  return s + "]";
}

// The first `n` values of a tensor, dequantized. Dequantizes whole blocks (a block is the
// smallest decodable unit: 256 values for K-quants) and keeps the first n.
StatusOr<std::vector<float>> LeadingValues(const gguf::TensorInfo& t, int64_t n) {
  if (n <= 0) return InvalidArgumentError("--values must be positive, got ", n);
  if (!quant::CanDequantize(t.type)) {
    return UnimplementedError("tensor '", t.name, "' has type ", TypeName(t.type),
                              ", which this build cannot dequantize");
  }
  n = std::min<int64_t>(n, t.NumElements());
  const TypeTraits& tr = GetTypeTraits(t.type);
  const int64_t blocks = (n + tr.block_size - 1) / tr.block_size;
  std::vector<float> v(blocks * tr.block_size);
  quant::DequantizeRow(t.type, t.data, v.data(), static_cast<int64_t>(v.size()));
  v.resize(n);
  return v;
}

json ValueToJson(const gguf::Value& v, size_t max_array = 64) {
  using VT = gguf::ValueType;
  switch (v.type) {
    case VT::kString:
      return std::string(*v.AsString());
    case VT::kBool:
      return *v.AsBool();
    case VT::kFloat32:
    case VT::kFloat64:
      return *v.AsFloat();
    case VT::kArray: {
      const gguf::Array& a = **v.AsArray();
      if (a.items.size() > max_array) {
        return json{{"array_of", gguf::ValueTypeName(a.elem_type)}, {"len", a.items.size()}};
      }
      json arr = json::array();
      for (const gguf::Value& x : a.items) arr.push_back(ValueToJson(x, max_array));
      return arr;
    }
    default:
      if (auto u = v.AsUint(); u.ok()) return *u;
      return *v.AsInt();
  }
}

json SummaryJson(const gguf::GgufFile& file, const ModelSummary& s) {
  json j;
  j["file"] = file.path();
  j["shards"] = json::array();
  for (const gguf::ShardInfo& sh : file.shards()) j["shards"].push_back(sh.path);
  j["gguf_version"] = file.version();
  j["file_bytes"] = s.file_bytes;
  j["alignment"] = file.shards().front().alignment;
  j["data_offset"] = file.shards().front().data_offset;
  j["architecture"] = s.architecture;
  j["name"] = s.name;
  j["file_type"] = s.file_type;
  j["tensor_count"] = file.tensors().size();
  j["kv_count"] = file.metadata().size();
  j["vocab_size"] = s.vocab_size;
  j["tokenizer"] = s.tokenizer;
  j["parameters"] = s.total.elements;
  j["tensor_bytes"] = s.total.bytes;
  for (const auto& [k, v] : s.hparams)
    j["hparams"][k] = ValueToJson(*file.Find(s.architecture + "." + k));
  for (const gguf::KeyValue& kv : file.metadata()) j["metadata"][kv.key] = ValueToJson(kv.value);
  for (const auto& [type, c] : s.by_type) {
    j["bytes_by_type"][type] = {
        {"tensors", c.tensors}, {"elements", c.elements}, {"bytes", c.bytes}};
  }
  for (int r = 0; r < kNumTensorRoles; ++r) {
    const ByteCount& c = s.by_role[r];
    if (c.tensors == 0) continue;
    j["bytes_by_role"][TensorRoleName(static_cast<TensorRole>(r))] = {
        {"tensors", c.tensors}, {"elements", c.elements}, {"bytes", c.bytes}};
  }
  j["decode_bytes_per_token"] = {{"routed_experts", s.routed_bytes_per_token},
                                 {"non_expert", s.dense_bytes_per_token}};
  return j;
}

void PrintCounts(std::ostream& out, const std::string& label, const ByteCount& c, uint64_t total) {
  char line[160];
  std::snprintf(line, sizeof(line),
                "  %-18s %6" PRId64 " tensors %14" PRId64 " params %12s %6.2f%% %6.2f bpw\n",
                label.c_str(), c.tensors, c.elements, HumanBytes(c.bytes).c_str(),
                total ? 100.0 * c.bytes / total : 0.0, c.BitsPerWeight());
  out << line;
}

void PrintText(const gguf::GgufFile& file, const ModelSummary& s, const InspectArgs& args,
               std::ostream& out) {
  const gguf::ShardInfo& sh0 = file.shards().front();
  out << "file:          " << file.path() << "\n";
  if (file.shards().size() > 1) out << "shards:        " << file.shards().size() << "\n";
  out << "gguf version:  " << file.version() << "\n"
      << "file size:     " << s.file_bytes << " bytes (" << HumanBytes(s.file_bytes) << ")\n"
      << "alignment:     " << sh0.alignment << ", data offset " << sh0.data_offset << "\n"
      << "architecture:  " << (s.architecture.empty() ? "(none)" : s.architecture) << "\n";
  if (!s.name.empty()) out << "name:          " << s.name << "\n";
  if (!s.file_type.empty()) out << "file type:     " << s.file_type << "\n";
  out << "tensors:       " << file.tensors().size() << "\n"
      << "metadata keys: " << file.metadata().size() << "\n";
  if (s.vocab_size) out << "vocab size:    " << s.vocab_size << "\n";
  if (!s.tokenizer.empty()) out << "tokenizer:     " << s.tokenizer << "\n";
  out << "parameters:    " << s.total.elements << " (" << Fmt("%.3f", s.total.elements / 1e9)
      << " B), " << HumanBytes(s.total.bytes) << " of tensor data\n";
  if (!s.hparams.empty()) {
    out << "\nhyper-parameters (" << s.architecture << ".*):\n";
    for (const auto& [k, v] : s.hparams) out << "  " << k << " = " << v << "\n";
  }
  if (!file.tensors().empty()) {
    out << "\nbytes by type:\n";
    for (const auto& [type, c] : s.by_type) PrintCounts(out, type, c, s.total.bytes);
    out << "\nbytes by role:\n";
    for (int r = 0; r < kNumTensorRoles; ++r) {
      if (s.by_role[r].tensors == 0) continue;
      PrintCounts(out, TensorRoleName(static_cast<TensorRole>(r)), s.by_role[r], s.total.bytes);
    }
  }
  if (s.routed_bytes_per_token > 0) {
    out << "\ndecode, bytes read per token (from the tensor table, not measured):\n"
        << "  routed experts:  " << HumanBytes(s.routed_bytes_per_token) << " (" << s.expert_used
        << " of " << s.expert_count << " experts x " << s.moe_layers << " MoE layers)\n"
        << "  everything else: " << HumanBytes(s.dense_bytes_per_token)
        << " (attention, shared experts, dense layers, router, norms, lm_head)\n"
        << "  -> CPU-side decode ceiling = DRAM read bandwidth / "
        << HumanBytes(s.routed_bytes_per_token) << ", e.g. "
        << Fmt("%.1f", 100e9 / s.routed_bytes_per_token) << " tok/s per 100 GB/s\n";
  }
  if (args.metadata) {
    out << "\nmetadata:\n";
    for (const gguf::KeyValue& kv : file.metadata()) {
      out << "  " << kv.key << " (" << gguf::ValueTypeName(kv.value.type)
          << ") = " << kv.value.ToDisplayString() << "\n";
    }
  }
  if (args.tensors) {
    out << "\ntensors:\n";
    char line[512];
    for (const gguf::TensorInfo& t : file.tensors()) {
      std::snprintf(
          line, sizeof(line), "  %-40s %-8s %-24s %12" PRIu64 " B  shard %d offset %" PRIu64 "\n",
          t.name.c_str(), TypeName(t.type), ShapeString(t).c_str(), t.nbytes, t.shard, t.offset);
      out << line;
    }
  }
}

}  // namespace

int RunInspect(const InspectArgs& args, std::ostream& out, std::ostream& err) {
  if (args.format != "text" && args.format != "json") {
    err << "moesplit inspect: --format must be text or json, got '" << args.format << "'\n";
    return 1;
  }
  auto file_or = gguf::GgufFile::Open(args.path);
  if (!file_or.ok()) {
    err << "moesplit inspect: " << file_or.status().ToString() << "\n";
    return 1;
  }
  const gguf::GgufFile& file = **file_or;
  const ModelSummary summary = Summarize(file);

  std::vector<float> values;
  const gguf::TensorInfo* tensor = nullptr;
  if (!args.tensor.empty()) {
    tensor = file.FindTensor(args.tensor);
    if (tensor == nullptr) {
      err << "moesplit inspect: no tensor named '" << args.tensor << "' in " << args.path
          << " (list them with --tensors)\n";
      return 1;
    }
    auto v = LeadingValues(*tensor, args.values > 0 ? args.values : 16);
    if (!v.ok()) {
      err << "moesplit inspect: " << v.status().ToString() << "\n";
      return 1;
    }
    values = std::move(*v);
  }

  if (args.format == "json") {
    json j = SummaryJson(file, summary);
    if (args.tensors) {
      for (const gguf::TensorInfo& t : file.tensors()) {
        j["tensors"].push_back({{"name", t.name},
                                {"type", TypeName(t.type)},
                                {"ne", std::vector<int64_t>(t.ne.begin(), t.ne.begin() + t.n_dims)},
                                {"bytes", t.nbytes},
                                {"shard", t.shard},
                                {"offset", t.offset}});
      }
    }
    if (tensor) j["values"] = {{"tensor", tensor->name}, {"data", values}};
    // Metadata strings need not be UTF-8: replace them, do not throw.
    out << j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
    return 0;
  }
  PrintText(file, summary, args, out);
  if (tensor) {
    out << "\n"
        << tensor->name << " (" << TypeName(tensor->type) << " " << ShapeString(*tensor)
        << "), first " << values.size() << " values:\n";
    for (size_t i = 0; i < values.size(); ++i) {
      out << (i % 8 ? " " : (i ? "\n  " : "  ")) << Fmt("%.6g", values[i]);
    }
    out << "\n";
  }
  return 0;
}

void RegisterInspect(CLI::App& app, std::function<int()>* action) {
  auto args = std::make_shared<InspectArgs>();
  CLI::App* cmd = app.add_subcommand(
      "inspect",
      "Show what a GGUF model holds: architecture, hyper-parameters, bytes by quant "
      "type and by role, per-token decode bytes; validates the file");
  cmd->add_option("file", args->path, "GGUF file (any shard of a split model)")->required();
  cmd->add_flag("--tensors", args->tensors, "List every tensor (name, type, shape, bytes, offset)");
  cmd->add_flag("--metadata", args->metadata, "List every metadata key and value");
  cmd->add_option("--tensor", args->tensor, "Print leading dequantized values of this tensor");
  cmd->add_option("--values", args->values, "How many values --tensor prints (default 16)")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 30));
  cmd->add_option("--format", args->format, "Output format: text or json")
      ->check(CLI::IsMember({"text", "json"}));
  cmd->callback(
      [args, action] { *action = [args] { return RunInspect(*args, std::cout, std::cerr); }; });
}

}  // namespace moesplit::app
