#include "tests/core/engine/host_backend.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "core/base/float16.h"
#include "cpu_kernels/ops/ops.h"
#include "cpu_kernels/quant/quant.h"
#include "moe/routing.h"

namespace moesplit::testing {

using engine::DevLatentCache;
using engine::DevMatrix;
using engine::DevMlaParams;
using engine::Lane;

namespace {

// y[r] = sum_c W[r][c] x[c] for one token, W dequantized row by row, summed in double.
void RowProducts(const DevMatrix& w, const uint8_t* base, const float* x, float* y) {
  const size_t row_bytes = static_cast<size_t>(RowBytes(w.type, w.cols));
  std::vector<float> row(static_cast<size_t>(w.cols));
  for (int64_t r = 0; r < w.rows; ++r) {
    quant::DequantizeRow(w.type, base + r * row_bytes, row.data(), w.cols);
    double s = 0;
    for (int64_t c = 0; c < w.cols; ++c) s += static_cast<double>(row[c]) * x[c];
    y[r] = static_cast<float>(s);
  }
}

}  // namespace

HostBackend::HostBackend(Schedule schedule, uint64_t device_limit)
    : schedule_(schedule), limit_(device_limit) {}

HostBackend::~HostBackend() = default;

StatusOr<void*> HostBackend::AllocDevice(size_t bytes, const std::string& what) {
  if (bytes > limit_ - used_) {
    return ResourceExhaustedError("device memory: ", what, " needs ", bytes, " bytes, ",
                                  limit_ - used_, " free");
  }
  used_ += bytes;
  // Poisoned (0xFF: NaN in f32) so that reading what nothing wrote shows.
  blocks_.push_back(std::make_unique<uint8_t[]>(bytes + 64));
  std::memset(blocks_.back().get(), 0xFF, bytes + 64);
  return static_cast<void*>(blocks_.back().get());
}

StatusOr<void*> HostBackend::AllocHost(size_t bytes, const std::string&) {
  blocks_.push_back(std::make_unique<uint8_t[]>(bytes + 64));
  std::memset(blocks_.back().get(), 0xFF, bytes + 64);
  return static_cast<void*>(blocks_.back().get());
}

Status HostBackend::Upload(void* dst, const void* src, size_t bytes) {
  std::memcpy(dst, src, bytes);
  return Status::Ok();
}

Status HostBackend::CheckWeight(const std::string& name, GgmlType type, int64_t cols) const {
  (void)cols;
  for (const auto& [t, part] : refused_) {
    if (t == type && name.find(part) != std::string::npos) {
      return InvalidArgumentError(name, ": weight type ", TypeName(type), " refused");
    }
  }
  return Status::Ok();
}

Status HostBackend::Queue(Lane l, std::function<void()> op) {
  if (fail_after_ == 0) return InvalidArgumentError("injected failure");
  if (fail_after_ > 0) --fail_after_;
  lane(l).push_back({std::move(op), -1});
  ++(l == Lane::kMain ? main_queued_ : side_queued_);
  return Status::Ok();
}

Status HostBackend::CopyToHost(Lane l, void* host, const void* dev, size_t bytes) {
  to_host_ += bytes;
  return Queue(l, [=] { std::memcpy(host, dev, bytes); });
}

Status HostBackend::CopyFromHost(Lane l, void* dev, const void* host, size_t bytes) {
  from_host_ += bytes;
  return Queue(l, [=] { std::memcpy(dev, host, bytes); });
}

Status HostBackend::HostCall(Lane l, std::function<void()> fn) { return Queue(l, std::move(fn)); }

Status HostBackend::SideWaitsForMain() {
  side_.push_back({{}, main_queued_});
  ++side_queued_;
  return Status::Ok();
}

Status HostBackend::MainWaitsForSide() {
  main_.push_back({{}, side_queued_});
  ++main_queued_;
  return Status::Ok();
}

Status HostBackend::Synchronize() {
  // Run one item of a lane if its wait (if any) is satisfied; prefer the schedule's lane.
  auto step = [&](std::deque<Item>& q, int64_t& done, int64_t other_done) {
    if (q.empty()) return false;
    Item& it = q.front();
    if (!it.op && other_done < it.wait_for) return false;
    if (it.op) {
      it.op();
      ++ops_run_;
    }
    q.pop_front();
    ++done;
    return true;
  };
  while (!main_.empty() || !side_.empty()) {
    bool ran;
    if (schedule_ == Schedule::kMainFirst) {
      ran = step(main_, main_done_, side_done_) || step(side_, side_done_, main_done_);
    } else {
      ran = step(side_, side_done_, main_done_) || step(main_, main_done_, side_done_);
    }
    MOESPLIT_CHECK(ran, "HostBackend: the lanes wait for each other (a deadlock)");
  }
  return Status::Ok();
}

Status HostBackend::MatMul(Lane l, const DevMatrix& w, const float* x, int64_t n_tok, float* y) {
  if (w.data == nullptr || n_tok < 1) return InvalidArgumentError("MatMul: no weights / tokens");
  return Queue(l, [=] {
    for (int64_t t = 0; t < n_tok; ++t) {
      RowProducts(w, static_cast<const uint8_t*>(w.data), x + t * w.cols, y + t * w.rows);
    }
  });
}

Status HostBackend::HeadMatMul(Lane l, const DevMatrix& w, int64_t n_head, const float* x,
                               int64_t x_tok, int64_t x_head, int64_t n_tok, float* y,
                               int64_t y_tok, int64_t y_head) {
  if (w.data == nullptr) return InvalidArgumentError("HeadMatMul: no weights");
  return Queue(l, [=] {
    const size_t head_bytes = static_cast<size_t>(RowBytes(w.type, w.cols) * w.rows);
    for (int64_t h = 0; h < n_head; ++h) {
      const uint8_t* base = static_cast<const uint8_t*>(w.data) + h * head_bytes;
      for (int64_t t = 0; t < n_tok; ++t) {
        RowProducts(w, base, x + t * x_tok + h * x_head, y + t * y_tok + h * y_head);
      }
    }
  });
}

Status HostBackend::GetRows(Lane l, const DevMatrix& table, const int32_t* ids, int64_t n,
                            float* y) {
  return Queue(l, [=] {
    const size_t row_bytes = static_cast<size_t>(RowBytes(table.type, table.cols));
    for (int64_t i = 0; i < n; ++i) {
      quant::DequantizeRow(table.type, static_cast<const uint8_t*>(table.data) + ids[i] * row_bytes,
                           y + i * table.cols, table.cols);
    }
  });
}

Status HostBackend::RmsNorm(Lane l, const float* x, int64_t x_stride, const float* w, int64_t rows,
                            int64_t n, float eps, float* y, int64_t y_stride) {
  return Queue(l, [=] {
    for (int64_t r = 0; r < rows; ++r) ops::RmsNorm(x + r * x_stride, w, n, eps, y + r * y_stride);
  });
}

Status HostBackend::SwiGlu(Lane l, float* gate, const float* up, int64_t n) {
  return Queue(l, [=] { ops::SwiGluInPlace(gate, up, n); });
}

Status HostBackend::Add(Lane l, const float* x, float* y, int64_t n) {
  return Queue(l, [=] {
    for (int64_t i = 0; i < n; ++i) y[i] += x[i];
  });
}

Status HostBackend::Rope(Lane l, const ops::RopeParams& p, const int32_t* pos, int64_t n_tok,
                         int64_t n_head, int64_t head_dim, float* x) {
  return Queue(l, [=] {
    std::vector<float> cs(static_cast<size_t>(p.n_dims));
    for (int64_t t = 0; t < n_tok; ++t) {
      ops::RopeCosSin(p, pos[t], cs.data());
      for (int64_t h = 0; h < n_head; ++h)
        ops::RopeApply(p, cs.data(), x + (t * n_head + h) * head_dim);
    }
  });
}

Status HostBackend::Copy2D(Lane l, void* dst, size_t dst_pitch, const void* src, size_t src_pitch,
                           size_t width_bytes, size_t rows) {
  return Queue(l, [=] {
    for (size_t r = 0; r < rows; ++r) {
      std::memcpy(static_cast<uint8_t*>(dst) + r * dst_pitch,
                  static_cast<const uint8_t*>(src) + r * src_pitch, width_bytes);
    }
  });
}

Status HostBackend::AppendLatent(Lane l, const float* rows, int64_t n_tok, int64_t pos0,
                                 const DevLatentCache& cache) {
  if (pos0 < 0 || pos0 + n_tok > cache.n_ctx) {
    return OutOfRangeError("AppendLatent: positions ", pos0, " + ", n_tok, " > ", cache.n_ctx);
  }
  return Queue(l, [=] {
    uint16_t* c = static_cast<uint16_t*>(cache.data) + pos0 * cache.width;
    for (int64_t i = 0; i < n_tok * cache.width; ++i) c[i] = Fp32ToFp16(rows[i]);
  });
}

Status HostBackend::MlaAttention(Lane l, const DevMlaParams& p, const float* q,
                                 const DevLatentCache& cache, float* out) {
  const int64_t W = p.latent + p.rope;
  if (W != cache.width || p.pos0 + p.n_tok > cache.n_ctx) {
    return InvalidArgumentError("MlaAttention: width ", W, " vs cache ", cache.width);
  }
  return Queue(l, [=] {
    const int64_t n_pos = p.pos0 + p.n_tok;
    std::vector<float> c(static_cast<size_t>(n_pos * W));  // the cache as f32
    const uint16_t* src = static_cast<const uint16_t*>(cache.data);
    for (size_t i = 0; i < c.size(); ++i) c[i] = Fp16ToFp32(src[i]);
    std::vector<float> s(static_cast<size_t>(n_pos));
    for (int64_t t = 0; t < p.n_tok; ++t) {
      const int64_t n = p.pos0 + t + 1;  // causal
      for (int64_t h = 0; h < p.n_head; ++h) {
        const float* qh = q + (t * p.n_head + h) * W;
        for (int64_t j = 0; j < n; ++j) {
          double d = 0;
          for (int64_t i = 0; i < W; ++i) d += static_cast<double>(qh[i]) * c[j * W + i];
          s[j] = static_cast<float>(d) * p.scale;
        }
        ops::Softmax(s.data(), n);
        float* o = out + (t * p.n_head + h) * p.latent;
        for (int64_t i = 0; i < p.latent; ++i) {
          double a = 0;
          for (int64_t j = 0; j < n; ++j) a += static_cast<double>(s[j]) * c[j * W + i];
          o[i] = static_cast<float>(a);
        }
      }
    }
  });
}

Status HostBackend::Route(Lane l, const moe::RouterConfig& config, const float* logits,
                          const float* bias, int64_t n_tok, int32_t* ids, float* weights) {
  return Queue(l, [=] { moe::Route(config, logits, bias, n_tok, ids, weights); });
}

Status HostBackend::ExpertMatMul(Lane l, const DevMatrix& w, int64_t n_expert, const int32_t* ids,
                                 int64_t n_pairs, const float* x, int64_t x_div, float* y) {
  if (w.data == nullptr || x_div < 1) return InvalidArgumentError("ExpertMatMul: bad arguments");
  return Queue(l, [=] {
    const size_t expert_bytes = static_cast<size_t>(RowBytes(w.type, w.cols) * w.rows);
    for (int64_t p = 0; p < n_pairs; ++p) {
      MOESPLIT_CHECK(ids[p] >= 0 && ids[p] < n_expert, "ExpertMatMul: expert id ", ids[p]);
      const uint8_t* base = static_cast<const uint8_t*>(w.data) + ids[p] * expert_bytes;
      RowProducts(w, base, x + (p / x_div) * w.cols, y + p * w.rows);
    }
  });
}

Status HostBackend::WeightedSum(Lane l, const float* y, const float* weights, int64_t n_tok,
                                int64_t k, int64_t n, float* out) {
  return Queue(l, [=] {
    for (int64_t t = 0; t < n_tok; ++t) {
      for (int64_t i = 0; i < n; ++i) {
        double s = 0;
        for (int64_t j = 0; j < k; ++j)
          s += static_cast<double>(weights[t * k + j]) * y[(t * k + j) * n + i];
        out[t * n + i] = static_cast<float>(s);
      }
    }
  });
}

}  // namespace moesplit::testing
