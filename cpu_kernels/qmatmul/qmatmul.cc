#include "cpu_kernels/qmatmul/qmatmul.h"

#include <algorithm>
#include <array>

#include "core/base/int_math.h"
#include "core/base/status.h"

namespace moesplit::qmatmul {

namespace {

// Products below this many multiply-adds run on the calling thread: a ParallelFor hand-off
// costs a few microseconds, which is what ~64K MACs take on one core.
constexpr int64_t kInlineMacs = int64_t{1} << 16;
// Activation bytes per token chunk in MatMulRows: a chunk stays in L2 (1-2 MB per core) while
// the block's weight rows are re-read for every chunk.
constexpr int64_t kChunkBytes = int64_t{128} << 10;
// Weight bytes per task in prefill (n_tok > one chunk): the block is re-read once per token
// chunk, so it should stay in L2 as well.
constexpr int64_t kSlabBytes = int64_t{256} << 10;
constexpr int64_t kRowAlign = 16;  // rows per task: a multiple of the kernels' row tiles
// Tokens per task, at least, where a self-blocking kernel's product is cut by tokens: one AMX
// batch of 4 token tiles.
constexpr int64_t kSelfBlockingMinTokens = 64;
constexpr size_t kAlign = 64;

// Prepares rows for n_tok rows of act_type; returns the base of the quantized rows, or nullptr
// for kF32 (rows alias x).
uint8_t* Prepare(GgmlType act_type, const float* x, int64_t ldx, int64_t n_tok, int64_t cols,
                 QuantizedRows* rows) {
  rows->type = act_type;
  rows->n_tok = n_tok;
  rows->cols = cols;
  if (act_type == GgmlType::kF32) {
    rows->stride = static_cast<size_t>(ldx) * sizeof(float);
    rows->data = x;
    return nullptr;
  }
  rows->stride = RowStride(act_type, cols);
  uint8_t* base = AlignedStorage(&rows->storage, rows->stride * static_cast<size_t>(n_tok));
  rows->data = base;
  return base;
}

gemv::QuantizeFn QuantizerOrDie(const gemv::GemvKernels& k, GgmlType act_type) {
  gemv::QuantizeFn q = k.Quantizer(act_type);
  MOESPLIT_CHECK(q != nullptr, "no quantizer for activation type ", TypeName(act_type));
  return q;
}

}  // namespace

GgmlType ActTypeFor(const gemv::GemvKernels& k, GgmlType weight_type) {
  const gemv::TypeKernels* tk = k.For(weight_type);
  return tk == nullptr ? GgmlType::kF32 : tk->act_type;
}

bool IsFallback(const gemv::GemvKernels& k, GgmlType weight_type) {
  return k.For(weight_type) == nullptr;
}

std::vector<GgmlType> MissingKernelTypes(const gemv::GemvKernels& k,
                                         std::span<const GgmlType> types) {
  std::vector<GgmlType> out;
  for (GgmlType t : types) {
    if (IsFallback(k, t) && std::find(out.begin(), out.end(), t) == out.end()) out.push_back(t);
  }
  return out;
}

uint8_t* AlignedStorage(std::vector<uint8_t>* storage, size_t bytes) {
  if (storage->size() < bytes + kAlign) storage->resize(bytes + kAlign);
  const auto p = reinterpret_cast<uintptr_t>(storage->data());
  return storage->data() + ((kAlign - p % kAlign) % kAlign);
}

size_t RowStride(GgmlType act_type, int64_t cols) {
  return static_cast<size_t>(RoundUp(RowBytes(act_type, cols), static_cast<int64_t>(kAlign)));
}

void Quantize(const gemv::GemvKernels& k, GgmlType act_type, const float* x, int64_t ldx,
              int64_t n_tok, int64_t cols, QuantizedRows* rows) {
  uint8_t* base = Prepare(act_type, x, ldx, n_tok, cols, rows);
  if (base == nullptr) return;
  const gemv::QuantizeFn q = QuantizerOrDie(k, act_type);
  for (int64_t t = 0; t < n_tok; ++t) q(x + t * ldx, base + t * rows->stride, cols);
}

void Quantize(moesplit::Executor& pool, const gemv::GemvKernels& k, GgmlType act_type, const float* x,
              int64_t ldx, int64_t n_tok, int64_t cols, QuantizedRows* rows) {
  const int n_threads = pool.size();
  if (act_type == GgmlType::kF32 || n_threads == 1 || n_tok < 2 * n_threads ||
      n_tok * cols < kInlineMacs) {
    Quantize(k, act_type, x, ldx, n_tok, cols, rows);
    return;
  }
  uint8_t* base = Prepare(act_type, x, ldx, n_tok, cols, rows);
  const gemv::QuantizeFn q = QuantizerOrDie(k, act_type);
  const int64_t per_task = CeilDiv(n_tok, 4 * static_cast<int64_t>(n_threads));
  const size_t stride = rows->stride;
  pool.ParallelFor(CeilDiv(n_tok, per_task), [&](int64_t task, int) {
    const int64_t t1 = std::min(n_tok, (task + 1) * per_task);
    for (int64_t t = task * per_task; t < t1; ++t) q(x + t * ldx, base + t * stride, cols);
  });
}

void MatMulRows(const gemv::GemvKernels& k, const WeightMatrix& w, const QuantizedRows& rows,
                float* y, int64_t ldy, int64_t r0, int64_t r1, gemv::GemmFn f32_gemm) {
  MOESPLIT_CHECK(rows.cols == w.cols, "activation cols ", rows.cols, " != weight cols ", w.cols);
  MOESPLIT_CHECK(r0 >= 0 && r0 <= r1 && r1 <= w.rows, "rows [", r0, ", ", r1, ") of ", w.rows);
  if (r0 == r1 || rows.n_tok == 0) return;
  const gemv::TypeKernels* tk = k.For(w.type);
  if (tk == nullptr) {
    // Reference fallback: dequantize each weight row to f32 (slow path; allocation is noise).
    MOESPLIT_CHECK(rows.type == GgmlType::kF32, TypeName(w.type),
                   " has no kernel: f32 rows needed");
    std::vector<float> scratch(static_cast<size_t>(w.cols));  // [cols]
    matmul::MatMulRowRange(w, static_cast<const float*>(rows.data),
                           static_cast<int64_t>(rows.stride / sizeof(float)), rows.n_tok, y, ldy,
                           r0, r1, scratch.data());
    return;
  }
  MOESPLIT_CHECK(rows.type == tk->act_type, TypeName(w.type), " takes ", TypeName(tk->act_type),
                 " activations, got ", TypeName(rows.type));
  const int64_t group = RowGroup(w.type);  // interleaved layouts: whole groups only
  MOESPLIT_CHECK(r0 % group == 0 && (r1 - r0) % group == 0, "rows [", r0, ", ", r1, ") of ",
                 TypeName(w.type), " (groups of ", group, ")");
  // The bytes a row occupies in L2 are its values, not its stride: one head's q rows inside
  // [T x H*192] f32 are 768 B 12 KB apart, and sizing by the stride cut MLA's score products
  // to 8-token chunks (the f32 kernel's dot form, ~3x slower than its packed form at 16).
  // At least 16 tokens per chunk: every prefill tile (K-quant, legacy block-major, f32 packed)
  // wants 12-16 tokens; 16 rows of 16 KB (f32 scores at 4096 positions) still fit L2.
  const int64_t row_bytes = std::max<int64_t>(1, RowBytes(rows.type, rows.cols));
  const int64_t chunk =
      tk->self_blocking ? rows.n_tok : std::max<int64_t>(16, kChunkBytes / row_bytes / 8 * 8);
  const gemv::GemmFn gemm =
      f32_gemm != nullptr && w.type == GgmlType::kF32 && rows.type == GgmlType::kF32 ? f32_gemm
                                                                                     : tk->gemm;
  for (int64_t t0 = 0; t0 < rows.n_tok; t0 += chunk) {
    const int64_t nt = std::min(chunk, rows.n_tok - t0);
    gemm(w.Row(r0), static_cast<size_t>(w.row_bytes), r1 - r0, rows.Row(t0), rows.stride, nt,
         w.cols, y + t0 * ldy + r0, ldy);
  }
}

void MatMulMany(moesplit::Executor& pool, const gemv::GemvKernels& k, std::span<const Product> products,
                const QuantizedRows& rows) {
  const int n = static_cast<int>(products.size());
  MOESPLIT_CHECK(n <= kMaxProducts, "MatMulMany takes at most ", kMaxProducts, " products");
  int64_t total = 0;  // multiply-adds of all products
  for (const Product& p : products) total += p.w.rows * p.w.cols * rows.n_tok;
  if (pool.size() == 1 || total < kInlineMacs) {
    for (const Product& p : products) MatMulRows(k, p.w, rows, p.y, p.ldy, 0, p.w.rows);
    return;
  }
  // Per product: blocks in proportion to its work (>= 4 tasks per thread overall), rows per
  // block a multiple of kRowAlign, and in prefill at most a kSlabBytes slab of weights. A
  // self-blocking kernel (TypeKernels::self_blocking) packs every token of its call once, so its
  // product is cut by tokens instead: all rows, >= kSelfBlockingMinTokens tokens per task (16
  // tasks of 32 rows x 512 tokens each packed all 512 tokens: qwen3moe-tiny BF16 pp512 spent
  // 24% packing against 20% multiplying).
  const int64_t target = CeilDiv(total, 4 * static_cast<int64_t>(pool.size()));
  const bool prefill = static_cast<int64_t>(rows.stride) * rows.n_tok > kChunkBytes;
  std::array<int64_t, kMaxProducts> block{};           // rows per task
  std::array<int64_t, kMaxProducts> tok_block{};       // tokens per task
  std::array<int64_t, kMaxProducts + 1> first_task{};  // prefix sums of tasks per product
  for (int i = 0; i < n; ++i) {
    const WeightMatrix& w = products[static_cast<size_t>(i)].w;
    const int64_t blocks = std::max<int64_t>(1, CeilDiv(w.rows * w.cols * rows.n_tok, target));
    const gemv::TypeKernels* tk = k.For(w.type);
    if (tk != nullptr && tk->self_blocking && rows.n_tok >= 2 * kSelfBlockingMinTokens) {
      block[i] = w.rows;
      tok_block[i] = std::max(kSelfBlockingMinTokens, RoundUp(CeilDiv(rows.n_tok, blocks), 16));
      first_task[i + 1] = first_task[i] + CeilDiv(rows.n_tok, tok_block[i]);
      continue;
    }
    int64_t b = RoundUp(CeilDiv(w.rows, blocks), kRowAlign);
    if (prefill) {
      b = std::min(b, RoundUp(std::max<int64_t>(1, kSlabBytes / w.row_bytes), kRowAlign));
    }
    block[i] = std::max<int64_t>(1, b);
    tok_block[i] = rows.n_tok;
    first_task[i + 1] = first_task[i] + CeilDiv(w.rows, block[i]);
  }
  pool.ParallelFor(first_task[n], [&](int64_t task, int) {
    int i = 0;
    while (task >= first_task[i + 1]) ++i;
    const Product& p = products[static_cast<size_t>(i)];
    if (tok_block[i] < rows.n_tok) {  // tokens [t0, t1), every row
      const int64_t t0 = (task - first_task[i]) * tok_block[i];
      MatMulRows(k, p.w, rows.View(t0, std::min(tok_block[i], rows.n_tok - t0)), p.y + t0 * p.ldy,
                 p.ldy, 0, p.w.rows);
      return;
    }
    const int64_t r0 = (task - first_task[i]) * block[i];
    MatMulRows(k, p.w, rows, p.y, p.ldy, r0, std::min(p.w.rows, r0 + block[i]));
  });
}

void MatMul(moesplit::Executor& pool, const gemv::GemvKernels& k, const WeightMatrix& w,
            const QuantizedRows& rows, float* y, int64_t ldy) {
  const Product p{w, y, ldy};
  MatMulMany(pool, k, {&p, 1}, rows);
}

void MatMul(moesplit::Executor& pool, const gemv::GemvKernels& k, const WeightMatrix& w, const float* x,
            int64_t ldx, int64_t n_tok, float* y, int64_t ldy, QuantizedRows* scratch) {
  Quantize(pool, k, ActTypeFor(k, w.type), x, ldx, n_tok, w.cols, scratch);
  MatMul(pool, k, w, *scratch, y, ldy);
}

}  // namespace moesplit::qmatmul
