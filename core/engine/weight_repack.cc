#include "core/engine/weight_repack.h"

#include <algorithm>

#include "core/base/int_math.h"
#include "cpu_kernels/quant/repack.h"

namespace moesplit::engine {

namespace {

constexpr int64_t kAlign = 64;
// Rows per repack task: whole 16-row groups, ~1 MB of output per task (a 129280-row V3 output
// head is ~760 tasks, enough to balance over any pool; a 576-row projection is one).
constexpr int64_t kTaskBytes = int64_t{1} << 20;

// The dense matrices of `w` the forward pass multiplies (see the header for the others); the
// split MLA maps attn_k_b [nope, L, H] / attn_v_b [L, v, H] are H matrices of ne[1] rows each,
// taken per head (MapsForHead): a group never straddles two heads when ne[1] is a multiple of 16.
std::vector<TensorView*> Candidates(ModelWeights* w) {
  std::vector<TensorView*> out;
  if (w->output.data != nullptr && w->output.data != w->token_embd.data) out.push_back(&w->output);
  for (LayerWeights& l : w->layers) {
    for (TensorView* t :
         {&l.attn_q_a, &l.attn_q_b, &l.attn_q, &l.attn_kv_a_mqa, &l.attn_k_b, &l.attn_v_b,
          &l.attn_output, &l.attn_k, &l.attn_v, &l.ffn_gate, &l.ffn_up, &l.ffn_down}) {
      if (t->data != nullptr && t->ne[3] == 1) out.push_back(t);
    }
  }
  return out;
}

// rows x cols of `from` at src -> `to` at dst, in tasks of whole groups on `pool`.
void RepackMatrix(GgmlType from, GgmlType to, const uint8_t* src, int64_t rows, int64_t cols,
                  uint8_t* dst, moesplit::Executor& pool) {
  const int64_t src_row = RowBytes(from, cols), dst_row = RowBytes(to, cols);
  const int64_t group = quant::kR16Rows;
  const int64_t per_task = group * std::max<int64_t>(1, kTaskBytes / (group * dst_row));
  pool.ParallelFor(CeilDiv(rows, per_task), [&](int64_t task, int) {
    const int64_t r0 = task * per_task, n = std::min(rows - r0, per_task);
    quant::RepackRows(from, src + r0 * src_row, static_cast<size_t>(src_row), n, cols,
                      dst + r0 * dst_row);
  });
}

}  // namespace

StatusOr<DenseRepack> RepackDenseWeights(const ModelWeights& w, const gemv::GemvKernels& kernels,
                                         int node, moesplit::Executor& pool) {
  DenseRepack r;
  r.weights = w;
  struct Item {
    TensorView* view;
    GgmlType to;
    uint64_t offset;  // into the buffer
  };
  std::vector<Item> items;
  uint64_t total = 0;
  for (TensorView* t : Candidates(&r.weights)) {
    const GgmlType to = gemv::LoadLayout(kernels, t->type, t->ne[1]);
    if (to == t->type) continue;
    items.push_back({t, to, total});
    total += static_cast<uint64_t>(RoundUp(RowBytes(to, t->ne[0]) * t->NumRows(), kAlign));
  }
  if (items.empty()) return r;
  MOESPLIT_ASSIGN_OR_RETURN(r.buffer, numa::AllocateOnNodes(static_cast<size_t>(total),
                                                            {.nodes = {node}, .toucher = &pool}));
  for (const Item& it : items) {
    TensorView& t = *it.view;
    uint8_t* dst = r.buffer.data() + it.offset;
    RepackMatrix(t.type, it.to, static_cast<const uint8_t*>(t.data), t.NumRows(), t.ne[0], dst,
                 pool);
    numa::ReleaseFilePages(t.data, t.nbytes);
    t.type = it.to;
    t.data = dst;
    t.nbytes = static_cast<uint64_t>(RowBytes(it.to, t.ne[0]) * t.NumRows());
    ++r.tensors;
    r.bytes += t.nbytes;
    if (std::find(r.types.begin(), r.types.end(), it.to) == r.types.end()) r.types.push_back(it.to);
  }
  return r;
}

}  // namespace moesplit::engine
