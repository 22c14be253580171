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

// A routed expert's shape and file types: gate / up [F x D] of gate_up, down [D x F] of down.
struct ExpertShape {
  GgmlType gate_up;
  GgmlType down;
  int64_t d;  // hidden size
  int64_t f;  // expert FFN width
  // One expert's bytes in the file's types (what the cost model counts): 2 F rb(D) + D rb(F).
  int64_t FileBytes() const { return 2 * RowBytes(gate_up, d) * f + RowBytes(down, f) * d; }
};
// One expert's bytes as the engine stores them (gemv::LoadLayout; the 16-row layouts add ~1%).
int64_t StoredBytes(const gemv::GemvKernels& kernels, const ExpertShape& e) {
  return 2 * RowBytes(gemv::LoadLayout(kernels, e.gate_up, e.f), e.d) * e.f +
         RowBytes(gemv::LoadLayout(kernels, e.down, e.d), e.f) * e.d;
}
// DeepSeek-V2-Lite's Q4_K_M expert: 2 x 1.62 MB + 3.06 MB = 6.31 MB.
constexpr ExpertShape kV2LiteExpert{kGateUp, kDown, kD, kF};

// One layer of `experts` experts in one node buffer, every matrix stored as the engine stores
// it (gemv::LoadLayout: the 16-row layouts where the tier has them, as moe::ExpertStore repacks
// at load): gate [E x F x rb'(D)], up (same), down [E x D x rb'(F)]. Expert 0 is quantized (and
// repacked) once, the others are its copies, made by the pool's pinned workers after the pool
// first-touched the buffer.
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

