// Engine::Place: builds the pools and the expert store of a CpuPlacement (engine.h).
#include <cmath>
#include <sstream>
#include <thread>

#include "core/engine/engine.h"
#include "core/engine/forward.h"
#include "core/engine/hybrid_forward.h"
#include "core/engine/weight_repack.h"
#include "moe/expert_store.h"
#include "moe/grouped_experts.h"
#include "numa/node_pool.h"
#include "numa/thread_pool.h"

namespace moesplit::engine {

namespace {

int ResolveThreads(int n) {
  if (n > 0) return n;
  const unsigned hw = std::thread::hardware_concurrency();
  return hw == 0 ? 1 : static_cast<int>(hw);
}

// One group's pool seen as an Executor from outside the fan-out: its ParallelFor runs inside a
// NodeFanout::Run so that the group's own (pinned) leader drives it — used to copy each group's
// experts with that group's workers.
class GroupExecutor : public moesplit::Executor {
 public:
  GroupExecutor(numa::NodeFanout* fanout, int group) : fanout_(fanout), group_(group) {}
  int size() const override { return fanout_->pool(group_).size(); }
  void ParallelFor(int64_t n, const std::function<void(int64_t, int)>& fn) override {
    fanout_->Run([&](int g, numa::NodePool& pool) {
      if (g == group_) pool.ParallelFor(n, fn);
    });
  }

