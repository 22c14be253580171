#include "moe/expert_store.h"

#include <algorithm>
#include <cstring>
#include <sstream>
#include <tuple>

#include "cpu_kernels/quant/repack.h"

namespace moesplit::moe {

FSlice ShardSlice(int64_t F, int64_t block, int group, int n_groups) {
  const int64_t n_blocks = F / block;  // F is a whole number of down blocks (rows of blocks)
  return {block * (n_blocks * group / n_groups), block * (n_blocks * (group + 1) / n_groups)};
}

namespace {

using Layer = ExpertEngine::Layer;
constexpr uint64_t kAlign = 64;
uint64_t Align(uint64_t n) { return (n + kAlign - 1) / kAlign * kAlign; }

bool Present(const TensorView& t) { return t.data != nullptr; }

const char* ModeName(numa::NumaMode m) {
  switch (m) {
    case numa::NumaMode::kSingle:
      return "single";
    case numa::NumaMode::kInterleave:
      return "interleave";
    case numa::NumaMode::kReplicate:
      return "replicate";
    case numa::NumaMode::kShard:
      return "shard";
  }
  return "?";
}

int64_t DownBlock(const TensorView& down) { return GetTypeTraits(down.type).block_size; }

// The tensors of one FFN family (routed or shared) cut to columns/rows [f0, f1) of F, and the
// types they are stored in (the file's, or a repacked layout: gemv::LoadLayout).
struct FamilyCut {
  const TensorView* gate;  // [D, F, E]
  const TensorView* up;    // [D, F, E]
  const TensorView* down;  // [F, D, E]
  FSlice s;
  GgmlType gate_type, up_type, down_type;  // stored types
  uint64_t GateBytes(GgmlType t) const {
    return static_cast<uint64_t>(RowBytes(t, gate->ne[0]) * (s.f1 - s.f0) * gate->ne[2]);
  }
  uint64_t DownBytes() const {
    return static_cast<uint64_t>(RowBytes(down_type, s.f1 - s.f0) * down->ne[1] * down->ne[2]);
  }
  uint64_t Bytes() const {
    return Align(GateBytes(gate_type)) + Align(GateBytes(up_type)) + DownBytes();
  }
};

// Rows of one expert from src (src_stride bytes apart, `cols` values of `from`) to dst as type
// `to`: a copy, or a repack (whole 16-row groups) when the types differ.
void PlaceRows(GgmlType from, GgmlType to, const uint8_t* src, size_t src_stride, int64_t rows,
               int64_t cols, uint8_t* dst) {
  const size_t out_row = static_cast<size_t>(RowBytes(to, cols));
  if (from != to) {
    quant::RepackRows(from, src, src_stride, rows, cols, dst);
  } else if (src_stride == out_row) {
    std::memcpy(dst, src, out_row * static_cast<size_t>(rows));
  } else {
    for (int64_t r = 0; r < rows; ++r)
      std::memcpy(dst + r * out_row, src + r * src_stride, out_row);
  }
}

// Places expert e of a family into the destination slabs (gate/up [D, F_n, E]: F_n contiguous
// rows per expert; down [F_n, D, E]: the F_n columns of each of the expert's D rows).
void CopyExpert(const FamilyCut& c, int64_t e, uint8_t* g, uint8_t* u, uint8_t* d) {
  const int64_t F = c.gate->ne[1], Fn = c.s.f1 - c.s.f0, D0 = c.gate->ne[0];
  const int64_t grb = c.gate->RowBytes(), urb = c.up->RowBytes();
  const auto* gs = static_cast<const uint8_t*>(c.gate->data) + (e * F + c.s.f0) * grb;
  const auto* us = static_cast<const uint8_t*>(c.up->data) + (e * F + c.s.f0) * urb;
  PlaceRows(c.gate->type, c.gate_type, gs, grb, Fn, D0, g + e * Fn * RowBytes(c.gate_type, D0));
  PlaceRows(c.up->type, c.up_type, us, urb, Fn, D0, u + e * Fn * RowBytes(c.up_type, D0));
  const int64_t D = c.down->ne[1], drb = c.down->RowBytes();
  const int64_t off = RowBytes(c.down->type, c.s.f0);
  const auto* ds = static_cast<const uint8_t*>(c.down->data) + e * D * drb + off;
  PlaceRows(c.down->type, c.down_type, ds, drb, D, Fn, d + e * D * RowBytes(c.down_type, Fn));
}

TensorView Cut(const TensorView& t, GgmlType type, uint8_t* data, int64_t f_dim, int64_t Fn) {
  TensorView v = t;
  v.type = type;
  v.ne[f_dim] = Fn;
  v.data = data;
  v.nbytes = static_cast<uint64_t>(RowBytes(v.type, v.ne[0]) * v.ne[1] * v.ne[2] * v.ne[3]);
  return v;
}

// File pages of expert e of tensor t (pages shared with a neighbour expert stay: the release
// rounds inward).
void ReleaseExpert(const TensorView& t, int64_t e) {
  const uint64_t per = t.nbytes / static_cast<uint64_t>(t.ne[2]);
  numa::ReleaseFilePages(static_cast<const uint8_t*>(t.data) + e * per, per);
}

// Places one family into `base` (Bytes() long) with `copier`; returns {gate, up, down} views.
// release: the file pages of each expert go as soon as it is copied (the last group to read
// them), so that resident memory grows by at most the experts in flight, not by a whole layer
// (V3: 256 experts, 6.3-7.3 GB a layer; with the layer-at-once release of before, a 5-layer
// V3 file peaked at 1.44x its size).
void PlaceFamily(const FamilyCut& c, uint8_t* base, moesplit::Executor* copier, bool release,
                 TensorView* g, TensorView* u, TensorView* d) {
  const int64_t Fn = c.s.f1 - c.s.f0;
  const uint64_t gb = Align(c.GateBytes(c.gate_type)), ub = Align(c.GateBytes(c.up_type));
  *g = Cut(*c.gate, c.gate_type, base, 1, Fn);
  *u = Cut(*c.up, c.up_type, base + gb, 1, Fn);
  *d = Cut(*c.down, c.down_type, base + gb + ub, 0, Fn);
  const int64_t E = c.gate->ne[2];
  auto task = [&](int64_t e, int) {
    CopyExpert(c, e, base, base + gb, base + gb + ub);
    if (!release) return;
    for (const TensorView* t : {c.gate, c.up, c.down}) ReleaseExpert(*t, e);
  };
  if (copier != nullptr) {
    copier->ParallelFor(E, task);
  } else {
    for (int64_t e = 0; e < E; ++e) task(e, 0);
  }
}

void ReleaseMapping(const TensorView& t) {
  if (Present(t)) numa::ReleaseFilePages(t.data, t.nbytes);
}

Status CheckLayer(const Layer& l, int64_t il) {
  const int64_t F = l.gate_exps.ne[1], block = DownBlock(l.down_exps);
  if (l.down_exps.ne[0] != F || l.up_exps.ne[1] != F || F % block != 0) {
    return InvalidArgumentError("layer ", il, ": expert shapes do not match (gate F ", F,
                                ", down row ", l.down_exps.ne[0], ", down block ", block, ")");
  }
  return Status::Ok();
}

// Repacks that grow their tensor (kIQ1_S_R16 by 16%, kIQ1_M_R16 18%), decided before anything is
// placed: in layer order (gate, up, down; routed, then shared), each is made while the growth of
// those made stays within `limit` bytes (-1: all are made); the others keep the file layout.
struct GrowthPlan {
  std::vector<const TensorView*> kept;  // tensors in `layers` left in the file layout
  uint64_t made = 0, refused = 0;       // bytes added by the repacks made / that were refused
};
GrowthPlan PlanGrowth(const std::vector<Layer>& layers, const gemv::GemvKernels* kernels,
                      int64_t limit, int64_t copies) {
  GrowthPlan p;
  if (kernels == nullptr) return p;
  for (const Layer& l : layers) {
    if (!Present(l.gate_exps)) continue;
    for (const TensorView* t :
         {&l.gate_exps, &l.up_exps, &l.down_exps, &l.gate_shexp, &l.up_shexp, &l.down_shexp}) {
      if (!Present(*t)) continue;
      const GgmlType to = gemv::LoadLayout(*kernels, t->type, t->ne[1]);
      const int64_t grow = (RowBytes(to, t->ne[0]) - RowBytes(t->type, t->ne[0])) * t->ne[1] *
                           t->ne[2] * t->ne[3] * copies;
      if (grow <= 0) continue;
      if (limit >= 0 && static_cast<int64_t>(p.made) + grow > limit) {
        p.kept.push_back(t);
        p.refused += static_cast<uint64_t>(grow);
      } else {
        p.made += static_cast<uint64_t>(grow);
      }
    }
  }
  return p;
}

}  // namespace

StatusOr<std::unique_ptr<ExpertStore>> ExpertStore::Build(std::vector<Layer> layers,
                                                          const ExpertStoreOptions& o) {
  using numa::NumaMode;
  if (o.nodes.empty()) return InvalidArgumentError("expert store: no NUMA node given");
  const bool per_node = o.mode == NumaMode::kShard || o.mode == NumaMode::kReplicate;
  if (!per_node && o.mode == NumaMode::kSingle && o.nodes.size() != 1) {
    return InvalidArgumentError("numa mode single uses one node, got ", o.nodes.size());
  }
  const int n_groups = per_node ? static_cast<int>(o.nodes.size()) : 1;
  if (!o.copiers.empty() && static_cast<int>(o.copiers.size()) != n_groups) {
    return InvalidArgumentError("expert store: ", o.copiers.size(), " copier pools for ", n_groups,
                                " groups");
  }
  const GrowthPlan growth = PlanGrowth(layers, o.repack_for, o.repack_growth_limit,
                                       o.mode == NumaMode::kReplicate ? n_groups : 1);
  auto cuts = [&](const Layer& l, int g) {
    const int parts = o.mode == NumaMode::kShard ? n_groups : 1;
    const int part = o.mode == NumaMode::kShard ? g : 0;
    std::vector<FamilyCut> out;
    auto family = [&](const TensorView& gate, const TensorView& up, const TensorView& down) {
      const FSlice sl = ShardSlice(gate.ne[1], DownBlock(down), part, parts);
      const int64_t Fn = sl.f1 - sl.f0;
      auto stored = [&](const TensorView& t, int64_t rows) {
        const bool hold =
            std::find(growth.kept.begin(), growth.kept.end(), &t) != growth.kept.end();
        return o.repack_for == nullptr || hold ? t.type
                                               : gemv::LoadLayout(*o.repack_for, t.type, rows);
      };
      out.push_back(
          {&gate, &up, &down, sl, stored(gate, Fn), stored(up, Fn), stored(down, down.ne[1])});
    };
    family(l.gate_exps, l.up_exps, l.down_exps);
    if (Present(l.gate_shexp)) family(l.gate_shexp, l.up_shexp, l.down_shexp);
    return out;
  };
  bool repack = false;  // some tensor changes layout: the store must copy
  for (const Layer& l : layers) {
    if (!Present(l.gate_exps)) continue;
    for (int g = 0; g < n_groups; ++g) {
      for (const FamilyCut& c : cuts(l, g)) {
        repack = repack || c.gate_type != c.gate->type || c.up_type != c.up->type ||
                 c.down_type != c.down->type;
      }
    }
  }
  const bool copy =
      per_node || o.copy || repack || (o.mode == NumaMode::kInterleave && o.nodes.size() > 1);
  std::unique_ptr<ExpertStore> s(new ExpertStore());
  s->mode_ = o.mode;
  s->kept_tensors_ = static_cast<int64_t>(growth.kept.size());
  s->kept_growth_ = growth.refused;
  s->growth_ = growth.made;
  s->nodes_ = o.nodes;
  s->groups_.assign(n_groups, layers);
  s->group_bytes_.assign(n_groups, 0);
  if (!copy) {
    for (const Layer& l : layers) {
      for (const TensorView* t : {&l.gate_exps, &l.up_exps, &l.down_exps}) {
        if (Present(*t)) s->group_bytes_[0] += t->nbytes;
      }
    }
    return s;
  }
  for (int64_t il = 0; il < static_cast<int64_t>(layers.size()); ++il) {
    if (Present(layers[il].gate_exps)) MOESPLIT_RETURN_IF_ERROR(CheckLayer(layers[il], il));
  }
  // Bytes per (group, layer): routed + shared families, each cut to the group's slice.

  uint64_t total = 0, done = 0;
  for (const Layer& l : layers) {
    if (!Present(l.gate_exps)) continue;
    for (int g = 0; g < n_groups; ++g) {
      for (const FamilyCut& c : cuts(l, g)) total += c.Bytes();
    }
  }
  s->buffers_.resize(n_groups);
  for (int64_t il = 0; il < static_cast<int64_t>(layers.size()); ++il) {
    const Layer& l = layers[il];
    if (!Present(l.gate_exps)) continue;
    for (int g = 0; g < n_groups; ++g) {
      moesplit::Executor* copier = o.copiers.empty() ? nullptr : o.copiers[g];
      const std::vector<FamilyCut> fam = cuts(l, g);
      uint64_t bytes = 0;
      for (const FamilyCut& c : fam) bytes += Align(c.Bytes());
      const std::vector<int> mem =
          per_node ? std::vector<int>{o.nodes[g]} : o.nodes;  // interleave: all of them
      // No first touch: the copier's workers write every page (on the node the policy binds),
      // so the layer's buffer becomes resident as its experts are copied and released.
      MOESPLIT_ASSIGN_OR_RETURN(
          numa::NodeBuffer buf,
          numa::AllocateOnNodes(bytes, {.nodes = mem, .huge_pages = o.huge_pages, .touch = false}));
      const bool release = o.release_mapping && g == n_groups - 1;
      for (const std::string& w : buf.warnings()) {
        if (std::find(s->warnings_.begin(), s->warnings_.end(), w) == s->warnings_.end()) {
          s->warnings_.push_back(w);
        }
      }
      Layer& dst = s->groups_[g][il];
      uint8_t* p = buf.data();
      for (size_t f = 0; f < fam.size(); ++f) {
        if (fam[f].s.f1 == fam[f].s.f0) {  // an empty slice: this group skips the family
          TensorView* views[3] = {f == 0 ? &dst.gate_exps : &dst.gate_shexp,
                                  f == 0 ? &dst.up_exps : &dst.up_shexp,
                                  f == 0 ? &dst.down_exps : &dst.down_shexp};
          for (TensorView* v : views) *v = TensorView{};
          continue;
        }
        if (f == 0) {
          PlaceFamily(fam[f], p, copier, release, &dst.gate_exps, &dst.up_exps, &dst.down_exps);
        } else {
          PlaceFamily(fam[f], p, copier, release, &dst.gate_shexp, &dst.up_shexp, &dst.down_shexp);
        }
        const FamilyCut& c = fam[f];
        for (const auto& [from, to, bytes] :
             {std::tuple{c.gate->type, c.gate_type, c.GateBytes(c.gate_type)},
              std::tuple{c.up->type, c.up_type, c.GateBytes(c.up_type)},
              std::tuple{c.down->type, c.down_type, c.DownBytes()}}) {
          if (from == to) continue;
          ++s->repacked_tensors_;
          s->repacked_bytes_ += bytes;
          auto& types = s->repacked_types_;
          if (std::find(types.begin(), types.end(), to) == types.end()) types.push_back(to);
        }
        p += Align(fam[f].Bytes());
        s->group_bytes_[g] += fam[f].Bytes();
      }
      s->buffers_[g].push_back(std::move(buf));
      done += bytes;
    }
    if (o.release_mapping) {
      for (const TensorView* t :
           {&l.gate_exps, &l.up_exps, &l.down_exps, &l.gate_shexp, &l.up_shexp, &l.down_shexp}) {
        ReleaseMapping(*t);
      }
    }
    if (o.progress) o.progress(std::min(done, total), total);
  }
  return s;
}

std::vector<std::string> ExpertStore::Report() const {
  std::vector<std::string> lines;
  for (int g = 0; g < num_groups(); ++g) {
    std::ostringstream s;
    std::string warning;
    s << "experts group " << g << " (" << ModeName(mode_) << ", node";
    const bool per_node = static_cast<int>(nodes_.size()) == num_groups();
    if (per_node) {
      s << " " << nodes_[g];
    } else {
      s << "s";
      for (int n : nodes_) s << " " << n;
    }
    s << "): " << group_bytes_[g] / (1 << 20) << " MiB";
    if (buffers_.empty()) {
      s << " in the file mapping";
    } else {
      int64_t pages = 0, sampled = 0;
      std::vector<std::pair<int, int64_t>> by_node;
      for (const numa::NodeBuffer& b : buffers_[g]) {
        StatusOr<numa::PlacementReport> r = numa::QueryPlacement(b.data(), b.size(), 64);
        if (!r.ok()) continue;
        sampled += r->sampled;
        for (size_t i = 0; i < r->node_ids.size(); ++i) {
          auto it = std::find_if(by_node.begin(), by_node.end(),
                                 [&](auto& p) { return p.first == r->node_ids[i]; });
          if (it == by_node.end()) {
            by_node.push_back({r->node_ids[i], r->node_pages[i]});
          } else {
            it->second += r->node_pages[i];
          }
          pages += r->node_pages[i];
        }
      }
      s << ", pages on";
      for (auto& [node, n] : by_node)
        s << " node " << node << " " << (100 * n / std::max<int64_t>(1, sampled)) << "%";
      if (by_node.empty()) s << " (unknown: move_pages unavailable)";
      // The classic NUMA failure is silent: pages that fell back to another node.
      numa::PlacementReport group;
      group.sampled = sampled;
      for (auto& [node, n] : by_node) {
        group.node_ids.push_back(node);
        group.node_pages.push_back(n);
      }
      const std::vector<int> planned = per_node ? std::vector<int>{nodes_[g]} : nodes_;
      warning = numa::PlacementMismatch(group, planned);
    }
    lines.push_back(s.str());
    if (!warning.empty()) {
      lines.push_back("warning: experts group " + std::to_string(g) + ": " + warning);
    }
  }
  return lines;
}

}  // namespace moesplit::moe