StatusOr<LayerCopy> BuildLayer(int node, const gemv::GemvKernels& kernels, const ExpertShape& e,
                               int64_t experts, uint32_t seed, moesplit::Executor& pool) {
  const GgmlType gu = gemv::LoadLayout(kernels, e.gate_up, e.f);
  const GgmlType dn = gemv::LoadLayout(kernels, e.down, e.d);
  const int64_t gate_bytes = RowBytes(gu, e.d) * e.f, down_bytes = RowBytes(dn, e.f) * e.d;
  LayerCopy l;
  MOESPLIT_ASSIGN_OR_RETURN(
      l.buf, numa::AllocateOnNodes(static_cast<size_t>(experts * (2 * gate_bytes + down_bytes)),
                                   {.nodes = {node}, .toucher = &pool}));
  uint8_t* gate = l.buf.data();
  uint8_t* up = gate + experts * gate_bytes;
  uint8_t* down = up + experts * gate_bytes;
  FillMatrix(e.gate_up, gu, e.f, e.d, seed, gate);
  FillMatrix(e.gate_up, gu, e.f, e.d, seed + 1, up);
  FillMatrix(e.down, dn, e.d, e.f, seed + 2, down);
  pool.ParallelFor(experts - 1, [&](int64_t i, int) {
    std::memcpy(gate + (i + 1) * gate_bytes, gate, static_cast<size_t>(gate_bytes));
    std::memcpy(up + (i + 1) * gate_bytes, up, static_cast<size_t>(gate_bytes));
    std::memcpy(down + (i + 1) * down_bytes, down, static_cast<size_t>(down_bytes));
  });
  l.views.gate_exps = Slab("ffn_gate_exps", gu, e.d, e.f, experts, gate);
  l.views.up_exps = Slab("ffn_up_exps", gu, e.d, e.f, experts, up);
  l.views.down_exps = Slab("ffn_down_exps", dn, e.f, e.d, experts, down);
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

// Runs fn(pool) on a fresh thread, with a pool of workers pinned to `cpus` of the node (the
// caller among them): fn's figure or error.
template <typename Fn>
StatusOr<double> OnPool(const numa::NumaNode& node, std::vector<int> cpus,
                        std::vector<std::string>* warnings, Fn&& fn) {
  StatusOr<double> result = 0.0;
  OnFreshThread([&] {
    numa::NodePool pool({.node = node.id, .cpus = std::move(cpus), .pin_caller = true});
    PoolWarnings(pool, warnings);
    result = fn(pool);
  });
  return result;
}

// OnPool with `bytes` bound to the node, first touched by the pool: fn(pool, buffer).
template <typename Fn>
StatusOr<double> OnPinnedPool(const numa::NumaNode& node, std::vector<int> cpus, size_t bytes,
                              std::vector<std::string>* warnings, Fn&& fn) {
  return OnPool(node, std::move(cpus), warnings, [&](numa::NodePool& pool) -> StatusOr<double> {
    MOESPLIT_ASSIGN_OR_RETURN(numa::NodeBuffer buf,
                              numa::AllocateOnNodes(bytes, {.nodes = {node.id}, .toucher = &pool}));
    return fn(pool, buf);
  });
}

// `copies` copies of a layer of `experts` experts of shape `e` on the node (BuildLayer), each
// buffer's placement checked.
StatusOr<std::vector<LayerCopy>> BuildLayers(int node, const gemv::GemvKernels& kernels,
                                             const ExpertShape& e, int64_t experts, int64_t copies,
                                             uint32_t seed, numa::NodePool& pool,
                                             std::vector<std::string>* warnings) {
  std::vector<LayerCopy> layers;
  for (int64_t c = 0; c < copies; ++c) {
    MOESPLIT_ASSIGN_OR_RETURN(LayerCopy l, BuildLayer(node, kernels, e, experts, seed, pool));
    AddBufferWarnings(l.buf, node, warnings);
    layers.push_back(std::move(l));
  }
  return layers;
}

// Decode through moe::ExpertEngine::Forward: one token per step, step i on layers[i % copies]
// with route set (first + i) % kDecodeRouteSets (top_k uniform experts), `steps` token-layers
// per timed pass, `stride` route sets between the passes' starts: the median GB/s of the
// file's bytes (top_k x e.FileBytes() per step).
struct DecodeRun {
  ExpertShape shape;
  int64_t experts;  // per layer copy
  int top_k;
  int64_t steps;
  int64_t stride;
  uint32_t route_seed;
};

double DecodeGbps(numa::NodePool& pool, const gemv::GemvKernels& kernels,
                  const std::vector<LayerCopy>& layers, const DecodeRun& r, int passes) {
  std::vector<int32_t> ids;
  std::vector<float> weights;
  DecodeRouteSets(r.experts, r.route_seed, r.top_k, &ids, &weights);
  const int k = static_cast<int>(std::min<int64_t>(r.top_k, r.experts));
  const std::vector<float> hidden = NormalValues(r.shape.d, 7, 1.0f);  // [1 x D]
  std::vector<float> out(static_cast<size_t>(r.shape.d));              // [1 x D]
  moe::ExpertEngine engine(&pool, &kernels);
  const size_t copies = layers.size();
  auto pass = [&](int64_t first) {
    for (int64_t i = 0; i < r.steps; ++i) {
      const int64_t s = (first + i) % kDecodeRouteSets;
      engine.Forward(layers[static_cast<size_t>(i) % copies].views, hidden.data(), 1,
                     ids.data() + s * k, weights.data() + s * k, k, out.data());
    }
  };
  return MedianPassGbps(passes, r.stride, static_cast<double>(r.steps * k * r.shape.FileBytes()),
                        pass);
}

}  // namespace

StatusOr<double> MeasureMoeDecodeGbps(const numa::NumaNode& node, int threads,
                                      const MeasureOptions& options,
                                      std::vector<std::string>* warnings) {
  const std::vector<int> primary = node.PrimaryCpus();
  MOESPLIT_CHECK(threads >= 1 && threads <= static_cast<int>(primary.size()));
  const gemv::GemvKernels& kernels = gemv::KernelsFor(options.tier, options.decode_read);
  const int64_t experts = options.quick ? 8 : kExperts;
  // Copies of the layer: options.bytes of weights (1 GiB -> 2 copies of 404 MB, at least 2).
  const int64_t copies =
      options.quick ? 1
                    : std::max<int64_t>(2, options.bytes / (experts * kV2LiteExpert.FileBytes()));
  return OnPool(
      node, std::vector<int>(primary.begin(), primary.begin() + threads), warnings,
      [&](numa::NodePool& pool) -> StatusOr<double> {
        MOESPLIT_ASSIGN_OR_RETURN(
            std::vector<LayerCopy> layers,
            BuildLayers(node.id, kernels, kV2LiteExpert, experts, copies, 11, pool, warnings));
        return DecodeGbps(pool, kernels, layers,
                          {kV2LiteExpert, experts, kTopK, copies * 16, 7, 100}, options.passes);
      });
}

