#include "gpu_kernels/emu/queue.h"

#include <algorithm>

#include "gpu_kernels/emu/runtime.h"

namespace moesplit::emu {

// The one executor of the device (process-wide, as the device is): every queue's state is
// guarded by its mutex.
class Executor {
 public:
  static Executor& Get() {
    static auto* e = new Executor();  // never destroyed: workers may outlive static destructors
    return *e;
  }
  std::mutex mu;
  std::condition_variable cv;
  std::vector<Queue*> queues;  // live queues, by creation order
  uint64_t next_id = 0;
  int demand = 0;  // host threads waiting for the device
  bool running = false;
  Schedule policy = Schedule::kRandom;
  std::mt19937_64 rng{1};

  // Grants the next operation if none runs and a host thread waits (mu held).
  void Pump() {
    if (running || demand == 0) return;
    std::vector<Queue*> ready;
    for (Queue* q : queues) {
      if (q->ReadyLocked()) ready.push_back(q);
    }
    if (ready.empty()) return;
    Queue* pick = ready.front();
    if (policy == Schedule::kReverse) pick = ready.back();
    if (policy == Schedule::kRandom) pick = ready[rng() % ready.size()];
    pick->granted_ = true;
    running = true;
    cv.notify_all();
  }
};

void Queue::SetPolicy(Schedule policy, uint64_t seed) {
  Executor& ex = Executor::Get();
  std::lock_guard<std::mutex> lock(ex.mu);
  ex.policy = policy;
  ex.rng.seed(seed);
}

Queue::Queue(bool blocking) : blocking_(blocking) {
  Executor& ex = Executor::Get();
  {
    std::lock_guard<std::mutex> lock(ex.mu);
    id_ = ex.next_id++;
    ex.queues.push_back(this);
  }
  worker_ = std::thread([this] { Work(); });
}

Queue::~Queue() {
  WaitFor(Enqueued());
  Executor& ex = Executor::Get();
  {
    std::lock_guard<std::mutex> lock(ex.mu);
    stop_ = true;
    ex.queues.erase(std::find(ex.queues.begin(), ex.queues.end(), this));
  }
  ex.cv.notify_all();
  worker_.join();
}

bool Queue::ReadyLocked() const {
  if (ops_.empty() || granted_) return false;
  for (const Dep& d : ops_.front().deps) {
    if (d.queue->completed_ < d.position) return false;
  }
  return true;
}

uint64_t Queue::Push(std::vector<Dep> deps, std::function<void()> fn) {
  Executor& ex = Executor::Get();
  std::lock_guard<std::mutex> lock(ex.mu);
  ops_.push_back(Op{std::move(deps), std::move(fn)});
  const uint64_t p = ++enqueued_;
  ex.Pump();
  return p;
}

uint64_t Queue::Enqueued() {
  std::lock_guard<std::mutex> lock(Executor::Get().mu);
  return enqueued_;
}

void Queue::WaitFor(uint64_t position) {
  Executor& ex = Executor::Get();
  std::unique_lock<std::mutex> lock(ex.mu);
  if (completed_ >= position) return;
  ++ex.demand;
  ex.Pump();
  ex.cv.wait(lock, [&] { return completed_ >= position; });
  --ex.demand;
}

bool Queue::Reached(uint64_t position) {
  std::lock_guard<std::mutex> lock(Executor::Get().mu);
  return completed_ >= position;
}

void Queue::Work() {
  Executor& ex = Executor::Get();
  for (;;) {
    std::function<void()> fn;
    {
      std::unique_lock<std::mutex> lock(ex.mu);
      ex.cv.wait(lock, [&] { return stop_ || granted_; });
      if (!granted_) return;  // stopped, nothing granted
      fn = std::move(ops_.front().fn);
    }
    // After a kernel fault the context is unusable: nothing queued runs any more.
    if (Device::Get().Sticky() == cudaSuccess) fn();
    {
      std::lock_guard<std::mutex> lock(ex.mu);
      ops_.pop_front();
      ++completed_;
      granted_ = false;
      ex.running = false;
      ex.Pump();
    }
    ex.cv.notify_all();
  }
}

}  // namespace moesplit::emu