 private:
  numa::NodeFanout* fanout_;
  int group_;
};

// "q4_K_r16, q6_K_r16": the layouts a repack used.
std::string TypeList(const std::vector<GgmlType>& types) {
  std::string s;
  for (GgmlType t : types) s += (s.empty() ? "" : ", ") + std::string(TypeName(t));
  return s;
}

std::string PoolLine(const numa::NodePool& p, const char* what) {
  std::ostringstream s;
  s << what << " node " << p.node() << ": " << p.size() << " workers on cpus ";
  for (size_t i = 0; i < p.cpus().size(); ++i) s << (i ? "," : "") << p.cpus()[i];
  return s.str();
}

}  // namespace

StatusOr<std::vector<bool>> Engine::DeviceExpertLayers(const EngineOptions& options) const {
  const ModelConfig& c = model_.config();
  const ModelWeights& w = model_.weights();
  const size_t n = static_cast<size_t>(c.n_layer);
  std::vector<bool> on_device(n, false);
  if (options.backend == nullptr || c.n_expert == 0) return on_device;
  const std::vector<ExpertHome>& homes = options.expert_homes;
  if (!homes.empty() && homes.size() != n) {
    return InvalidArgumentError("expert_homes has ", homes.size(), " entries for ", n, " layers");
  }
  auto home = [&](size_t il) { return homes.empty() ? ExpertHome::kAuto : homes[il]; };
  const uint64_t free = options.backend->DeviceBytesFree();
  const uint64_t rest =
      HybridForward::DeviceBytesNeeded(c, w, ctx_, options.ubatch, /*device_experts=*/true);
  const uint64_t margin = std::max<uint64_t>(uint64_t{512} << 20, free / 20);
  uint64_t budget = free > rest + margin ? free - rest - margin : 0;
  uint64_t forced = 0;
  for (size_t il = 0; il < n; ++il) {
    if (!c.IsMoeLayer(static_cast<int64_t>(il)) || home(il) != ExpertHome::kDevice) continue;
    on_device[il] = true;
    forced += HybridForward::ExpertBytes(w, static_cast<int64_t>(il));
  }
  if (forced > budget) {
    return ResourceExhaustedError(
        "the routed experts asked for on the device need ", forced >> 20, " MiB, but ",
        budget >> 20, " MiB of its ", free >> 20, " MiB free remain after the other weights, the ",
        "KV cache and the activations (", rest >> 20, " MiB) and a margin (", margin >> 20,
        " MiB); keep more layers' experts on the CPU (--n-cpu-moe N)");
  }
  budget -= forced;
  // Whether the backend has kernels for layer il's expert types (a Q2_K / Q3_K layer stays on
  // the CPU; forced onto the device it fails HybridForward::Create's check, naming the tensor).
  auto device_runs = [&](size_t il) {
    const LayerWeights& t = w.layers[il];
    for (const auto& [v, cols] :
         {std::pair{&t.ffn_gate_exps, c.n_embd}, std::pair{&t.ffn_up_exps, c.n_embd},
          std::pair{&t.ffn_down_exps, c.n_ff_exp}}) {
      if (!options.backend->CheckWeight(std::string(v->name), v->type, cols).ok()) return false;
    }
    return true;
  };
  for (size_t il = n; il-- > 0;) {  // the last layers first, whole layers only
    if (!c.IsMoeLayer(static_cast<int64_t>(il)) || home(il) != ExpertHome::kAuto) continue;
    if (!device_runs(il)) continue;
    const uint64_t bytes = HybridForward::ExpertBytes(w, static_cast<int64_t>(il));
    if (bytes > budget) break;
    on_device[il] = true;
    budget -= bytes;
  }
  return on_device;
}

Status Engine::Place(const EngineOptions& options) {
  const ModelConfig& c = model_.config();
  MOESPLIT_ASSIGN_OR_RETURN(const std::vector<bool> device_experts, DeviceExpertLayers(options));
  std::vector<moe::ExpertEngine::Layer> layers(static_cast<size_t>(c.n_layer));
  for (int64_t il = 0; il < c.n_layer; ++il) {
    const LayerWeights& l = model_.weights().layers[static_cast<size_t>(il)];
    if (!c.IsMoeLayer(il) || device_experts[static_cast<size_t>(il)]) continue;
    layers[il] = {l.ffn_gate_exps, l.ffn_up_exps, l.ffn_down_exps};
    // The hybrid pass runs the shared expert on the device, overlapping these.
    if (options.backend == nullptr) {
      layers[il].gate_shexp = l.ffn_gate_shexp;
      layers[il].up_shexp = l.ffn_up_shexp;
      layers[il].down_shexp = l.ffn_down_shexp;
    }
  }
  const CpuPlacement& p = options.placement;
  using numa::NumaMode;
  std::vector<moesplit::Executor*> pools;
  std::vector<std::unique_ptr<GroupExecutor>> copiers;
  moe::RunGroupsFn run_groups;
  moe::ExpertStoreOptions so{.mode = p.mode, .copy = p.copy_single, .progress = options.progress};
  so.repack_for = p.repack ? kernels_ : nullptr;
  so.repack_growth_limit =
      p.repack_growth < 0
          ? -1
          : static_cast<int64_t>(p.repack_growth *
                                 static_cast<double>(model_.file().total_file_bytes()));
  if (p.groups.empty()) {
    pool_ = std::make_unique<numa::ThreadPool>(ResolveThreads(options.n_threads));
    exec_ = pool_.get();
    so.mode = NumaMode::kSingle;
    so.nodes = {0};        // the file mapping is read as is, unless tensors are repacked
    so.copiers = {exec_};  // the repack runs on every worker
  } else if (p.mode == NumaMode::kSingle || p.mode == NumaMode::kInterleave) {
    if (p.groups.size() != 1) {
      return InvalidArgumentError("numa mode ", numa::NumaModeName(p.mode), " runs one pool; got ",
                                  p.groups.size(), " groups");
    }
    const CpuPlacement::Group& g = p.groups[0];
    node_pool_ = std::make_unique<numa::NodePool>(numa::NodePoolOptions{
        .node = g.mem_nodes.at(0), .cpus = g.cpus, .pin = p.pin, .pin_caller = true});
    exec_ = node_pool_.get();
    report_.push_back(PoolLine(*node_pool_, "pool"));
    for (const std::string& w : node_pool_->warnings()) report_.push_back("warning: " + w);
    so.nodes = g.mem_nodes;
    so.copiers = {exec_};
  } else {
    std::vector<numa::NodePoolOptions> opts;
    for (const CpuPlacement::Group& g : p.groups) {
      opts.push_back({.node = g.mem_nodes.at(0), .cpus = g.cpus, .pin = p.pin});
      so.nodes.push_back(g.mem_nodes.at(0));
    }
    fanout_ = std::make_unique<numa::NodeFanout>(std::move(opts));
    for (int g = 0; g < fanout_->num_nodes(); ++g) {
      pools.push_back(&fanout_->pool(g));
      copiers.push_back(std::make_unique<GroupExecutor>(fanout_.get(), g));
      so.copiers.push_back(copiers.back().get());
      report_.push_back(PoolLine(fanout_->pool(g), "pool"));
    }
    for (const std::string& w : fanout_->warnings()) report_.push_back("warning: " + w);
    exec_ = pools[0];
    numa::NodeFanout* f = fanout_.get();
    run_groups = [f](const std::function<void(int)>& fn) {
      f->Run([&](int g, numa::NodePool&) { fn(g); });
    };
  }
  if (pools.empty()) pools = {exec_};
  MOESPLIT_ASSIGN_OR_RETURN(store_, moe::ExpertStore::Build(std::move(layers), so));
  if (!p.groups.empty()) {
    for (const std::string& line : store_->Report()) report_.push_back(line);
  }
  for (const std::string& w : store_->warnings()) report_.push_back("warning: " + w);
  if (store_->repacked_tensors() > 0) {
    report_.push_back(StrCat("experts repacked at load: ", store_->repacked_tensors(), " tensors, ",
                             store_->repacked_bytes() >> 20, " MiB as ",
                             TypeList(store_->repacked_types()),
                             " (16-row groups; --no-repack reads the file layout)"));
  }
  if (store_->kept_tensors() > 0) {
    report_.push_back(StrCat(
        "experts kept in the file layout: ", store_->kept_tensors(),
        " tensors whose repacked layout is larger (iq1_s_r16 58 / 50 bytes, iq1_m_r16 66 / 56, "
        "iq2_xxs_r16 70 / 66, iq2_xs_r16 78 / 74, iq3_xxs_r16 102 / 98): ",
        store_->growth() >> 20, " MiB of growth made, ", store_->kept_growth() >> 20,
        " MiB more would exceed ", p.repack_growth * 100, "% of the file (--repack-growth ",
        static_cast<int>(
            std::ceil(100.0 * static_cast<double>(store_->growth() + store_->kept_growth()) /
                      static_cast<double>(model_.file().total_file_bytes()))),
        " repacks them all: faster decode, more memory)"));
  }
  if (options.backend != nullptr) {
    weights_ = &model_.weights();  // the device gets the file's layout; the CPU repacks nothing
  } else {
    MOESPLIT_RETURN_IF_ERROR(PlaceDenseWeights(p));
  }
  experts_ = std::make_unique<moe::GroupedExperts>(store_.get(), pools, run_groups, kernels_);
  ws_->workers.resize(static_cast<size_t>(exec_->size()));
  if (options.backend == nullptr) return Status::Ok();
  MOESPLIT_ASSIGN_OR_RETURN(
      hybrid_, HybridForward::Create(c, model_.weights(), options.backend, experts_.get(), ctx_,
                                     options.ubatch, device_experts));
  for (const std::string& line : hybrid_->Report()) report_.push_back(line);
  return Status::Ok();
}

Status Engine::PlaceDenseWeights(const CpuPlacement& p) {
  weights_ = &model_.weights();
  if (!p.repack) return Status::Ok();
  // The dense matrices go where the pool that multiplies them (exec_) keeps its memory.
  const int node = p.groups.empty() ? 0 : p.groups[0].mem_nodes.at(0);
  MOESPLIT_ASSIGN_OR_RETURN(DenseRepack dense,
                            RepackDenseWeights(model_.weights(), *kernels_, node, *exec_));
  if (dense.tensors == 0) return Status::Ok();
  report_.push_back(StrCat("dense weights repacked at load: ", dense.tensors, " tensors, ",
                           dense.bytes >> 20, " MiB as ", TypeList(dense.types),
                           " (attention, dense FFN, output head)"));
  for (const std::string& w : dense.buffer.warnings()) report_.push_back("warning: " + w);
  dense_ = std::make_unique<DenseRepack>(std::move(dense));
  weights_ = &dense_->weights;
  return Status::Ok();
}

}  // namespace moesplit::engine