StatusOr<double> MeasureMoePrefillGmacs(const numa::NumaNode& node, int64_t tokens,
                                        const MeasureOptions& options,
                                        std::vector<std::string>* warnings) {
  const int cpu = node.PrimaryCpus().front();
  const int64_t experts = options.quick ? 8 : kExperts;
  const gemv::GemvKernels& kernels = gemv::KernelsFor(options.tier, options.decode_read);
  return OnPool(node, {cpu}, warnings, [&](numa::NodePool& pool) -> StatusOr<double> {
    MOESPLIT_ASSIGN_OR_RETURN(LayerCopy l,
                              BuildLayer(node.id, kernels, kV2LiteExpert, experts, 11, pool));
    std::vector<int32_t> ids;
    std::vector<float> weights;
    Routes(experts, tokens, true, 5, &ids, &weights);
    const int k = static_cast<int>(std::min<int64_t>(kTopK, experts));
    const std::vector<float> hidden = NormalValues(tokens * kD, 7, 1.0f);  // [tokens x D]
    std::vector<float> out(static_cast<size_t>(tokens * kD));              // [tokens x D]
    moe::ExpertEngine engine(&pool, &kernels);
    const double macs = static_cast<double>(tokens) * k * 3 * kD * kF;
    const int runs = options.quick ? 2 : 4;  // the first is a warm-up
    std::vector<double> gmacs;
    for (int r = 0; r < runs; ++r) {
      const Clock::time_point t0 = Clock::now();
      engine.Forward(l.views, hidden.data(), tokens, ids.data(), weights.data(), k, out.data());
      if (r > 0) gmacs.push_back(macs / Seconds(t0, Clock::now()) * 1e-9);
    }
    return Median(gmacs);
  });
}

