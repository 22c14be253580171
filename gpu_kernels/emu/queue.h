// Stream queues of the emulated device. Each stream has a worker thread (host functions run on
// it, as on CUDA's callback threads), but the device runs one operation at a time, and only while
// a host thread waits for something (a synchronize, a synchronous copy, cudaFree): then the
// executor repeatedly picks, among the streams whose next operation has its dependencies met,
// one by the stream policy
//   kInOrder  the stream created first (the legacy default stream, then in creation order)
//   kReverse  the stream created last
//   kRandom   a seeded random one
// so that work on two streams that lacks an event between them runs in the wrong order in one
// of the policies (e.g. a side stream's result read by the main stream before it is computed),
// deterministically, whatever the timing of the host. This is stricter than a GPU, where such a
// race usually goes unnoticed; it never overlaps kernels of two streams, so races between two
// concurrent kernels are out of its reach.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <random>
#include <thread>
#include <vector>

#include "gpu_kernels/emu/block.h"

namespace moesplit::emu {

class Queue {
 public:
  explicit Queue(bool blocking);
  ~Queue();  // runs what is still queued first, as cudaStreamDestroy lets it complete
  Queue(const Queue&) = delete;
  Queue& operator=(const Queue&) = delete;

  struct Dep {
    std::shared_ptr<Queue> queue;
    uint64_t position;  // the first `position` operations of `queue`
  };
  // Queues fn to run after deps (and after everything queued on this queue before); returns the
  // position that includes it.
  uint64_t Push(std::vector<Dep> deps, std::function<void()> fn);
  uint64_t Enqueued();
  // Runs the device until this queue has completed `position` operations.
  void WaitFor(uint64_t position);
  bool Reached(uint64_t position);
  bool blocking() const { return blocking_; }

  static void SetPolicy(Schedule policy, uint64_t seed);

 private:
  friend class Executor;
  void Work();
  bool ReadyLocked() const;
  struct Op {
    std::vector<Dep> deps;
    std::function<void()> fn;
  };
  const bool blocking_;
  uint64_t id_ = 0;  // creation order
  std::deque<Op> ops_;
  uint64_t enqueued_ = 0, completed_ = 0;
  bool granted_ = false, stop_ = false;
  std::thread worker_;
};

}  // namespace moesplit::emu
