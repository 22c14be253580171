// HostBackend: a DenseBackend (core/engine/dense_backend.h) on host memory with the CPU
// reference arithmetic (dequantized f32 weights, double sums), for testing the hybrid pass's
// split everywhere. It also emulates the device's asynchrony: every queued op is deferred to
// Synchronize(), which runs the two lanes under a schedule that honours only the declared
// ordering (lane order, SideWaitsForMain / MainWaitsForSide marks), preferring one lane:
//   kMainFirst  the side lane runs as late as allowed (a missing join shows: main reads a
//               result the side lane has not produced yet);
//   kSideFirst  the side lane runs as early as allowed (a missing fork shows: it reads inputs
//               main has not produced yet).
// Host staging written by queued copies is therefore only valid after Synchronize(), as on a
// GPU. Counts the bytes each direction carries.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/engine/dense_backend.h"

namespace moesplit::testing {

class HostBackend final : public engine::DenseBackend {
 public:
  enum class Schedule { kMainFirst, kSideFirst };
  // device_limit: AllocDevice fails (ResourceExhausted) past this many bytes in all.
  explicit HostBackend(Schedule schedule = Schedule::kMainFirst,
                       uint64_t device_limit = ~uint64_t{0});
  ~HostBackend() override;

  std::string Name() const override { return "host emulation"; }
  StatusOr<void*> AllocDevice(size_t bytes, const std::string& what) override;
  StatusOr<void*> AllocHost(size_t bytes, const std::string& what) override;
  uint64_t DeviceBytesFree() const override { return limit_ - used_; }
  Status Upload(void* dst, const void* src, size_t bytes) override;
  Status CheckWeight(const std::string& name, GgmlType type, int64_t cols) const override;

  Status CopyToHost(engine::Lane lane, void* host, const void* dev, size_t bytes) override;
  Status CopyFromHost(engine::Lane lane, void* dev, const void* host, size_t bytes) override;
  Status HostCall(engine::Lane lane, std::function<void()> fn) override;
  Status SideWaitsForMain() override;
  Status MainWaitsForSide() override;
  Status Synchronize() override;

  Status MatMul(engine::Lane lane, const engine::DevMatrix& w, const float* x, int64_t n_tok,
                float* y) override;
  Status HeadMatMul(engine::Lane lane, const engine::DevMatrix& w, int64_t n_head, const float* x,
                    int64_t x_tok, int64_t x_head, int64_t n_tok, float* y, int64_t y_tok,
                    int64_t y_head) override;
  Status GetRows(engine::Lane lane, const engine::DevMatrix& table, const int32_t* ids, int64_t n,
                 float* y) override;
  Status RmsNorm(engine::Lane lane, const float* x, int64_t x_stride, const float* w, int64_t rows,
                 int64_t n, float eps, float* y, int64_t y_stride) override;
  Status SwiGlu(engine::Lane lane, float* gate, const float* up, int64_t n) override;
  Status Add(engine::Lane lane, const float* x, float* y, int64_t n) override;
  Status Rope(engine::Lane lane, const ops::RopeParams& p, const int32_t* pos, int64_t n_tok,
              int64_t n_head, int64_t head_dim, float* x) override;
  Status Copy2D(engine::Lane lane, void* dst, size_t dst_pitch, const void* src, size_t src_pitch,
                size_t width_bytes, size_t rows) override;
  Status AppendLatent(engine::Lane lane, const float* rows, int64_t n_tok, int64_t pos0,
                      const engine::DevLatentCache& cache) override;
  Status MlaAttention(engine::Lane lane, const engine::DevMlaParams& p, const float* q,
                      const engine::DevLatentCache& cache, float* out) override;
  Status Route(engine::Lane lane, const moe::RouterConfig& config, const float* logits,
               const float* bias, int64_t n_tok, int32_t* ids, float* weights) override;

  Status ExpertMatMul(engine::Lane lane, const engine::DevMatrix& w, int64_t n_expert,
                      const int32_t* ids, int64_t n_pairs, const float* x, int64_t x_div,
                      float* y) override;
  Status WeightedSum(engine::Lane lane, const float* y, const float* weights, int64_t n_tok,
                     int64_t k, int64_t n, float* out) override;

  // Test hooks: CheckWeight refuses `type` in tensors whose name contains name_part (as a GPU
  // without its kernels would); the op queued after `n` more have been queued fails at once
  // (InvalidArgument "injected failure"); pending: items queued and not run yet.
  void RefuseWeightType(GgmlType type, std::string name_part = "") {
    refused_.push_back({type, std::move(name_part)});
  }
  void FailOpsAfter(int64_t n) { fail_after_ = n; }
  int64_t pending() const { return static_cast<int64_t>(main_.size() + side_.size()); }

  uint64_t bytes_to_host() const { return to_host_; }
  uint64_t bytes_from_host() const { return from_host_; }
  int64_t ops_run() const { return ops_run_; }

 private:
  // A queued item: an op, or a mark "wait until the other lane has run `wait_for` items".
  struct Item {
    std::function<void()> op;  // empty for a mark
    int64_t wait_for = -1;
  };
  Status Queue(engine::Lane lane, std::function<void()> op);
  std::deque<Item>& lane(engine::Lane l) { return l == engine::Lane::kMain ? main_ : side_; }

  Schedule schedule_;
  uint64_t limit_, used_ = 0;
  std::vector<std::unique_ptr<uint8_t[]>> blocks_;
  std::deque<Item> main_, side_;               // not yet run
  int64_t main_queued_ = 0, side_queued_ = 0;  // items ever queued per lane
  int64_t main_done_ = 0, side_done_ = 0;      // items ever run per lane
  uint64_t to_host_ = 0, from_host_ = 0;
  int64_t ops_run_ = 0;
  std::vector<std::pair<GgmlType, std::string>> refused_;
  int64_t fail_after_ = -1;  // < 0: never
};

}  // namespace moesplit::testing
