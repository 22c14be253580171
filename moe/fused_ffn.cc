#include "moe/fused_ffn.h"

#include <algorithm>
#include <cstring>

#include "core/base/int_math.h"
#include "core/base/status.h"

namespace moesplit::moe {

namespace {

using qmatmul::QuantizedRows;

// Activation bytes per token chunk (gathered x rows, intermediate rows): stays in L2.
constexpr int64_t kChunkBytes = int64_t{128} << 10;
// Gate (and up) weight bytes per phase-1 task when the job has more than one chunk of tokens:
// the block's rows are re-read from L2 for every chunk.
constexpr int64_t kSlabBytes = int64_t{128} << 10;

int ActIndex(GgmlType act) {
  switch (act) {
    case GgmlType::kF32:
      return 0;
    case GgmlType::kQ8_K:
      return 1;
    case GgmlType::kQ8_0:
      return 2;
    default:
      MOESPLIT_CHECK(false, "unexpected activation type ", TypeName(act));
      return 0;
  }
}

// Row-block granularity of an intermediate quantized for the down projection: whole blocks of
// the activation type (Q8_K 256 values; Q8_0 two 34-byte blocks, so every slice starts 4-byte
// aligned as the quantizers require), and a multiple of 16 rows for the kernels' row tiles.
int64_t RowAlign(GgmlType act_down) {
  switch (act_down) {
    case GgmlType::kQ8_K:
      return 256;
    case GgmlType::kQ8_0:
      return 64;
    default:
      return 16;
  }
}

// Task sizes. The pool hands tasks out in index order to whichever thread is free, so a phase
// ends when its last task does. Prefill (more than kGuidedMaxTokens tokens): equal tasks, ~8
// per thread for gate/up and 4 for down (each down task re-reads every job's intermediate rows,
// so more down tasks cost more there: guided tasks measured pp512 -2%, 109.1 / 109.2 against
// 112.6 / 110.8 t/s on ds-v2-lite, 2 threads). Decode runs the flow (PlanFlow): guided sizes,
// because with equal tasks one thread idles up to a whole task at the end.
constexpr int64_t kGuidedMaxTokens = 8;
// Work units of the next task: `parts` equal tasks per thread.
int64_t TaskWork(int64_t total, int64_t n_threads, int parts) {
  return std::max<int64_t>(1, total / (parts * n_threads));
}

int64_t ChunkTokens(size_t row_stride) {
  const int64_t n = kChunkBytes / std::max<int64_t>(1, static_cast<int64_t>(row_stride));
  return std::clamp<int64_t>(n / 8 * 8, 8, 256);
}

// Tokens per chunk where every kernel of the phase blocks for the caches itself
// (TypeKernels::self_blocking: the AMX F16 / BF16 tiles pack the chunk's tokens once per call,
// so 16-token chunks spent as long packing as multiplying): the biggest job, at most 256 tokens
// (gathered f32 rows of V3's 7168 values: 2 x 256 x 28 KiB = 14 MiB per worker).
constexpr int64_t kSelfBlockingMaxTokens = 256;

bool SelfBlocking(const gemv::GemvKernels& k, GgmlType t) {
  const gemv::TypeKernels* tk = k.For(t);
  return tk != nullptr && tk->self_blocking;
}

// Rows i0 .. i0+nt of a job's tokens from x, as one activation block: x itself when they are
// contiguous (all tokens) or a single row, else gathered into buf ([nt x RowStride]).
QuantizedRows TokenRows(const QuantizedRows& x, const int32_t* tokens, int64_t i0, int64_t nt,
                        uint8_t* buf) {
  if (tokens == nullptr || nt == 1) return x.View(tokens == nullptr ? i0 : tokens[i0], nt);
  QuantizedRows v = x.View(0, nt);
  const size_t bytes = static_cast<size_t>(RowBytes(x.type, x.cols));
  v.stride = qmatmul::RowStride(x.type, x.cols);
  for (int64_t i = 0; i < nt; ++i) std::memcpy(buf + i * v.stride, x.Row(tokens[i0 + i]), bytes);
  v.data = buf;
  return v;
}

}  // namespace

const QuantizedRows* FusedFfn::InputRows(GgmlType act_type, const float* x, int64_t n_tok,
                                         int64_t D) {
  const size_t i = static_cast<size_t>(ActIndex(act_type));
  if (!x_ready_[i]) qmatmul::Quantize(*pool_, *kernels_, act_type, x, D, n_tok, D, &x_rows_[i]);
  x_ready_[i] = true;
  return &x_rows_[i];
}

void FusedFfn::Plan(std::span<const FfnJob> jobs, const float* x, int64_t n_tok) {
  const int64_t D = jobs[0].gate.cols;
  x_ready_.fill(false);  // quantize x anew: same pointer, new values
  plans_.resize(jobs.size());
  size_t offset = 0;
  for (size_t j = 0; j < jobs.size(); ++j) {
    const FfnJob& job = jobs[j];
    const int64_t F = job.gate.rows;
    MOESPLIT_CHECK(job.up.rows == F && job.down.cols == F && job.gate.cols == D &&
                       job.up.cols == D && job.down.rows == D,
                   "FFN job ", j, ": inconsistent gate/up/down shapes");
    MOESPLIT_CHECK(job.n >= 1 && (job.tokens != nullptr || job.n <= n_tok), "FFN job ", j, ": ",
                   job.n, " tokens");
    for (int64_t i = 0; job.tokens != nullptr && i < job.n; ++i) {
      MOESPLIT_CHECK(job.tokens[i] >= 0 && job.tokens[i] < n_tok, "token ", job.tokens[i]);
    }
    JobPlan& p = plans_[j];
    p.x_gate = InputRows(qmatmul::ActTypeFor(*kernels_, job.gate.type), x, n_tok, D);
    p.x_up = InputRows(qmatmul::ActTypeFor(*kernels_, job.up.type), x, n_tok, D);
    p.x_stride = std::max({p.x_gate->stride, p.x_up->stride,
                           qmatmul::RowStride(p.x_gate->type, job.gate.cols),
                           qmatmul::RowStride(p.x_up->type, job.up.cols)});
    p.act_down = qmatmul::ActTypeFor(*kernels_, job.down.type);
    MOESPLIT_CHECK(F % GetTypeTraits(p.act_down).block_size == 0, "F ", F);
    p.mid_stride = qmatmul::RowStride(p.act_down, F);
    p.mid_offset = offset;
    offset += p.mid_stride * static_cast<size_t>(job.n);
  }
  mid_base_ = qmatmul::AlignedStorage(&mid_, offset);
}

void FusedFfn::OrderJobs(std::span<const FfnJob> jobs) {
  order_.resize(jobs.size());
  for (size_t j = 0; j < jobs.size(); ++j) order_[j] = static_cast<int32_t>(j);
  // Biggest jobs first: the dynamic task queue then ends on small tasks (list scheduling).
  std::stable_sort(order_.begin(), order_.end(), [&](int32_t a, int32_t b) {
    return jobs[a].gate.rows * jobs[a].n > jobs[b].gate.rows * jobs[b].n;
  });
}

void FusedFfn::PlanUpTasks(std::span<const FfnJob> jobs) {
  const int64_t n_threads = pool_->size();
  int64_t total = 0;  // sum of F x n: gate/up work in units of D multiply-adds
  for (const FfnJob& job : jobs) total += job.gate.rows * job.n;
  OrderJobs(jobs);
  up_tasks_.clear();
  max_up_block_ = 0;
  size_t max_x_stride = 0;
  bool self_up = true, self_down = true;
  int64_t max_n = 0;
  for (const FfnJob& job : jobs) {
    self_up =
        self_up && SelfBlocking(*kernels_, job.gate.type) && SelfBlocking(*kernels_, job.up.type);
    self_down = self_down && SelfBlocking(*kernels_, job.down.type);
    max_n = std::max(max_n, job.n);
  }
  const int64_t self_chunk = std::min(max_n, kSelfBlockingMaxTokens);
  for (int32_t j : order_) {
    const FfnJob& job = jobs[static_cast<size_t>(j)];
    const JobPlan& p = plans_[static_cast<size_t>(j)];
    const int64_t F = job.gate.rows, align = RowAlign(p.act_down);
    max_x_stride = std::max(max_x_stride, p.x_stride);
    const int64_t slab = RoundUp(std::max<int64_t>(1, kSlabBytes / job.gate.row_bytes), align);
    for (int64_t f0 = 0; f0 < F;) {
      int64_t block = RoundUp(CeilDiv(TaskWork(total, n_threads, 8), job.n), align);
      if (!self_up && job.n > ChunkTokens(p.x_gate->stride)) block = std::min(block, slab);
      const int64_t f1 = std::min(F, f0 + block);
      max_up_block_ = std::max(max_up_block_, f1 - f0);
      up_tasks_.push_back({j, f0, f1});
      f0 = f1;
    }
  }
  up_chunk_ = self_up ? self_chunk : ChunkTokens(max_x_stride);
  size_t max_mid_stride = 0;
  for (const JobPlan& p : plans_) max_mid_stride = std::max(max_mid_stride, p.mid_stride);
  down_chunk_ = self_down ? self_chunk : ChunkTokens(max_mid_stride);
  const int64_t D = jobs[0].down.rows;
  down_bounds_.assign(1, 0);
  int64_t down_block = 0;  // the widest down task
  for (int64_t d0 = 0; d0 < D;) {
    const int64_t d1 = std::min(D, d0 + RoundUp(TaskWork(D, n_threads, 4), 16));
    down_block = std::max(down_block, d1 - d0);
    down_bounds_.push_back(d1);
    d0 = d1;
  }
  SizeScratch(max_up_block_, down_block, max_x_stride);
}

void FusedFfn::SizeScratch(int64_t max_up_block, int64_t down_block, size_t max_x_stride) {
  // Per-worker scratch: two gathered chunks (gate / up activation types), and either gate + up
  // partials [chunk x block] or the down partials [chunk x down_block].
  const int n_threads = pool_->size();
  const size_t bytes = 2 * static_cast<size_t>(up_chunk_) * max_x_stride;
  const size_t floats =
      static_cast<size_t>(std::max(2 * up_chunk_ * max_up_block, down_chunk_ * down_block));
  worker_bytes_.resize(static_cast<size_t>(n_threads));
  worker_f32_.resize(static_cast<size_t>(n_threads));
  for (int w = 0; w < n_threads; ++w) {
    if (worker_bytes_[w].size() < bytes) worker_bytes_[w].resize(bytes);
    if (worker_f32_[w].size() < floats) worker_f32_[w].resize(floats);
  }
}

void FusedFfn::RunUpTask(const FfnJob& job, const JobPlan& plan, int64_t f0, int64_t f1,
                         int worker) {
  const int64_t nb = f1 - f0;
  const matmul::WeightMatrix gate = job.gate.Rows(f0, nb), up = job.up.Rows(f0, nb);
  uint8_t* gather_gate = worker_bytes_[static_cast<size_t>(worker)].data();
  uint8_t* gather_up = gather_gate + worker_bytes_[static_cast<size_t>(worker)].size() / 2;
  float* g = worker_f32_[static_cast<size_t>(worker)].data();  // [chunk x nb] gate, then h
  float* u = g + up_chunk_ * max_up_block_;                    // [chunk x nb] up
  const gemv::QuantizeFn quantize = kernels_->Quantizer(plan.act_down);  // nullptr: f32 rows
  const size_t slice_offset = static_cast<size_t>(RowBytes(plan.act_down, f0));
  for (int64_t i0 = 0; i0 < job.n; i0 += up_chunk_) {
    const int64_t nt = std::min(up_chunk_, job.n - i0);
    const QuantizedRows xg = TokenRows(*plan.x_gate, job.tokens, i0, nt, gather_gate);
    qmatmul::MatMulRows(*kernels_, gate, xg, g, nb, 0, nb);
    if (plan.x_up == plan.x_gate) {
      qmatmul::MatMulRows(*kernels_, up, xg, u, nb, 0, nb);
    } else {
      const QuantizedRows xu = TokenRows(*plan.x_up, job.tokens, i0, nt, gather_up);
      qmatmul::MatMulRows(*kernels_, up, xu, u, nb, 0, nb);
    }
    for (int64_t i = 0; i < nt; ++i) {
      float* h = g + i * nb;  // h = silu(gate) * up: this task's slice of the intermediate row
      const float* ui = u + i * nb;
      kernels_->swiglu(h, ui, nb);
      uint8_t* dst = mid_base_ + plan.mid_offset + (i0 + i) * plan.mid_stride + slice_offset;
      if (quantize != nullptr) {
        quantize(h, dst, nb);  // whole activation blocks: f0 and nb are block multiples
      } else {
        std::memcpy(dst, h, static_cast<size_t>(nb) * sizeof(float));
      }
    }
  }
}

QuantizedRows FusedFfn::MidRows(const FfnJob& job, const JobPlan& plan, int64_t i0) const {
  QuantizedRows mid;  // the job's intermediate rows i0 .. i0 + n_tok
  mid.type = plan.act_down;
  mid.cols = job.down.cols;
  mid.n_tok = std::min(down_chunk_, job.n - i0);
  mid.stride = plan.mid_stride;
  mid.data = mid_base_ + plan.mid_offset + i0 * plan.mid_stride;
  return mid;
}

void FusedFfn::RunDownTask(std::span<const FfnJob> jobs, int64_t n_tok, int64_t d0, int64_t d1,
                           float* out, int worker) {
  const int64_t D = jobs[0].down.rows, nd = d1 - d0;
  for (int64_t t = 0; t < n_tok; ++t) std::fill(out + t * D + d0, out + t * D + d1, 0.0f);
  float* part = worker_f32_[static_cast<size_t>(worker)].data();  // [chunk x nd]
  for (size_t j = 0; j < jobs.size(); ++j) {
    const FfnJob& job = jobs[j];
    const JobPlan& plan = plans_[j];
    const matmul::WeightMatrix down = job.down.Rows(d0, nd);
    for (int64_t i0 = 0; i0 < job.n; i0 += down_chunk_) {
      const QuantizedRows mid = MidRows(job, plan, i0);
      qmatmul::MatMulRows(*kernels_, down, mid, part, nd, 0, nd);
      for (int64_t i = 0; i < mid.n_tok; ++i) {
        const int64_t t = job.tokens == nullptr ? i0 + i : job.tokens[i0 + i];
        const float w = job.weights == nullptr ? 1.0f : job.weights[i0 + i];
        float* o = out + t * D + d0;
        const float* p = part + i * nd;
        for (int64_t d = 0; d < nd; ++d) o[d] += w * p[d];
      }
    }
  }
}

// The flow's task list (decode). Work is counted in weight bytes (decode reads every byte once;
// <= 8 tokens add little compute): a gate/up row costs gate + up row bytes, a down row its down
// row bytes. Guided sizes: a task takes remaining / (2 x threads) of the bytes still
// unassigned (big tasks first: few stream starts), never less than total / (kFlowTailParts x
// threads), so the list ends on small down tasks the threads balance on. V3 decode, 2 threads
// (8 experts x 24.8 MB of Q4_K): tails of 203.7 MB / 128 = 1.6 MB, ~100 us at 16 GB/s per
// thread. Why no barrier: with the two phases each thread idled ~60-90 us per phase in a
// typical V3 iteration (the second thread wakes ~20-35 us late, the last tasks end apart),
// ~2% of 2 x 6.6 ms; in the flow ~1.3%. Measured against the two-phase build (bench_moe_layer
// v3/.*/repacked/decode/threads:2, GB/s_med, 3 alternating rounds, 2026-11-24 (k)): q4_K-q6_K
// 31.1 / 31.7 / 31.4 against 30.9 / 30.0 / 30.8, q4_K-q4_K 31.4 / 32.2 / 31.9 against
// 32.0 / 31.2 / 31.8; 1 thread unchanged within the noise.
constexpr int64_t kFlowTailParts = 64;

void FusedFfn::PlanFlow(std::span<const FfnJob> jobs) {
  const int64_t n_threads = pool_->size(), D = jobs[0].down.rows;
  int64_t total = 0;  // weight bytes of every task
  size_t max_x_stride = 0, max_mid_stride = 0, out_floats = 0;
  job_out_offset_.resize(jobs.size());
  for (size_t j = 0; j < jobs.size(); ++j) {
    const FfnJob& job = jobs[j];
    const JobPlan& p = plans_[j];
    total += job.gate.rows * (job.gate.row_bytes + job.up.row_bytes) + D * job.down.row_bytes;
    max_x_stride = std::max(max_x_stride, p.x_stride);
    max_mid_stride = std::max(max_mid_stride, p.mid_stride);
    job_out_offset_[j] = out_floats;
    out_floats += static_cast<size_t>(job.n * D);
  }
  OrderJobs(jobs);
  up_chunk_ = ChunkTokens(max_x_stride);
  down_chunk_ = ChunkTokens(max_mid_stride);
  if (job_out_.size() < out_floats) job_out_.resize(out_floats);
  if (up_left_capacity_ < jobs.size()) {
    up_left_ = std::make_unique<std::atomic<int32_t>[]>(jobs.size());
    up_left_capacity_ = jobs.size();
  }
  for (size_t j = 0; j < jobs.size(); ++j) up_left_[j].store(0, std::memory_order_relaxed);

  int64_t remaining = total;
  const int64_t tail = std::max<int64_t>(1, total / (kFlowTailParts * n_threads));
  flow_.clear();
  max_up_block_ = 0;
  // A job's tasks: gate/up rows [0, F) or down rows [0, D), guided sizes; on_task(bytes) after
  // each.
  auto segment = [&](int32_t j, bool down, auto&& on_task) {
    const FfnJob& job = jobs[static_cast<size_t>(j)];
    const JobPlan& p = plans_[static_cast<size_t>(j)];
    const int64_t rows = down ? D : job.gate.rows;
    const int64_t cost = down ? job.down.row_bytes : job.gate.row_bytes + job.up.row_bytes;
    const int64_t align = down ? 16 : RowAlign(p.act_down);
    for (int64_t r0 = 0; r0 < rows;) {
      const int64_t want = std::max(remaining / (2 * n_threads), tail);
      const int64_t r1 = std::min(rows, r0 + RoundUp(CeilDiv(want, cost), align));
      flow_.push_back({j, down, r0, r1});
      if (!down) {
        max_up_block_ = std::max(max_up_block_, r1 - r0);
        up_left_[static_cast<size_t>(j)].fetch_add(1, std::memory_order_relaxed);
      }
      remaining -= (r1 - r0) * cost;
      on_task((r1 - r0) * cost);
      r0 = r1;
    }
  };
  // A job's down tasks are queued once the gate/up tasks queued after its own add up to (threads
  // - 1) x its biggest gate/up task: by the time a thread claims them, the other threads are
  // past that job's gate/up tasks, however uneven the jobs (V2-Lite's shared expert is twice a
  // routed one). Queued simply one job later instead, ds-v2-lite tg64 (2 threads, 3 alternating
  // rounds) ran 16.74 / 16.70 / 16.97 t/s against the two-phase build's 16.96 / 17.39 / 16.96;
  // with this rule 17.34 / 17.46 / 17.17.
  struct Pending {
    int32_t job;
    int64_t need, seen;  // bytes
  };
  std::vector<Pending> pending;  // jobs whose down tasks are not queued yet, in job order
  auto queue_ready = [&] {
    while (!pending.empty() && pending.front().seen >= pending.front().need) {
      segment(pending.front().job, true, [](int64_t) {});
      pending.erase(pending.begin());
    }
  };
  for (int32_t j : order_) {
    int64_t biggest = 0;
    segment(j, false, [&](int64_t bytes) {
      biggest = std::max(biggest, bytes);
      for (Pending& p : pending) p.seen += bytes;
      queue_ready();
    });
    pending.push_back({j, (n_threads - 1) * biggest, 0});
    queue_ready();
  }
  for (const Pending& p : pending) segment(p.job, true, [](int64_t) {});
  SizeScratch(max_up_block_, 0, max_x_stride);
}

void FusedFfn::RunFlowTask(std::span<const FfnJob> jobs, const FlowTask& t, int worker) {
  const size_t j = static_cast<size_t>(t.job);
  const FfnJob& job = jobs[j];
  const JobPlan& plan = plans_[j];
  if (!t.down) {
    RunUpTask(job, plan, t.r0, t.r1, worker);
    up_left_[j].fetch_sub(1, std::memory_order_release);  // the intermediate rows are written
    return;
  }
  // The job's gate/up tasks were claimed before this one (list order), each by a thread that
  // runs it at once: wait for the last of them.
  for (int spins = 0; up_left_[j].load(std::memory_order_acquire) != 0;) moesplit::CpuRelax(spins++);
  const int64_t D = job.down.rows;
  float* y = job_out_.data() + job_out_offset_[j];  // [n x D]
  for (int64_t i0 = 0; i0 < job.n; i0 += down_chunk_) {
    qmatmul::MatMulRows(*kernels_, job.down, MidRows(job, plan, i0), y + i0 * D, D, t.r0, t.r1);
  }
}

void FusedFfn::RunFlow(std::span<const FfnJob> jobs, int64_t n_tok, float* out) {
  const int64_t n_tasks = static_cast<int64_t>(flow_.size());
  next_flow_.store(0, std::memory_order_relaxed);
  // One claimer per worker; each claims list entries in order until none is left.
  pool_->ParallelFor(pool_->size(), [&](int64_t, int worker) {
    for (int64_t i = next_flow_.fetch_add(1); i < n_tasks; i = next_flow_.fetch_add(1)) {
      RunFlowTask(jobs, flow_[static_cast<size_t>(i)], worker);
    }
  });
  // Combine in job order: out[t] = sum over jobs j, slots i of token t of w * y_j[i].
  const int64_t D = jobs[0].down.rows;
  std::fill(out, out + n_tok * D, 0.0f);
  for (size_t j = 0; j < jobs.size(); ++j) {
    const FfnJob& job = jobs[j];
    for (int64_t i = 0; i < job.n; ++i) {
      const int64_t t = job.tokens == nullptr ? i : job.tokens[i];
      const float w = job.weights == nullptr ? 1.0f : job.weights[i];
      const float* y = job_out_.data() + job_out_offset_[j] + i * D;
      float* o = out + t * D;
      for (int64_t d = 0; d < D; ++d) o[d] += w * y[d];
    }
  }
}

void FusedFfn::Run(std::span<const FfnJob> jobs, const float* x, int64_t n_tok, float* out) {
  if (jobs.empty()) return;
  Plan(jobs, x, n_tok);
  if (n_tok <= kGuidedMaxTokens) {
    PlanFlow(jobs);
    RunFlow(jobs, n_tok, out);
    return;
  }
  PlanUpTasks(jobs);
  pool_->ParallelFor(static_cast<int64_t>(up_tasks_.size()), [&](int64_t i, int worker) {
    const UpTask& t = up_tasks_[static_cast<size_t>(i)];
    RunUpTask(jobs[static_cast<size_t>(t.job)], plans_[static_cast<size_t>(t.job)], t.f0, t.f1,
              worker);
  });
  // The one barrier: every intermediate row is complete before any down task reads it.
  pool_->ParallelFor(static_cast<int64_t>(down_bounds_.size()) - 1, [&](int64_t i, int worker) {
    const size_t t = static_cast<size_t>(i);
    RunDownTask(jobs, n_tok, down_bounds_[t], down_bounds_[t + 1], out, worker);
  });
}

}  // namespace moesplit::moe
