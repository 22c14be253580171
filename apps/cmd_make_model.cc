#include "apps/cmd_make_model.h"

#include <sys/stat.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <memory>
#include <sstream>

#include "apps/model_summary.h"
#include "core/synth/model_spec.h"
#include "core/synth/model_writer.h"

namespace moesplit::app {
namespace {

bool FileExists(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0;
}

StatusOr<synth::BuildOptions> ToBuildOptions(const MakeModelArgs& args) {
  synth::BuildOptions o;
  if (args.preset.empty()) {
    std::string list;
    for (const std::string& n : synth::PresetNames()) list += (list.empty() ? "" : ", ") + n;
    return InvalidArgumentError("--preset is required (presets: ", list, ")");
  }
  o.preset = args.preset;
  if (args.layers < 0) return InvalidArgumentError("--layers ", args.layers, " must be >= 1");
  o.layers = args.layers;
  MOESPLIT_ASSIGN_OR_RETURN(o.quant, synth::QuantMixFromName(args.quant));
  MOESPLIT_ASSIGN_OR_RETURN(o.mla, synth::MlaLayoutFromName(args.mla_layout));
  return o;
}

}  // namespace

std::string PresetListText() {
  const synth::QuantMix mixes[] = {synth::QuantMix::kQ4_K_M, synth::QuantMix::kQ8_0,
                                   synth::QuantMix::kF16, synth::QuantMix::kBF16};
  std::ostringstream os;
  char line[160];
  std::snprintf(line, sizeof(line), "%-14s %6s %14s %14s %14s %14s\n", "preset", "layers", "Q4_K_M",
                "Q8_0", "F16", "BF16");
  os << line;
  for (const std::string& name : synth::PresetNames()) {
    std::string sizes;
    int64_t layers = 0;
    for (synth::QuantMix mix : mixes) {
      auto spec = synth::BuildTensorTable({.preset = name, .layers = 0, .quant = mix});
      MOESPLIT_CHECK(spec.ok(), spec.status().ToString());
      layers = spec->hp.n_layer;
      std::snprintf(line, sizeof(line), " %14s",
                    HumanBytes(synth::TotalTensorBytes(*spec)).c_str());
      sizes += line;
    }
    std::snprintf(line, sizeof(line), "%-14s %6lld", name.c_str(), static_cast<long long>(layers));
    os << line << sizes << "\n    " << synth::PresetDescription(name) << "\n";
  }
  os << "(tensor bytes at the default layer count; --layers N scales the per-layer part)\n";
  os << "--quant mixes:";
  for (int m = 0; m <= static_cast<int>(synth::QuantMix::kMXFP4_MOE); ++m) {
    os << (m == 0 ? " " : ", ") << synth::QuantMixName(static_cast<synth::QuantMix>(m));
  }
  os << " (docs/REFERENCE.md says what each puts where)\n";
  return os.str();
}

Status RunMakeModel(const MakeModelArgs& args, std::ostream& out) {
  if (args.list) {
    out << PresetListText();
    return Status::Ok();
  }
  MOESPLIT_ASSIGN_OR_RETURN(synth::BuildOptions build, ToBuildOptions(args));
  if (args.output.empty()) return InvalidArgumentError("-o FILE is required");
  if (FileExists(args.output) && !args.force) {
    return FailedPreconditionError(args.output, " already exists (use --force to overwrite)");
  }
  MOESPLIT_ASSIGN_OR_RETURN(synth::ModelSpec spec, synth::BuildModelSpec(build));
  for (const std::string& w : spec.warnings) std::cerr << "warning: " << w << "\n";

  synth::WriteOptions wo;
  wo.path = args.output;
  wo.seed = args.seed;
  wo.threads = args.threads;
  wo.show_progress = args.progress;
  MOESPLIT_ASSIGN_OR_RETURN(synth::WriteStats stats, synth::WriteModel(spec, wo));
  char secs[32];
  std::snprintf(secs, sizeof(secs), "%.2f", stats.seconds);
  out << "wrote " << args.output << ": preset " << spec.preset << ", " << spec.hp.n_layer
      << " layers, " << synth::QuantMixName(spec.quant) << ", seed " << args.seed << "\n"
      << "  " << stats.n_tensors << " tensors, " << spec.metadata.size() << " metadata keys, "
      << stats.tensor_bytes << " tensor bytes (" << HumanBytes(stats.tensor_bytes) << "), file "
      << stats.file_bytes << " bytes, " << secs << " s\n";
  return Status::Ok();
}

void RegisterMakeModel(CLI::App& app, std::function<int()>* action) {
  auto args = std::make_shared<MakeModelArgs>();
  CLI::App* cmd = app.add_subcommand(
      "make-model",
      "Write a synthetic GGUF model (llama.cpp layout, random weights) from a preset");
  cmd->add_option("--preset", args->preset,
                  "ds-tiny | ds-v2-lite | ds-v3 | qwen3moe-tiny | mixtral-tiny");
  cmd->add_option("--layers", args->layers, "number of blocks (default: the preset's)");
  cmd->add_option("--quant", args->quant,
                  "Q4_K_M | Q8_0 | IQ4_XS | Q3_K_M | UD-Q2_K_XL | UD-IQ2_XXS | UD-IQ1_M | UD-IQ1_S "
                  "| IQ2_XS | IQ2_M | IQ3_XXS | IQ3_M | Q4_0 | MXFP4_MOE | F16 | BF16")
      ->capture_default_str();
  cmd->add_option("--seed", args->seed, "PRNG seed (same seed -> same file)")
      ->capture_default_str();
  cmd->add_option("--mla-layout", args->mla_layout,
                  "deepseek2 attention: split (attn_k_b/attn_v_b) | legacy (attn_kv_b)")
      ->capture_default_str();
  cmd->add_option("-o,--output", args->output, "output GGUF file");
  cmd->add_option("--threads", args->threads, "quantization threads (0 = auto)");
  cmd->add_flag("--force", args->force, "overwrite an existing output file");
  cmd->add_flag("--list", args->list, "list presets with their sizes per quant");
  cmd->callback([args, action] {
    *action = [args] {
      Status s = RunMakeModel(*args);
      if (!s.ok()) {
        std::cerr << "make-model: " << s.ToString() << "\n";
        return 1;
      }
      return 0;
    };
  });
}

}  // namespace moesplit::app
