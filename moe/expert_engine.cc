#include "moe/expert_engine.h"

#include <algorithm>

#include "core/base/status.h"
#include "cpu_kernels/ops/ops.h"

namespace moesplit::moe {

namespace {

// A block of weight rows [r0, r1) of one job's matrix.
struct RowTask {
  int32_t job;
  int64_t r0, r1;
};

// Splits `rows` of every job into blocks so that there are ~4 tasks per thread.
std::vector<RowTask> MakeTasks(std::span<const FfnJob> jobs, bool down, int n_threads) {
  int64_t total = 0;
  for (const FfnJob& j : jobs) total += down ? j.down.rows : j.gate.rows;
  const int64_t block = std::max<int64_t>(8, (total + 4 * n_threads - 1) / (4 * n_threads));
  std::vector<RowTask> tasks;
  for (size_t i = 0; i < jobs.size(); ++i) {
    const int64_t rows = down ? jobs[i].down.rows : jobs[i].gate.rows;
    for (int64_t r = 0; r < rows; r += block) {
      tasks.push_back({static_cast<int32_t>(i), r, std::min(rows, r + block)});
    }
  }
  return tasks;
}

}  // namespace

void RunFfnJobs(numa::ThreadPool& pool, std::span<const FfnJob> jobs) {
  if (jobs.empty()) return;
  // Per job: gate/up activations [n_tok x F] at offsets into one buffer.
  std::vector<int64_t> offset(jobs.size() + 1, 0);  // in floats
  int64_t max_cols = 0;
  for (size_t i = 0; i < jobs.size(); ++i) {
    const FfnJob& j = jobs[i];
    MOESPLIT_CHECK(j.gate.rows == j.up.rows && j.down.cols == j.gate.rows &&
                   j.down.rows == j.gate.cols && j.up.cols == j.gate.cols);
    offset[i + 1] = offset[i] + j.n_tok * j.gate.rows;
    max_cols = std::max({max_cols, j.gate.cols, j.down.cols});
  }
  std::vector<float> g(static_cast<size_t>(offset.back()));  // silu(gate) * up, per job
  std::vector<float> u(static_cast<size_t>(offset.back()));
  std::vector<float> scratch(static_cast<size_t>(pool.size() * max_cols));  // [threads][cols]

  const std::vector<RowTask> up_tasks = MakeTasks(jobs, /*down=*/false, pool.size());
  pool.ParallelFor(static_cast<int64_t>(up_tasks.size()), [&](int64_t i, int worker) {
    const RowTask& t = up_tasks[static_cast<size_t>(i)];
    const FfnJob& j = jobs[static_cast<size_t>(t.job)];
    float* s = scratch.data() + worker * max_cols;
    const int64_t F = j.gate.rows, D = j.gate.cols;
    matmul::MatMulRowRange(j.gate, j.x, D, j.n_tok, g.data() + offset[t.job], F, t.r0, t.r1, s);
    matmul::MatMulRowRange(j.up, j.x, D, j.n_tok, u.data() + offset[t.job], F, t.r0, t.r1, s);
  });
  ops::SwiGluInPlace(g.data(), u.data(), offset.back());
  const std::vector<RowTask> down_tasks = MakeTasks(jobs, /*down=*/true, pool.size());
  pool.ParallelFor(static_cast<int64_t>(down_tasks.size()), [&](int64_t i, int worker) {
    const RowTask& t = down_tasks[static_cast<size_t>(i)];
    const FfnJob& j = jobs[static_cast<size_t>(t.job)];
    float* s = scratch.data() + worker * max_cols;
    const int64_t F = j.down.cols, D = j.down.rows;
    matmul::MatMulRowRange(j.down, g.data() + offset[t.job], F, j.n_tok, j.y, D, t.r0, t.r1, s);
  });
}

void ExpertEngine::Forward(const Layer& layer, const float* hidden, int64_t n_tok,
                           const int32_t* ids, const float* weights, int k, float* out) {
  const int64_t D = layer.gate_exps.ne[0];
  const int64_t E = layer.gate_exps.ne[2];
  // Group the T*k (token, slot) pairs by expert: counting sort, stable in token order.
  std::vector<int64_t> count(static_cast<size_t>(E) + 1, 0);  // then: start row per expert
  for (int64_t i = 0; i < n_tok * k; ++i) {
    MOESPLIT_CHECK(ids[i] >= 0 && ids[i] < E, "expert id ", ids[i], " of ", E);
    ++count[static_cast<size_t>(ids[i]) + 1];
  }
  for (int64_t e = 0; e < E; ++e) count[e + 1] += count[e];
  std::vector<int64_t> packed_row(static_cast<size_t>(n_tok * k));  // (t, j) -> packed row
  std::vector<int64_t> fill(count.begin(), count.end() - 1);
  x_packed_.resize(static_cast<size_t>(n_tok * k * D));
  y_packed_.resize(static_cast<size_t>(n_tok * k * D));
  for (int64_t i = 0; i < n_tok * k; ++i) {
    const int64_t row = fill[static_cast<size_t>(ids[i])]++;
    packed_row[static_cast<size_t>(i)] = row;
    std::copy(hidden + (i / k) * D, hidden + (i / k + 1) * D, x_packed_.data() + row * D);
  }
  std::vector<FfnJob> jobs;
  for (int64_t e = 0; e < E; ++e) {
    const int64_t n = count[e + 1] - count[e];
    if (n == 0) continue;
    jobs.push_back({matmul::FromTensor(layer.gate_exps, e), matmul::FromTensor(layer.up_exps, e),
                    matmul::FromTensor(layer.down_exps, e), x_packed_.data() + count[e] * D, n,
                    y_packed_.data() + count[e] * D});
  }
  RunFfnJobs(*pool_, jobs);
  // out[t] = sum_j w[t, j] * y[packed(t, j)], summed in slot order.
  for (int64_t t = 0; t < n_tok; ++t) {
    float* o = out + t * D;
    std::fill(o, o + D, 0.0f);
    for (int j = 0; j < k; ++j) {
      const float w = weights[t * k + j];
      const float* y = y_packed_.data() + packed_row[static_cast<size_t>(t * k + j)] * D;
      for (int64_t d = 0; d < D; ++d) o[d] += w * y[d];
    }
  }
}

}  // namespace moesplit::moe
