// ExpertStore: where the routed (and shared) expert weights of every MoE layer live for a NUMA
// mode, as views the fused driver reads (ExpertEngine::Layer), one set per compute group:
//
//   single      1 group, the file mapping as is (or, with copy = true, one copy bound to the node)
//   interleave  1 group over all nodes' CPUs; a copy interleaved page by page over the nodes
//   replicate   1 group per node, each with a full copy on its node (memory x nodes)
//   shard       1 group per node, each holding the slice [f0, f1) of every expert's intermediate
//               dimension: gate/up rows f0..f1 and the matching columns of down (1x memory);
//               the groups' partial outputs sum to the full FFN, because
//               down (silu(gate x) * up x) = sum over slices s of down[:, s] (silu(gate[s] x) *
//               up[s] x).
//
// Slice edges fall on multiples of the down tensor's quant block (256 values for K-quants, 32 for
// Q8_0) so every slice is a valid row of blocks: DeepSeek-V3's F = 2048 over 2 nodes = 2 x 1024.
// Copies are made by the group's own (pinned) workers into node-bound memory, which places the
// pages by first touch even where mbind is refused; the file's pages of a copied tensor are
// then released (MADV_DONTNEED), so a copy replaces the mapping instead of doubling RSS.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/base/status.h"
#include "cpu_kernels/gemv/gemv.h"
#include "moe/expert_engine.h"
#include "core/base/executor.h"
#include "numa/node_memory.h"
#include "numa/plan.h"

namespace moesplit::moe {

struct ExpertStoreOptions {
  numa::NumaMode mode = numa::NumaMode::kSingle;
  // OS node id of each compute group's memory: 1 entry for single, the nodes to interleave over
  // for interleave (1 group), one per group for replicate / shard. Ids may repeat (a "fake node
  // map": tests shard over two groups that both live on node 0 of a one-node machine).
  std::vector<int> nodes;
  // [groups] the pinned workers of each group: they copy (and so first-touch) its weights.
  // nullptr entries copy on the calling thread.
  std::vector<moesplit::Executor*> copiers;
  bool copy = false;  // single: copy to node memory instead of reading the file mapping
  bool huge_pages = true;
  // MADV_DONTNEED the file pages of every copied tensor, expert by expert as each is copied
  // (by the last group that reads it): resident memory stays near the file's size plus the
  // experts in flight while the store fills.
  bool release_mapping = true;
  // When set: every expert tensor whose gemv::LoadLayout for these kernels differs from its
  // file type (Q4_K / Q5_K / Q6_K / Q8_0 / Q5_0 / Q5_1 / Q4_0 / Q4_1 -> the *_R16 layouts on
  // AVX-512 VNNI; Q2_K / Q3_K / Q4_0 on AVX2) is repacked into that layout while it is placed; any
  // repacked tensor makes the store copy (mode single included), in parallel on the copiers, and
  // releases the file pages (the repacked copy replaces the mapping).
  const gemv::GemvKernels* repack_for = nullptr;
  // Bytes by which repacked layouts may outgrow the file layout's, over all expert tensors and
  // copies (-1: no limit). kIQ1_S_R16 / kIQ1_M_R16 grow much (58 / 50, 66 / 56 bytes;
  // kIQ2_XXS_R16 70 / 66, kIQ2_XS_R16 78 / 74, kIQ3_XXS_R16 102 / 98; the others keep the size):
  // such repacks are made in layer order while their growth fits, the rest of those tensors keep
  // the file layout (kept_tensors).
  int64_t repack_growth_limit = -1;
  // Called after each layer is placed: (bytes placed so far, total bytes to place).
  std::function<void(uint64_t done, uint64_t total)> progress;
};

class ExpertStore {
 public:
  // layers: [n_layer] the model's expert tensors in the file mapping (a dense layer has
  // gate_exps.data == nullptr and is kept as is).
  static StatusOr<std::unique_ptr<ExpertStore>> Build(std::vector<ExpertEngine::Layer> layers,
                                                      const ExpertStoreOptions& options);

  numa::NumaMode mode() const { return mode_; }
  int num_groups() const { return static_cast<int>(groups_.size()); }
  // Group g's view of layer il: its slice (shard), its copy (replicate), or the shared view.
  // A group with an empty slice of a layer has gate_exps.data == nullptr there.
  const ExpertEngine::Layer& layer(int group, int64_t il) const { return groups_[group][il]; }
  uint64_t group_bytes(int group) const { return group_bytes_[group]; }
  bool copied() const { return !buffers_.empty(); }
  // Expert tensors stored in a repacked layout (one per tensor and group), and their bytes.
  int64_t repacked_tensors() const { return repacked_tensors_; }
  uint64_t repacked_bytes() const { return repacked_bytes_; }
  // The layouts they were repacked into, in order of first use ("q4_K_r16, q8_0_r16").
  const std::vector<GgmlType>& repacked_types() const { return repacked_types_; }
  // Tensors left in their file layout by repack_growth_limit (counted once, not per group), and
  // the bytes their repack would have added on top of the limit's use.
  int64_t kept_tensors() const { return kept_tensors_; }
  uint64_t kept_growth() const { return kept_growth_; }
  uint64_t growth() const { return growth_; }  // bytes the repacks made added
  // One line per group: node(s), expert bytes, and where the pages really are (move_pages).
  std::vector<std::string> Report() const;
  const std::vector<std::string>& warnings() const { return warnings_; }

 private:
  ExpertStore() = default;
  numa::NumaMode mode_ = numa::NumaMode::kSingle;
  std::vector<int> nodes_;
  std::vector<std::vector<ExpertEngine::Layer>> groups_;  // [groups][n_layer]
  std::vector<uint64_t> group_bytes_;                     // [groups]
  std::vector<std::vector<numa::NodeBuffer>> buffers_;    // [groups][layers placed]
  std::vector<std::string> warnings_;
  int64_t repacked_tensors_ = 0;
  uint64_t repacked_bytes_ = 0;
  std::vector<GgmlType> repacked_types_;
  int64_t kept_tensors_ = 0;
  uint64_t kept_growth_ = 0, growth_ = 0;
};

// The slice of F (in values) that group g of n gets: block-aligned, contiguous, covering [0, F).
struct FSlice {
  int64_t f0 = 0, f1 = 0;
};
FSlice ShardSlice(int64_t F, int64_t block, int group, int n_groups);

}  // namespace moesplit::moe
