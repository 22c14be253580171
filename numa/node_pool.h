// NodePool: the workers of one NUMA node — one thread per physical core (SMT siblings idle by
// default), each pinned to its core — running ThreadPool's low-latency parallel-for (spin
// briefly, then sleep; dynamic task claiming so no worker idles at the end of a layer).
// NodeFanout runs one job per node pool concurrently (the shard / replicate modes: every node
// works on its own slice of the weights) and returns when all nodes are done.
//
//   Topology topo = *LoadTopology("");
//   NodePool pool({.node = 0, .cpus = topo.nodes[0].PrimaryCpus()});
//   for (const std::string& w : pool.warnings()) LOG(w);   // pinning that was not honoured
//   pool.ParallelFor(n, [&](int64_t task, int worker) { ... });
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/base/executor.h"

namespace moesplit::numa {

struct NodePoolOptions {
  int node = 0;           // OS id of the node (for logs and the placement report)
  std::vector<int> cpus;  // one worker per entry, pinned to that OS CPU id; worker 0 = the thread
                          // that calls ParallelFor (pinned at its first call, see below)
  bool pin = true;        // false: workers float (the --no-pin / container escape hatch)
  // The thread calling ParallelFor is worker 0. When true, the pool pins it to cpus[0] the
  // first time it calls; a pool driven by NodeFanout owns a dedicated leader thread instead.
  bool pin_caller = false;
};

class NodePool : public Executor {
 public:
  explicit NodePool(NodePoolOptions options);
  ~NodePool() override;
  NodePool(const NodePool&) = delete;
  NodePool& operator=(const NodePool&) = delete;

  int size() const override;
  void ParallelFor(int64_t n_tasks,
                   const std::function<void(int64_t task, int worker)>& fn) override;

  int node() const;
  const std::vector<int>& cpus() const;
  // One line per CPU that could not be pinned ("worker 3: cpu 17: Invalid argument (not in the
  // allowed set 0-15)"); empty when every pin held.
  const std::vector<std::string>& warnings() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// One pool per node; Run calls fn(node_index, pool) once per pool, all concurrently (node 0's on
// the calling thread, the others on the pools' pinned leader threads), and returns when all have
// returned. fn may call pool.ParallelFor.
class NodeFanout {
 public:
  explicit NodeFanout(std::vector<NodePoolOptions> nodes);
  ~NodeFanout();
  NodeFanout(const NodeFanout&) = delete;
  NodeFanout& operator=(const NodeFanout&) = delete;

  int num_nodes() const;
  NodePool& pool(int node_index);
  void Run(const std::function<void(int node_index, NodePool& pool)>& fn);
  std::vector<std::string> warnings() const;  // of every pool

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace moesplit::numa