StatusOr<double> MeasureDenseGmacs(const numa::NumaNode& node, GgmlType type,
                                   const MeasureOptions& options,
                                   std::vector<std::string>* warnings) {
  // V2-Lite's shared-expert gate: 2 x 1408 = 2816 rows x 2048, Q4_K (6.5 MB); --quick: 256 rows.
  const int64_t rows = options.quick ? 256 : 2 * kF, cols = kD;
  const int64_t tokens = options.quick ? 64 : 512;
  const gemv::GemvKernels& k = gemv::KernelsFor(options.tier, options.decode_read);
  const GgmlType stored = gemv::LoadLayout(k, type, rows);  // as the engine repacks it
  const int64_t rb = RowBytes(stored, cols);
  return OnPinnedPool(
      node, std::vector<int>{node.PrimaryCpus().front()}, static_cast<size_t>(rows * rb), warnings,
      [&](numa::NodePool& pool, numa::NodeBuffer& buf) {
        FillMatrix(type, stored, rows, cols, 17, buf.data());
        const matmul::WeightMatrix w{
            .type = stored, .data = buf.data(), .cols = cols, .rows = rows, .row_bytes = rb};
        const std::vector<float> x = NormalValues(tokens * cols, 3, 1.0f);  // [tokens x cols]
        std::vector<float> y(static_cast<size_t>(tokens * rows));           // [tokens x rows]
        qmatmul::QuantizedRows scratch;
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
  const gemv::GemvKernels& kernels = gemv::KernelsFor(options.tier, options.decode_read);
  const GgmlType s_up = gemv::LoadLayout(kernels, kGateUp, f);  // as the engine repacks them
  const GgmlType s_down = gemv::LoadLayout(kernels, kGateUp, kD);
  const int64_t up_bytes = f * RowBytes(s_up, kD), down_bytes = kD * RowBytes(s_down, f);
  return OnPinnedPool(
      node, std::vector<int>{node.PrimaryCpus().front()},
      static_cast<size_t>(2 * up_bytes + down_bytes), warnings,
      [&](numa::NodePool& pool, numa::NodeBuffer& buf) {
        uint8_t* gate = buf.data();
        uint8_t* up = gate + up_bytes;
        uint8_t* down = up + up_bytes;
        FillMatrix(kGateUp, s_up, f, kD, 19, gate);
        FillMatrix(kGateUp, s_up, f, kD, 20, up);
        FillMatrix(kGateUp, s_down, kD, f, 23, down);
        moe::ExpertEngine::Dense ffn;
        ffn.gate = Slab("ffn_gate", s_up, kD, f, 1, gate);
        ffn.up = Slab("ffn_up", s_up, kD, f, 1, up);
        ffn.down = Slab("ffn_down", s_down, f, kD, 1, down);
        for (TensorView* v : {&ffn.gate, &ffn.up, &ffn.down}) v->n_dims = 2;
        const std::vector<float> x = NormalValues(tokens * kD, 3, 1.0f);  // [tokens x D]
        std::vector<float> y(static_cast<size_t>(tokens * kD));           // [tokens x D]
        moe::ExpertEngine engine(&pool, &kernels);
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
  // Stored as the engine repacks it (q4_K_r16 where the tier has it); GB/s of the file's bytes.
  const gemv::GemvKernels& k = gemv::KernelsFor(options.tier, options.decode_read);
  const int64_t rows = 2 * kF, cols = kD;
  const GgmlType stored = gemv::LoadLayout(k, kGateUp, rows);
  const int64_t rb = RowBytes(stored, cols), matrix = rows * rb;
  const int64_t file_matrix = rows * RowBytes(kGateUp, cols);
  const int64_t copies = options.quick ? 4 : std::max<int64_t>(8, options.bytes / matrix);
  return OnPinnedPool(
      node, std::vector<int>(primary.begin(), primary.begin() + threads),
      static_cast<size_t>(copies * matrix), warnings,
      [&](numa::NodePool& pool, numa::NodeBuffer& buf) {
        FillMatrix(kGateUp, stored, rows, cols, 29, buf.data());
        pool.ParallelFor(copies - 1, [&](int64_t c, int) {
          std::memcpy(buf.data() + (c + 1) * matrix, buf.data(), static_cast<size_t>(matrix));
        });
        AddBufferWarnings(buf, node.id, warnings);
        const std::vector<float> x = NormalValues(cols, 3, 1.0f);  // [1 x cols]
        std::vector<float> y(static_cast<size_t>(rows));           // [1 x rows]
        qmatmul::QuantizedRows xq;
        qmatmul::Quantize(k, qmatmul::ActTypeFor(k, kGateUp), x.data(), cols, 1, cols, &xq);
        auto pass = [&](int64_t) {
          for (int64_t c = 0; c < copies; ++c) {
            const matmul::WeightMatrix w{.type = stored,
                                         .data = buf.data() + c * matrix,
                                         .cols = cols,
                                         .rows = rows,
                                         .row_bytes = rb};
            qmatmul::MatMul(pool, k, w, xq, y.data(), rows);
          }
        };
        return MedianPassGbps(options.passes, 0, static_cast<double>(copies * file_matrix), pass);
      });
}

bool CanMeasureExpertDecode(cpu::IsaTier tier, GgmlType type) {
  const gemv::GemvKernels& k = gemv::KernelsFor(tier);
  return quant::CanQuantize(type) && k.For(gemv::LoadLayout(k, type, kExpertF)) != nullptr &&
         k.For(gemv::LoadLayout(k, type, kExpertD)) != nullptr;
}

StatusOr<double> MeasureExpertDecodeGbps(const numa::NumaNode& node, GgmlType type,
                                         const MeasureOptions& options,
                                         std::vector<std::string>* warnings) {
  const gemv::GemvKernels& kernels = gemv::KernelsFor(options.tier, options.decode_read);
  // --quick: a narrow expert (1.5 MB of q8_0).
  const ExpertShape e{type, type, kExpertD, options.quick ? 256 : kExpertF};
  // options.bytes of experts (1 GiB: 94 of IQ2_XXS, 22 of Q8_0), 16-256: 8 per token come from
  // DRAM, not from the 32 MiB L3.
  const int64_t experts =
      options.quick ? kExpertTopK
                    : std::clamp<int64_t>(options.bytes / StoredBytes(kernels, e), 16, 256);
  return OnPool(
      node, {node.PrimaryCpus().front()}, warnings, [&](numa::NodePool& pool) -> StatusOr<double> {
        MOESPLIT_ASSIGN_OR_RETURN(std::vector<LayerCopy> layers,
                                  BuildLayers(node.id, kernels, e, experts, 1, 31, pool, warnings));
        return DecodeGbps(pool, kernels, layers,
                          {e, experts, kExpertTopK, options.quick ? 2 : 16, 5, 200},
                          options.passes);
      });
}

}  // namespace moesplit::app
