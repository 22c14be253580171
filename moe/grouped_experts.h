// GroupedExperts: one MoE layer's routed (+ shared) experts over the compute groups of an
// ExpertStore — one ExpertEngine per group, each on its own pinned pool, run concurrently:
//
//   single / interleave  1 group: the plain fused path on one pool;
//   shard                every group runs every active expert on its slice of F; the partial
//                        outputs are summed (partial g: [T x D] f32, T*D*4 bytes = 28 KB per
//                        group for one V3 token — noise next to the ~190 MB of weights read);
//   replicate            active experts are dealt to the groups, biggest token count first to
//                        the least loaded group (decode: 8 experts over 2 nodes = 4 + 4); the
//                        shared expert goes to the group with the least work; partials summed.
// One fan-out runs the groups' layer work, a second one sums the partials by column block, so a
// layer costs the groups' two barriers each plus two fan-out hand-offs.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "cpu_kernels/gemv/gemv.h"
#include "moe/expert_engine.h"
#include "moe/expert_store.h"
#include "core/base/executor.h"

namespace moesplit::moe {

// Runs fn(group) once for every group, all concurrently, and returns when all have returned
// (e.g. numa::NodeFanout::Run; tests may use plain threads).
using RunGroupsFn = std::function<void(const std::function<void(int group)>& fn)>;

class GroupedExperts {
 public:
  // pools: [store->num_groups()] the executor of each group; run_groups may be empty when there is
  // one group.
  GroupedExperts(const ExpertStore* store, std::vector<moesplit::Executor*> pools,
                 RunGroupsFn run_groups, const gemv::GemvKernels* kernels);

  // out[T x D] = the mixture of layer il's experts for hidden[T x D], ids/weights [T x k].
  void Forward(int64_t il, const float* hidden, int64_t n_tok, const int32_t* ids,
               const float* weights, int k, float* out);

  int num_groups() const { return static_cast<int>(engines_.size()); }
  ExpertEngine& engine(int group) { return *engines_[group]; }

 private:
  void AssignExperts(const ExpertEngine::Layer& layer, int64_t n_tok, const int32_t* ids, int k);

  const ExpertStore* store_;
  RunGroupsFn run_groups_;
  std::vector<std::unique_ptr<ExpertEngine>> engines_;  // [groups]
  std::vector<std::vector<float>> partial_;             // [groups][T x D]; group 0 unused
  std::vector<std::vector<uint8_t>> use_;               // [groups][E] replicate: experts dealt
  int shared_group_ = 0;                                // replicate: who runs the shared expert
};

}  // namespace moesplit::moe
