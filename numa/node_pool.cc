// NodePool = ThreadPool + pinning: the pool's per-worker start hook pins background worker w to
// cpus[w] before it takes a job, and the caller (worker 0) is pinned at its first ParallelFor
// when asked. NodeFanout = one NodePool per node + a small ThreadPool of leader threads (one per
// node, leader i pinned to cpus[0] of pool i) whose RunOnEachWorker broadcast hands fn(i, pool i)
// to leader i — the same spin-then-sleep hand-off as a parallel-for, no second mechanism.
#include "numa/node_pool.h"

#include <mutex>
#include <utility>

#include "core/base/status.h"
#include "numa/affinity.h"
#include "numa/thread_pool.h"

namespace moesplit::numa {

namespace {
// Pins the calling thread to `cpu`; "" when it held, else the warning line for it.
std::string PinOrWarn(const std::string& who, int cpu) {
  const Status st = PinCurrentThread({cpu});
  if (st.ok()) return "";
  return who + ": " + st.message() + "; left unpinned";
}

std::string WorkerName(int node, int worker) {
  return "node " + std::to_string(node) + " worker " + std::to_string(worker);
}
}  // namespace

struct NodePool::Impl {
  NodePoolOptions options;
  std::vector<std::string> warnings;  // one line per pin that failed, by worker
  bool caller_pin_done = false;       // pin_caller: the first ParallelFor pinned (or tried)
  std::unique_ptr<ThreadPool> pool;   // [cpus.size()] threads, worker 0 = the caller
};

NodePool::NodePool(NodePoolOptions options) : impl_(std::make_unique<Impl>()) {
  MOESPLIT_CHECK(!options.cpus.empty(), "NodePool for node ", options.node,
                 " has no cpus: give one entry per worker");
  impl_->options = std::move(options);
  const NodePoolOptions& o = impl_->options;
  const int n = static_cast<int>(o.cpus.size());
  if (!o.pin) {
    impl_->pool = std::make_unique<ThreadPool>(n);
    return;
  }
  // The hooks run concurrently, one per background worker: each writes its own slot, and the
  // ThreadPool constructor returns only after all have (so reading the slots is race-free).
  std::vector<std::string> slot(static_cast<size_t>(n));  // [n] warning of worker w, or ""
  impl_->pool = std::make_unique<ThreadPool>(n, [&o, &slot](int w) {
    slot[static_cast<size_t>(w)] = PinOrWarn(WorkerName(o.node, w), o.cpus[static_cast<size_t>(w)]);
  });
  for (std::string& s : slot) {
    if (!s.empty()) impl_->warnings.push_back(std::move(s));
  }
}

NodePool::~NodePool() = default;

int NodePool::size() const { return impl_->pool->size(); }

void NodePool::ParallelFor(int64_t n_tasks,
                           const std::function<void(int64_t task, int worker)>& fn) {
  Impl& im = *impl_;
  if (im.options.pin && im.options.pin_caller && !im.caller_pin_done) {
    im.caller_pin_done = true;
    std::string w = PinOrWarn(WorkerName(im.options.node, 0) + " (the caller)", im.options.cpus[0]);
    if (!w.empty()) im.warnings.push_back(std::move(w));
  }
  im.pool->ParallelFor(n_tasks, fn);
}

int NodePool::node() const { return impl_->options.node; }
const std::vector<int>& NodePool::cpus() const { return impl_->options.cpus; }
const std::vector<std::string>& NodePool::warnings() const { return impl_->warnings; }

struct NodeFanout::Impl {
  std::vector<std::unique_ptr<NodePool>> pools;  // [nodes]
  std::vector<std::string> leader_warnings;      // pins of leader threads 1.. that failed
  // [nodes] threads: leader 0 = the caller of Run, leader i = worker 0 of pools[i]. Declared
  // after `pools`, so destroyed (joined) before them.
  std::unique_ptr<ThreadPool> leaders;
};

NodeFanout::NodeFanout(std::vector<NodePoolOptions> nodes) : impl_(std::make_unique<Impl>()) {
  MOESPLIT_CHECK(!nodes.empty(), "NodeFanout needs at least one node pool");
  const int n = static_cast<int>(nodes.size());
  std::vector<char> pin(static_cast<size_t>(n));  // [n] pool i's options.pin
  for (int i = 0; i < n; ++i) {
    pin[static_cast<size_t>(i)] = nodes[static_cast<size_t>(i)].pin;
    // Leader i (i >= 1) is pinned below, once, by the fan-out itself.
    if (i > 0) nodes[static_cast<size_t>(i)].pin_caller = false;
    impl_->pools.push_back(std::make_unique<NodePool>(std::move(nodes[static_cast<size_t>(i)])));
  }
  std::vector<std::string> slot(static_cast<size_t>(n));  // [n] warning of leader i, or ""
  const std::vector<std::unique_ptr<NodePool>>& pools = impl_->pools;
  // Each pool's own options decide whether its leader is pinned (pin = false: it floats).
  impl_->leaders = std::make_unique<ThreadPool>(n, [&pools, &pin, &slot](int i) {
    const NodePool& p = *pools[static_cast<size_t>(i)];
    if (!pin[static_cast<size_t>(i)]) return;
    slot[static_cast<size_t>(i)] = PinOrWarn(WorkerName(p.node(), 0) + " (leader)", p.cpus()[0]);
  });
  for (std::string& s : slot) {
    if (!s.empty()) impl_->leader_warnings.push_back(std::move(s));
  }
}

NodeFanout::~NodeFanout() = default;

int NodeFanout::num_nodes() const { return static_cast<int>(impl_->pools.size()); }

NodePool& NodeFanout::pool(int node_index) {
  MOESPLIT_CHECK(node_index >= 0 && node_index < num_nodes(), "node index ", node_index,
                 " outside [0, ", num_nodes(), ")");
  return *impl_->pools[static_cast<size_t>(node_index)];
}

void NodeFanout::Run(const std::function<void(int node_index, NodePool& pool)>& fn) {
  impl_->leaders->RunOnEachWorker(
      [this, &fn](int i) { fn(i, *impl_->pools[static_cast<size_t>(i)]); });
}

std::vector<std::string> NodeFanout::warnings() const {
  std::vector<std::string> out;
  for (const std::unique_ptr<NodePool>& p : impl_->pools) {
    out.insert(out.end(), p->warnings().begin(), p->warnings().end());
  }
  out.insert(out.end(), impl_->leader_warnings.begin(), impl_->leader_warnings.end());
  return out;
}

}  // namespace moesplit::numa
