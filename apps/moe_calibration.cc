#include "apps/moe_calibration.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <numeric>
#include <random>
#include <thread>

#include "core/base/dtype.h"
#include "core/base/random_values.h"
#include "core/base/status.h"
#include "core/base/tensor_view.h"
#include "cpu_kernels/gemv/gemv.h"
#include "cpu_kernels/qmatmul/qmatmul.h"
#include "cpu_kernels/quant/quant.h"
#include "cpu_kernels/quant/repack.h"
#include "moe/expert_engine.h"
#include "numa/node_memory.h"
#include "numa/node_pool.h"

namespace moesplit::app {
namespace {

using Clock = std::chrono::steady_clock;

constexpr int64_t kD = 2048;  // hidden size
constexpr int64_t kF = 1408;  // expert FFN width
constexpr int64_t kExperts = 64;
constexpr int kTopK = 6;
constexpr GgmlType kGateUp = GgmlType::kQ4_K;
constexpr GgmlType kDown = GgmlType::kQ8_0;
constexpr int64_t kPatternRows = 64;  // distinct quantized rows per matrix; the rest are copies
// DeepSeek-V3's routed expert (moe_calibration.h: MeasureExpertDecodeGbps): D 7168, F 2048,
// top-8; every K-quant and lattice block fits both widths.
constexpr int64_t kExpertD = 7168;
constexpr int64_t kExpertF = 2048;
constexpr int kExpertTopK = 8;

double Seconds(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

// kPatternRows quantized rows of `type`, `cols` wide: [kPatternRows x RowBytes(type, cols)].
std::vector<uint8_t> PatternRows(GgmlType type, int64_t cols, uint32_t seed) {
  const int64_t rb = RowBytes(type, cols);
  const std::vector<float> w = NormalValues(kPatternRows * cols, seed, 0.02f);
  std::vector<uint8_t> out(static_cast<size_t>(kPatternRows * rb));
  for (int64_t r = 0; r < kPatternRows; ++r) {
    quant::QuantizeRow(type, w.data() + r * cols, out.data() + r * rb, cols);
  }
  return out;
}

// `rows` rows of `rb` bytes at dst, cycling through the pattern's kPatternRows rows.
void FillRows(uint8_t* dst, int64_t rows, const std::vector<uint8_t>& pattern, int64_t rb) {
  for (int64_t r = 0; r < rows; ++r) {
    std::memcpy(dst + r * rb, pattern.data() + (r % kPatternRows) * rb, static_cast<size_t>(rb));
  }
}

// One layer of `experts` experts in one node buffer: gate [E x F x rb(D)], up (same), down
// [E x D x rb(F)], filled expert by expert by the pool's pinned workers (first touch).
struct LayerCopy {
  numa::NodeBuffer buf;
  moe::ExpertEngine::Layer views;
};

TensorView Slab(const char* name, GgmlType type, int64_t cols, int64_t rows, int64_t experts,
                const uint8_t* data) {
  TensorView v;
  v.name = name;
  v.type = type;
  v.n_dims = 3;
  v.ne = {cols, rows, experts, 1};
  v.data = data;
  v.nbytes = static_cast<uint64_t>(RowBytes(type, cols) * rows * experts);
  return v;
}

StatusOr<LayerCopy> BuildLayer(int node, int64_t experts, moesplit::Executor& pool) {
  const int64_t gate_bytes = RowBytes(kGateUp, kD) * kF;  // one expert's gate (= up): 1.62 MB
  const int64_t down_bytes = RowBytes(kDown, kF) * kD;    // 3.06 MB
  const int64_t total = experts * (2 * gate_bytes + down_bytes);
  LayerCopy l;
  MOESPLIT_ASSIGN_OR_RETURN(l.buf, numa::AllocateOnNodes(static_cast<size_t>(total),
                                                         {.nodes = {node}, .toucher = &pool}));
  uint8_t* gate = l.buf.data();
  uint8_t* up = gate + experts * gate_bytes;
  uint8_t* down = up + experts * gate_bytes;
  const std::vector<uint8_t> pg = PatternRows(kGateUp, kD, 11);
  const std::vector<uint8_t> pd = PatternRows(kDown, kF, 13);
  const int64_t rb_g = RowBytes(kGateUp, kD), rb_d = RowBytes(kDown, kF);
  pool.ParallelFor(experts, [&](int64_t e, int) {
    FillRows(gate + e * gate_bytes, kF, pg, rb_g);
    FillRows(up + e * gate_bytes, kF, pg, rb_g);
    FillRows(down + e * down_bytes, kD, pd, rb_d);
  });
  l.views.gate_exps = Slab("ffn_gate_exps", kGateUp, kD, kF, experts, gate);
  l.views.up_exps = Slab("ffn_up_exps", kGateUp, kD, kF, experts, up);
  l.views.down_exps = Slab("ffn_down_exps", kDown, kF, kD, experts, down);
  return l;
}

// ids / weights [n_tok x k]: k distinct experts per token; uniform for decode, Zipf(1) over a
// random ranking for prefill (a router's load is uneven).
void Routes(int64_t experts, int64_t n_tok, bool zipf, uint32_t seed, std::vector<int32_t>* ids,
            std::vector<float>* weights, int top_k = kTopK) {
  std::mt19937 rng(seed);
  std::vector<int32_t> rank(static_cast<size_t>(experts));
  std::iota(rank.begin(), rank.end(), 0);
  std::shuffle(rank.begin(), rank.end(), rng);
  std::vector<double> p(static_cast<size_t>(experts));
  for (int64_t r = 0; r < experts; ++r) p[static_cast<size_t>(r)] = zipf ? 1.0 / (r + 1) : 1.0;
  std::discrete_distribution<int64_t> pick(p.begin(), p.end());
  const int k = static_cast<int>(std::min<int64_t>(top_k, experts));
  for (int64_t t = 0; t < n_tok; ++t) {
    for (int j = 0; j < k; ++j) {
      int32_t e;
      do {
        e = rank[static_cast<size_t>(pick(rng))];
      } while (std::find(ids->end() - j, ids->end(), e) != ids->end());
      ids->push_back(e);
      weights->push_back(1.0f / k);
    }
  }
}

// One warm-up pass(0), then `passes` timed passes, pass p called as pass((p + 1) x stride) (the
// route set it starts at): the median GB/s, each pass reading `bytes`.
template <typename Pass>
double MedianPassGbps(int passes, int64_t stride, double bytes, Pass&& pass) {
  pass(0);
  std::vector<double> gbps;
  for (int p = 0; p < passes; ++p) {
    const Clock::time_point t0 = Clock::now();
    pass((p + 1) * stride);
    gbps.push_back(bytes / Seconds(t0, Clock::now()) * 1e-9);
  }
  return Median(gbps);
}

// Decode's route sets in rotation: kDecodeRouteSets single-token sets of top_k uniform experts
// (set s from seed + s), ids / weights [kDecodeRouteSets x min(top_k, experts)].
constexpr int kDecodeRouteSets = 64;
void DecodeRouteSets(int64_t experts, uint32_t seed, int top_k, std::vector<int32_t>* ids,
                     std::vector<float>* weights) {
  for (int s = 0; s < kDecodeRouteSets; ++s) {
    Routes(experts, 1, false, seed + s, ids, weights, top_k);
  }
}

template <typename Fn>
void OnFreshThread(Fn&& fn) {
  std::thread t(std::forward<Fn>(fn));
  t.join();
}

// The buffer's own warnings and where its pages really are (move_pages on 256 samples).
void AddBufferWarnings(const numa::NodeBuffer& buf, int node, std::vector<std::string>* warnings) {
  for (const std::string& w : buf.warnings()) warnings->push_back(w);
  StatusOr<numa::PlacementReport> r = numa::QueryPlacement(buf.data(), buf.size(), 256);
  if (!r.ok()) {
    warnings->push_back("weights placement not verified: " + r.status().message());
  } else if (r->node_ids.size() != 1 || r->node_ids[0] != node) {
    warnings->push_back(StrCat("weights not all on node ", node, ": ", r->Summary()));
  }
}

void PoolWarnings(const numa::NodePool& pool, std::vector<std::string>* warnings) {
  for (const std::string& w : pool.warnings()) warnings->push_back("calibration pool: " + w);
}

// Runs fn(pool, buffer) on a fresh thread: a pool of workers pinned to `cpus` of the node (the
// caller among them) and `bytes` bound to the node, first touched by the pool. Returns fn's
// figure, or the allocation's error.
template <typename Fn>
StatusOr<double> OnPinnedPool(const numa::NumaNode& node, std::vector<int> cpus, size_t bytes,
                              std::vector<std::string>* warnings, Fn&& fn) {
  StatusOr<double> result = 0.0;
  OnFreshThread([&] {
    numa::NodePool pool({.node = node.id, .cpus = std::move(cpus), .pin_caller = true});
    PoolWarnings(pool, warnings);
    StatusOr<numa::NodeBuffer> buf =
        numa::AllocateOnNodes(bytes, {.nodes = {node.id}, .toucher = &pool});
    if (!buf.ok()) {
      result = buf.status();
      return;
    }
    result = fn(pool, *buf);
  });
  return result;
}

}  // namespace

StatusOr<double> MeasureMoeDecodeGbps(const numa::NumaNode& node, int threads,
                                      const MeasureOptions& options,
                                      std::vector<std::string>* warnings) {
  const std::vector<int> primary = node.PrimaryCpus();
  MOESPLIT_CHECK(threads >= 1 && threads <= static_cast<int>(primary.size()));
  const int64_t experts = options.quick ? 8 : kExperts;
  const int64_t expert_bytes = 2 * RowBytes(kGateUp, kD) * kF + RowBytes(kDown, kF) * kD;
  // Copies of the layer: options.bytes of weights (1 GiB -> 2 copies of 404 MB, at least 2).
  const int64_t copies =
      options.quick ? 1 : std::max<int64_t>(2, options.bytes / (experts * expert_bytes));
  StatusOr<double> result = 0.0;
  OnFreshThread([&] {
    numa::NodePool pool({.node = node.id,
                         .cpus = std::vector<int>(primary.begin(), primary.begin() + threads),
                         .pin_caller = true});
    PoolWarnings(pool, warnings);
    std::vector<LayerCopy> layers;
    for (int64_t c = 0; c < copies; ++c) {
      StatusOr<LayerCopy> l = BuildLayer(node.id, experts, pool);
      if (!l.ok()) {
        result = l.status();
        return;
      }
      AddBufferWarnings(l->buf, node.id, warnings);
      layers.push_back(std::move(*l));
    }
    std::vector<int32_t> ids;
    std::vector<float> weights;
    DecodeRouteSets(experts, 100, kTopK, &ids, &weights);
    const int k = static_cast<int>(std::min<int64_t>(kTopK, experts));
    const std::vector<float> hidden = NormalValues(kD, 7, 1.0f);  // [1 x D]
    std::vector<float> out(kD);                                   // [1 x D]
    moe::ExpertEngine engine(&pool, &gemv::KernelsFor(options.tier, options.decode_read));
    const int64_t steps = copies * 16;  // token-layers per timed pass
    auto pass = [&](int64_t first) {
      for (int64_t i = 0; i < steps; ++i) {
        const int64_t s = (first + i) % kDecodeRouteSets;
        engine.Forward(layers[static_cast<size_t>(i % copies)].views, hidden.data(), 1,
                       ids.data() + s * k, weights.data() + s * k, k, out.data());
      }
    };
    result = MedianPassGbps(options.passes, 7, static_cast<double>(steps * k * expert_bytes), pass);
  });
  return result;
}

StatusOr<double> MeasureMoePrefillGmacs(const numa::NumaNode& node, int64_t tokens,
                                        const MeasureOptions& options,
                                        std::vector<std::string>* warnings) {
  const int cpu = node.PrimaryCpus().front();
  const int64_t experts = options.quick ? 8 : kExperts;
  StatusOr<double> result = 0.0;
  OnFreshThread([&] {
    numa::NodePool pool({.node = node.id, .cpus = {cpu}, .pin_caller = true});
    PoolWarnings(pool, warnings);
    StatusOr<LayerCopy> l = BuildLayer(node.id, experts, pool);
    if (!l.ok()) {
      result = l.status();
      return;
    }
    std::vector<int32_t> ids;
    std::vector<float> weights;
    Routes(experts, tokens, true, 5, &ids, &weights);
    const int k = static_cast<int>(std::min<int64_t>(kTopK, experts));
    const std::vector<float> hidden = NormalValues(tokens * kD, 7, 1.0f);  // [tokens x D]
    std::vector<float> out(static_cast<size_t>(tokens * kD));              // [tokens x D]
    moe::ExpertEngine engine(&pool, &gemv::KernelsFor(options.tier, options.decode_read));
    const double macs = static_cast<double>(tokens) * k * 3 * kD * kF;
    const int runs = options.quick ? 2 : 4;  // the first is a warm-up
    std::vector<double> gmacs;
    for (int r = 0; r < runs; ++r) {
      const Clock::time_point t0 = Clock::now();
      engine.Forward(l->views, hidden.data(), tokens, ids.data(), weights.data(), k, out.data());
      if (r > 0) gmacs.push_back(macs / Seconds(t0, Clock::now()) * 1e-9);
    }
    result = Median(gmacs);
  });
  return result;
}

StatusOr<double> MeasureDenseGmacs(const numa::NumaNode& node, GgmlType type,
                                   const MeasureOptions& options,
                                   std::vector<std::string>* warnings) {
  // V2-Lite's shared-expert gate: 2 x 1408 = 2816 rows x 2048, Q4_K (6.5 MB); --quick: 256 rows.
  const int64_t rows = options.quick ? 256 : 2 * kF, cols = kD;
  const int64_t tokens = options.quick ? 64 : 512;
  const int64_t rb = RowBytes(type, cols);
  return OnPinnedPool(
      node, std::vector<int>{node.PrimaryCpus().front()}, static_cast<size_t>(rows * rb), warnings,
      [&](numa::NodePool& pool, numa::NodeBuffer& buf) {
        FillRows(buf.data(), rows, PatternRows(type, cols, 17), rb);
        const matmul::WeightMatrix w{
            .type = type, .data = buf.data(), .cols = cols, .rows = rows, .row_bytes = rb};
        const std::vector<float> x = NormalValues(tokens * cols, 3, 1.0f);  // [tokens x cols]
        std::vector<float> y(static_cast<size_t>(tokens * rows));           // [tokens x rows]
        qmatmul::QuantizedRows scratch;
        const gemv::GemvKernels& k = gemv::KernelsFor(options.tier, options.decode_read);
        const int runs = options.quick ? 2 : 4;  // the first is a warm-up
        std::vector<double> gmacs;
        for (int r = 0; r < runs; ++r) {
          const Clock::time_point t0 = Clock::now();
          qmatmul::MatMul(pool, k, w, x.data(), cols, tokens, y.data(), rows, &scratch);
          if (r > 0) {
            gmacs.push_back(static_cast<double>(tokens * rows * cols) / Seconds(t0, Clock::now()) *
                            1e-9);
          }
        }
        return Median(gmacs);
      });
}

StatusOr<double> MeasureFfnGmacs(const numa::NumaNode& node, const MeasureOptions& options,
                                 std::vector<std::string>* warnings) {
  // D 2048 -> F 11264 (V2-Lite's dense 10944 rounded up to a multiple of 256), all q4_K: gate
  // and up 2 x 13 MB, down 13 MB; 512 x 3 x 2048 x 11264 = 35.4 G multiply-adds per run.
  const int64_t f = options.quick ? 1024 : 11264;
  const int64_t tokens = options.quick ? 64 : 512;
  const int64_t rb_in = RowBytes(kGateUp, kD), rb_out = RowBytes(kGateUp, f);
  const int64_t up_bytes = f * rb_in, down_bytes = kD * rb_out;
  return OnPinnedPool(
      node, std::vector<int>{node.PrimaryCpus().front()},
      static_cast<size_t>(2 * up_bytes + down_bytes), warnings,
      [&](numa::NodePool& pool, numa::NodeBuffer& buf) {
        uint8_t* gate = buf.data();
        uint8_t* up = gate + up_bytes;
        uint8_t* down = up + up_bytes;
        const std::vector<uint8_t> pin = PatternRows(kGateUp, kD, 19);
        FillRows(gate, f, pin, rb_in);
        FillRows(up, f, pin, rb_in);
        FillRows(down, kD, PatternRows(kGateUp, f, 23), rb_out);
        moe::ExpertEngine::Dense ffn;
        ffn.gate = Slab("ffn_gate", kGateUp, kD, f, 1, gate);
        ffn.up = Slab("ffn_up", kGateUp, kD, f, 1, up);
        ffn.down = Slab("ffn_down", kGateUp, f, kD, 1, down);
        for (TensorView* v : {&ffn.gate, &ffn.up, &ffn.down}) v->n_dims = 2;
        const std::vector<float> x = NormalValues(tokens * kD, 3, 1.0f);  // [tokens x D]
        std::vector<float> y(static_cast<size_t>(tokens * kD));           // [tokens x D]
        moe::ExpertEngine engine(&pool, &gemv::KernelsFor(options.tier, options.decode_read));
        const int runs = options.quick ? 2 : 4;  // the first is a warm-up
        std::vector<double> gmacs;
        for (int r = 0; r < runs; ++r) {
          const Clock::time_point t0 = Clock::now();
          engine.ForwardDense(ffn, x.data(), tokens, y.data());
          if (r > 0) {
            gmacs.push_back(static_cast<double>(tokens) * 3 * kD * f / Seconds(t0, Clock::now()) *
                            1e-9);
          }
        }
        return Median(gmacs);
      });
}

StatusOr<double> MeasureDenseDecodeGbps(const numa::NumaNode& node, int threads,
                                        const MeasureOptions& options,
                                        std::vector<std::string>* warnings) {
  const std::vector<int> primary = node.PrimaryCpus();
  MOESPLIT_CHECK(threads >= 1 && threads <= static_cast<int>(primary.size()));
  // 2816 x 2048 q4_K matrices (6.5 MB, V2-Lite's shared-expert gate), options.bytes of them.
  const int64_t rows = 2 * kF, cols = kD, rb = RowBytes(kGateUp, cols);
  const int64_t matrix = rows * rb;
  const int64_t copies = options.quick ? 4 : std::max<int64_t>(8, options.bytes / matrix);
  return OnPinnedPool(
      node, std::vector<int>(primary.begin(), primary.begin() + threads),
      static_cast<size_t>(copies * matrix), warnings,
      [&](numa::NodePool& pool, numa::NodeBuffer& buf) {
        const std::vector<uint8_t> pattern = PatternRows(kGateUp, cols, 29);
        pool.ParallelFor(
            copies, [&](int64_t c, int) { FillRows(buf.data() + c * matrix, rows, pattern, rb); });
        AddBufferWarnings(buf, node.id, warnings);
        const gemv::GemvKernels& k = gemv::KernelsFor(options.tier, options.decode_read);
        const std::vector<float> x = NormalValues(cols, 3, 1.0f);  // [1 x cols]
        std::vector<float> y(static_cast<size_t>(rows));           // [1 x rows]
        qmatmul::QuantizedRows xq;
        qmatmul::Quantize(k, qmatmul::ActTypeFor(k, kGateUp), x.data(), cols, 1, cols, &xq);
        auto pass = [&](int64_t) {
          for (int64_t c = 0; c < copies; ++c) {
            const matmul::WeightMatrix w{.type = kGateUp,
                                         .data = buf.data() + c * matrix,
                                         .cols = cols,
                                         .rows = rows,
                                         .row_bytes = rb};
            qmatmul::MatMul(pool, k, w, xq, y.data(), rows);
          }
        };
        return MedianPassGbps(options.passes, 0, static_cast<double>(copies * matrix), pass);
      });
}

namespace {

// One [rows x cols] matrix of `type` (kPatternRows quantized rows, repeated), stored as `stored`
// (a repack when they differ) at dst: [rows x RowBytes(stored, cols)].
void FillMatrix(GgmlType type, GgmlType stored, int64_t rows, int64_t cols, uint32_t seed,
                uint8_t* dst) {
  const int64_t rb = RowBytes(type, cols);
  std::vector<uint8_t> file(stored == type ? 0 : static_cast<size_t>(rows * rb));
  uint8_t* q = stored == type ? dst : file.data();  // [rows x rb] in the file type
  FillRows(q, rows, PatternRows(type, cols, seed), rb);
  if (stored != type) quant::RepackRows(type, q, static_cast<size_t>(rb), rows, cols, dst);
}

}  // namespace

bool CanMeasureExpertDecode(cpu::IsaTier tier, GgmlType type) {
  const gemv::GemvKernels& k = gemv::KernelsFor(tier);
  return quant::CanQuantize(type) && k.For(gemv::LoadLayout(k, type, kExpertF)) != nullptr &&
         k.For(gemv::LoadLayout(k, type, kExpertD)) != nullptr;
}

StatusOr<double> MeasureExpertDecodeGbps(const numa::NumaNode& node, GgmlType type,
                                         const MeasureOptions& options,
                                         std::vector<std::string>* warnings) {
  const gemv::GemvKernels& kernels = gemv::KernelsFor(options.tier, options.decode_read);
  const int64_t f = options.quick ? 256 : kExpertF;  // --quick: a narrow expert (1.5 MB of q8_0)
  const GgmlType gu = gemv::LoadLayout(kernels, type, f);
  const GgmlType dn = gemv::LoadLayout(kernels, type, kExpertD);
  const int64_t file_bytes = 2 * RowBytes(type, kExpertD) * f + RowBytes(type, f) * kExpertD;
  const int64_t gate_bytes = RowBytes(gu, kExpertD) * f, down_bytes = RowBytes(dn, f) * kExpertD;
  const int64_t stored = 2 * gate_bytes + down_bytes;
  // options.bytes of experts (1 GiB: 94 of IQ2_XXS, 22 of Q8_0), 16-256: 8 per token come from
  // DRAM, not from the 32 MiB L3.
  const int64_t experts =
      options.quick ? kExpertTopK : std::clamp<int64_t>(options.bytes / stored, 16, 256);
  return OnPinnedPool(
      node, std::vector<int>{node.PrimaryCpus().front()}, static_cast<size_t>(experts * stored),
      warnings, [&](numa::NodePool& pool, numa::NodeBuffer& buf) {
        uint8_t* gate = buf.data();
        uint8_t* up = gate + experts * gate_bytes;
        uint8_t* down = up + experts * gate_bytes;
        FillMatrix(type, gu, f, kExpertD, 31, gate);
        FillMatrix(type, gu, f, kExpertD, 37, up);
        FillMatrix(type, dn, kExpertD, f, 41, down);
        pool.ParallelFor(experts - 1, [&](int64_t i, int) {
          std::memcpy(gate + (i + 1) * gate_bytes, gate, static_cast<size_t>(gate_bytes));
          std::memcpy(up + (i + 1) * gate_bytes, up, static_cast<size_t>(gate_bytes));
          std::memcpy(down + (i + 1) * down_bytes, down, static_cast<size_t>(down_bytes));
        });
        AddBufferWarnings(buf, node.id, warnings);
        moe::ExpertEngine::Layer views;
        views.gate_exps = Slab("ffn_gate_exps", gu, kExpertD, f, experts, gate);
        views.up_exps = Slab("ffn_up_exps", gu, kExpertD, f, experts, up);
        views.down_exps = Slab("ffn_down_exps", dn, f, kExpertD, experts, down);
        std::vector<int32_t> ids;
        std::vector<float> weights;
        DecodeRouteSets(experts, 200, kExpertTopK, &ids, &weights);
        const int k = static_cast<int>(std::min<int64_t>(kExpertTopK, experts));
        const std::vector<float> hidden = NormalValues(kExpertD, 7, 1.0f);  // [1 x D]
        std::vector<float> out(kExpertD);                                   // [1 x D]
        moe::ExpertEngine engine(&pool, &kernels);
        const int64_t steps = options.quick ? 2 : 16;  // token-layers per timed pass
        auto pass = [&](int64_t first) {
          for (int64_t i = 0; i < steps; ++i) {
            const int64_t s = (first + i) % kDecodeRouteSets;
            engine.Forward(views, hidden.data(), 1, ids.data() + s * k, weights.data() + s * k, k,
                           out.data());
          }
        };
        return MedianPassGbps(options.passes, 5, static_cast<double>(steps * k * file_bytes), pass);
      });
}

}  // namespace moesplit::app
