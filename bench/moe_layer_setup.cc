#include "bench/moe_layer_setup.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <numeric>
#include <random>

#include "cpu_kernels/quant/quant.h"
#include "cpu_kernels/quant/repack.h"

namespace moesplit::bench {
namespace {

constexpr int64_t kSpareBytes = int64_t{2} << 30;  // left to the other users of the machine

// Quantizes one [rows x cols] matrix from random floats to `type`, stores it as `stored` (a
// repack when they differ) into expert 0's slab and copies it to experts 1..E-1: `slab` is
// [E x rows x RowBytes(stored, cols)].
void FillSlab(GgmlType type, GgmlType stored, int64_t rows, int64_t cols, int64_t experts,
              uint32_t seed, uint8_t* slab) {
  const int64_t row_bytes = RowBytes(type, cols);
  const std::vector<float> w = NormalValues(rows * cols, seed, 0.02f);  // [rows x cols]
  std::vector<uint8_t> file(stored == type ? 0 : static_cast<size_t>(rows * row_bytes));
  uint8_t* q = stored == type ? slab : file.data();  // [rows x row_bytes] in the file type
  QuantizeRowsForBench(type, w.data(), rows, cols, q);
  if (stored != type) {
    quant::RepackRows(type, q, static_cast<size_t>(row_bytes), rows, cols, slab);
  }
  const size_t matrix = static_cast<size_t>(rows * RowBytes(stored, cols));
  for (int64_t e = 1; e < experts; ++e) std::memcpy(slab + e * matrix, slab, matrix);
}

TensorView SlabView(const char* name, GgmlType type, int64_t cols, int64_t rows, int64_t experts,
                    const LargeBuffer& buf) {
  TensorView v;
  v.name = name;
  v.type = type;
  v.n_dims = 3;
  v.ne = {cols, rows, experts, 1};
  v.data = buf.data();
  v.nbytes = buf.size();
  return v;
}

// How many experts to build: the model's, capped by MOESPLIT_BENCH_EXPERTS and by free memory.
int64_t ExpertsToBuild(const Variant& v, int64_t expert_bytes) {
  int64_t e = v.experts;
  if (const char* env = std::getenv("MOESPLIT_BENCH_EXPERTS"); env != nullptr && *env != '\0') {
    e = std::clamp<int64_t>(std::atoll(env), v.k, v.experts);
  }
  const int64_t avail = MemAvailableBytes();
  if (avail > 0 && e * expert_bytes > avail - kSpareBytes) {
    const int64_t fit = std::max<int64_t>(v.k, (avail - kSpareBytes) / expert_bytes);
    std::fprintf(stderr,
                 "%s: %lld experts x %.1f MB do not fit in MemAvailable %.1f GB - 2 GiB; "
                 "building %lld\n",
                 v.name, static_cast<long long>(e), expert_bytes * 1e-6, avail * 1e-9,
                 static_cast<long long>(fit));
    e = std::min(e, fit);
  }
  return e;
}

}  // namespace

const ExpertLayer& LayerCache::Get(const Variant& v, const gemv::GemvKernels& kernels) {
  if (layer_ && layer_->variant == &v) return *layer_;
  layer_.reset();  // free the previous variant first
  const auto t0 = std::chrono::steady_clock::now();
  auto l = std::make_unique<ExpertLayer>();
  l->variant = &v;
  l->gate_up_type = v.repack ? gemv::LoadLayout(kernels, v.gate_up, v.f) : v.gate_up;
  l->down_type = v.repack ? gemv::LoadLayout(kernels, v.down, v.d) : v.down;
  const int64_t gate_bytes = RowBytes(l->gate_up_type, v.d) * v.f;  // one expert's gate (= up)
  const int64_t down_bytes = RowBytes(l->down_type, v.f) * v.d;
  l->expert_bytes = 2 * gate_bytes + down_bytes;
  l->experts = ExpertsToBuild(v, l->expert_bytes);
  const int64_t e = l->experts;
  l->gate = LargeBuffer(static_cast<size_t>(e * gate_bytes));
  l->up = LargeBuffer(static_cast<size_t>(e * gate_bytes));
  l->down = LargeBuffer(static_cast<size_t>(e * down_bytes));
  FillSlab(v.gate_up, l->gate_up_type, v.f, v.d, e, 11, l->gate.data());
  FillSlab(v.gate_up, l->gate_up_type, v.f, v.d, e, 12, l->up.data());
  FillSlab(v.down, l->down_type, v.d, v.f, e, 13, l->down.data());
  l->views.gate_exps = SlabView("ffn_gate_exps", l->gate_up_type, v.d, v.f, e, l->gate);
  l->views.up_exps = SlabView("ffn_up_exps", l->gate_up_type, v.d, v.f, e, l->up);
  l->views.down_exps = SlabView("ffn_down_exps", l->down_type, v.f, v.d, e, l->down);
  const std::chrono::duration<double> dt = std::chrono::steady_clock::now() - t0;
  std::fprintf(stderr, "%s: built %lld experts, %.2f GB, in %.1f s\n", v.name,
               static_cast<long long>(e), e * l->expert_bytes * 1e-9, dt.count());
  layer_ = std::move(l);
  return *layer_;
}

RouteSet MakeRoutes(int64_t experts, int k, int64_t n_tok, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<int32_t> rank_to_expert(static_cast<size_t>(experts));
  std::iota(rank_to_expert.begin(), rank_to_expert.end(), 0);
  std::shuffle(rank_to_expert.begin(), rank_to_expert.end(), rng);
  std::vector<double> zipf(static_cast<size_t>(experts));
  for (int64_t r = 0; r < experts; ++r) {
    zipf[static_cast<size_t>(r)] = n_tok == 1 ? 1.0 : 1.0 / static_cast<double>(r + 1);
  }
  std::discrete_distribution<int64_t> pick(zipf.begin(), zipf.end());
  std::uniform_real_distribution<float> gate(0.05f, 1.0f);
  RouteSet s;
  std::vector<char> active(static_cast<size_t>(experts), 0);
  for (int64_t t = 0; t < n_tok; ++t) {
    float sum = 0;
    for (int j = 0; j < k; ++j) {
      int32_t e;
      do {
        e = rank_to_expert[static_cast<size_t>(pick(rng))];
      } while (std::find(s.ids.end() - j, s.ids.end(), e) != s.ids.end());
      s.ids.push_back(e);
      s.weights.push_back(gate(rng));
      sum += s.weights.back();
      active[static_cast<size_t>(e)] = 1;
    }
    for (int j = 0; j < k; ++j) s.weights[static_cast<size_t>(t * k + j)] /= sum;
  }
  s.distinct = std::count(active.begin(), active.end(), 1);
  return s;
}

}  // namespace moesplit::bench
