#include "gpu_kernels/emu/block.h"

#include <algorithm>
#include <bit>
#include <cstring>
#include <map>
#include <memory>
#include <new>
#include <numeric>
#include <random>
#include <sstream>
#include <vector>

#include "gpu_kernels/emu/fiber.h"

namespace moesplit::emu {
namespace {

enum class ThreadState : uint8_t { kRunnable, kAtBarrier, kAtWarp, kDone };

struct Thread {
  Context ctx;
  BuiltinIds ids;
  int warp = 0, lane = 0;
  ThreadState state = ThreadState::kRunnable;
};

struct PendingOp {
  WarpOpKind kind;
  unsigned mask;
  uint64_t value;
  int arg, width;
};

struct Warp {
  uint32_t present = 0;  // lanes that exist (the last warp of a block may be partial)
  uint32_t exited = 0;
  uint32_t waiting = 0;  // lanes inside a warp operation
  PendingOp op[32];
  uint64_t result[32];
};

// A static __shared__ declaration's storage: one heap allocation per declaration and launch
// (separate allocations, so ASan sees an overflow from one array into the next), re-poisoned
// when a block first reaches the declaration.
struct SharedSlot {
  uint8_t* data = nullptr;
  size_t bytes = 0;
  uint64_t block_gen = 0;
};

struct AlignedDelete {
  void operator()(uint8_t* p) const { ::operator delete[](p, std::align_val_t(16)); }
};
using AlignedBuf = std::unique_ptr<uint8_t[], AlignedDelete>;

AlignedBuf NewAligned(size_t bytes) {
  return AlignedBuf(
      static_cast<uint8_t*>(::operator new[](std::max<size_t>(bytes, 1), std::align_val_t(16))));
}

struct Exec {
  const KernelLaunch* launch = nullptr;
  std::vector<Thread> threads;
  std::vector<Warp> warps;
  int n_done = 0, n_at_barrier = 0;
  Context sched;
  Thread* current = nullptr;
  uint64_t block_gen = 0;
  std::map<const void*, SharedSlot> slots;
  std::vector<AlignedBuf> slot_bufs;
  size_t static_bytes = 0;
  AlignedBuf dynamic;
  std::string fault;
  // The block's priority order of threads (the schedule) and each thread's place in it; the
  // scheduler always resumes the first runnable thread in that order, found from `cursor`.
  std::vector<int> order, place;
  size_t cursor = 0;
};

thread_local Exec* tls_exec = nullptr;
thread_local StackPool* tls_stacks = nullptr;

const char* OpName(WarpOpKind k) {
  switch (k) {
    case WarpOpKind::kSync:
      return "__syncwarp";
    case WarpOpKind::kShflIdx:
      return "__shfl_sync";
    case WarpOpKind::kShflUp:
      return "__shfl_up_sync";
    case WarpOpKind::kShflDown:
      return "__shfl_down_sync";
    case WarpOpKind::kShflXor:
      return "__shfl_xor_sync";
    case WarpOpKind::kBallot:
      return "__ballot_sync";
    case WarpOpKind::kAny:
      return "__any_sync";
    case WarpOpKind::kAll:
      return "__all_sync";
  }
  return "?";
}

std::string Where(const Exec& e, const Thread& t) {
  std::ostringstream s;
  s << e.launch->name << " block (" << t.ids.block_idx.x << "," << t.ids.block_idx.y << ","
    << t.ids.block_idx.z << ") thread (" << t.ids.thread_idx.x << "," << t.ids.thread_idx.y << ","
    << t.ids.thread_idx.z << ")";
  return s.str();
}

// Back to the scheduler until resumed.
void Yield(Exec& e, Thread& t) {
  Switch(t.ctx, e.sched);
  FinishSwitch(t.ctx, &e.sched);
}

void Wake(Exec& e, Thread& t) {
  t.state = ThreadState::kRunnable;
  e.cursor = std::min<size_t>(e.cursor, e.place[&t - e.threads.data()]);
}

void ReleaseBarrierIfComplete(Exec& e) {
  if (e.n_at_barrier == 0 || e.n_at_barrier + e.n_done < static_cast<int>(e.threads.size())) {
    return;
  }
  for (Thread& t : e.threads) {
    if (t.state == ThreadState::kAtBarrier) Wake(e, t);
  }
  e.n_at_barrier = 0;
}

// PTX shfl.sync's source lane for lane `lane` (mode, b, c as CUDA's __shfl*_sync pass them):
// j, or `lane` itself when j is outside the lane's segment.
int ShuffleSource(WarpOpKind kind, int lane, int b, int width) {
  const int seg = (32 - width) & 31;                       // c[12:8]: segment mask
  const int clamp = kind == WarpOpKind::kShflUp ? 0 : 31;  // c[4:0]
  const int max_lane = (lane & seg) | (clamp & ~seg);
  const int min_lane = lane & seg;
  b &= 31;
  int j = lane;
  bool in = false;
  switch (kind) {
    case WarpOpKind::kShflUp:
      j = lane - b;
      in = j >= max_lane;
      break;
    case WarpOpKind::kShflDown:
      j = lane + b;
      in = j <= max_lane;
      break;
    case WarpOpKind::kShflXor:
      j = lane ^ b;
      in = j <= max_lane;
      break;
    default:  // kShflIdx
      j = min_lane | (b & ~seg);
      in = j <= max_lane;
      break;
  }
  return in ? j : lane;
}

// Completes the operation of the lanes named in `mask` if all of them (those not exited) wait.
void TryCompleteWarp(Exec& e, Warp& w, unsigned mask, int warp_index) {
  const uint32_t needed = mask & w.present & ~w.exited;
  if (needed == 0 || (w.waiting & needed) != needed) return;
  const int first = std::countr_zero(needed);
  const PendingOp& ref = w.op[first];
  for (uint32_t m = needed; m != 0; m &= m - 1) {
    const int l = std::countr_zero(m);
    if (w.op[l].kind != ref.kind || w.op[l].mask != ref.mask) {
      Thread& t = e.threads[warp_index * 32 + l];
      std::ostringstream s;
      s << "warp " << warp_index << ": lane " << first << " waits in " << OpName(ref.kind)
        << " with mask 0x" << std::hex << ref.mask << ", lane " << std::dec << l << " in "
        << OpName(w.op[l].kind) << " with mask 0x" << std::hex << w.op[l].mask
        << " (every lane named in the mask must reach the same operation with the same mask; "
        << Where(e, t) << ")";
      KernelFault(s.str());
    }
  }
  uint64_t ballot = 0;
  for (uint32_t m = needed; m != 0; m &= m - 1) {
    const int l = std::countr_zero(m);
    if (w.op[l].value != 0) ballot |= uint64_t{1} << l;
  }
  for (uint32_t m = needed; m != 0; m &= m - 1) {
    const int l = std::countr_zero(m);
    const PendingOp& op = w.op[l];
    uint64_t r = 0;
    switch (op.kind) {
      case WarpOpKind::kSync:
        break;
      case WarpOpKind::kBallot:
        r = ballot;
        break;
      case WarpOpKind::kAny:
        r = ballot != 0;
        break;
      case WarpOpKind::kAll:
        r = ballot == needed;
        break;
      default: {
        const int j = ShuffleSource(op.kind, l, op.arg, op.width);
        // Reading a lane that does not take part is undefined in CUDA: all-one bits here.
        r = ((needed >> j) & 1u) ? w.op[j].value : ~uint64_t{0};
      }
    }
    w.result[l] = r;
  }
  w.waiting &= ~needed;
  for (uint32_t m = needed; m != 0; m &= m - 1) {
    Wake(e, e.threads[warp_index * 32 + std::countr_zero(m)]);
  }
}

// Thrown by KernelFault through the faulting thread's kernel frames, so that their destructors
// run (no leaks on the fault path); caught at the bottom of the fiber.
struct FaultUnwind {};

void FiberMain(void* arg) {
  Thread& t = *static_cast<Thread*>(arg);
  Exec& e = *tls_exec;
  FinishSwitch(t.ctx, &e.sched);
  try {
    e.launch->body();
    t.state = ThreadState::kDone;
    ++e.n_done;
    Warp& w = e.warps[t.warp];
    w.exited |= 1u << t.lane;
    // The exit may complete warp operations that named this lane, and the block barrier.
    for (uint32_t m = w.waiting; m != 0; m &= m - 1) {
      const int l = std::countr_zero(m);
      if ((w.waiting >> l) & 1u) TryCompleteWarp(e, w, w.op[l].mask, t.warp);
    }
    ReleaseBarrierIfComplete(e);
  } catch (const FaultUnwind&) {
    // e.fault is set; the scheduler abandons the block.
  }
  Switch(t.ctx, e.sched, /*from_exits=*/true);
  __builtin_unreachable();
}

std::string DeadlockReport(const Exec& e) {
  std::ostringstream s;
  s << "deadlock in " << e.launch->name << " block (" << e.threads[0].ids.block_idx.x << ","
    << e.threads[0].ids.block_idx.y << "," << e.threads[0].ids.block_idx.z
    << "): " << e.n_at_barrier << " threads wait in __syncthreads, " << e.n_done << " have exited";
  for (size_t wi = 0; wi < e.warps.size(); ++wi) {
    const Warp& w = e.warps[wi];
    if (w.waiting == 0) continue;
    const int l = std::countr_zero(w.waiting);
    s << "; warp " << wi << " lanes 0x" << std::hex << w.waiting << " wait in "
      << OpName(w.op[l].kind) << " with mask 0x" << w.op[l].mask << std::dec;
  }
  s << " (a barrier or warp operation not reached by every thread it waits for)";
  return s.str();
}

// Runs one block to its end or a fault.
void RunBlock(Exec& e, uint3 block_idx, Schedule schedule, std::mt19937_64& rng) {
  const KernelLaunch& L = *e.launch;
  const int n = static_cast<int>(L.block.x * L.block.y * L.block.z);
  ++e.block_gen;
  e.n_done = 0;
  e.n_at_barrier = 0;
  for (int i = 0; i < n; ++i) {
    Thread& t = e.threads[i];
    t.ids.thread_idx =
        uint3{i % L.block.x, (i / L.block.x) % L.block.y, i / (L.block.x * L.block.y)};
    t.ids.block_idx = block_idx;
    t.ids.block_dim = L.block;
    t.ids.grid_dim = L.grid;
    t.warp = i / 32;
    t.lane = i % 32;
    t.state = ThreadState::kRunnable;
    MakeContext(t.ctx, tls_stacks->Get(i), FiberMain, &t);
  }
  for (size_t w = 0; w < e.warps.size(); ++w) {
    const int lanes = std::min(32, n - static_cast<int>(w) * 32);
    e.warps[w] = Warp{};
    e.warps[w].present = lanes == 32 ? 0xffffffffu : ((1u << lanes) - 1);
  }
  if (L.dynamic_shared > 0) std::memset(e.dynamic.get(), 0xFF, L.dynamic_shared);

  e.order.resize(n);
  e.place.resize(n);
  std::iota(e.order.begin(), e.order.end(), 0);
  if (schedule == Schedule::kReverse) std::reverse(e.order.begin(), e.order.end());
  if (schedule == Schedule::kRandom) std::shuffle(e.order.begin(), e.order.end(), rng);
  for (int i = 0; i < n; ++i) e.place[e.order[i]] = i;
  e.cursor = 0;
  while (e.n_done < n) {
    while (e.cursor < e.order.size() &&
           e.threads[e.order[e.cursor]].state != ThreadState::kRunnable) {
      ++e.cursor;
    }
    if (e.cursor == e.order.size()) {
      e.fault = DeadlockReport(e);
      return;
    }
    Thread& t = e.threads[e.order[e.cursor]];
    e.current = &t;
    tls_ids = &t.ids;
    Switch(e.sched, t.ctx);
    FinishSwitch(e.sched, nullptr);
    tls_ids = nullptr;
    e.current = nullptr;
    if (!e.fault.empty()) return;
  }
}

}  // namespace

std::string RunGrid(const KernelLaunch& launch, Schedule schedule, uint64_t seed) {
  thread_local StackPool stacks;
  tls_stacks = &stacks;
  Exec e;
  e.launch = &launch;
  const int n = static_cast<int>(launch.block.x * launch.block.y * launch.block.z);
  e.threads.resize(n);
  e.warps.resize((n + 31) / 32);
  e.dynamic = NewAligned(launch.dynamic_shared);
  Exec* const saved = tls_exec;  // (never nested: host functions may not launch)
  tls_exec = &e;
  std::mt19937_64 rng(seed);
  const uint64_t n_blocks = uint64_t{launch.grid.x} * launch.grid.y * launch.grid.z;
  std::vector<uint64_t> blocks;
  if (schedule != Schedule::kInOrder) {
    blocks.resize(n_blocks);
    std::iota(blocks.begin(), blocks.end(), 0);
    if (schedule == Schedule::kReverse) std::reverse(blocks.begin(), blocks.end());
    if (schedule == Schedule::kRandom) std::shuffle(blocks.begin(), blocks.end(), rng);
  }
  for (uint64_t k = 0; k < n_blocks && e.fault.empty(); ++k) {
    const uint64_t b = blocks.empty() ? k : blocks[k];
    const uint3 idx{static_cast<unsigned>(b % launch.grid.x),
                    static_cast<unsigned>((b / launch.grid.x) % launch.grid.y),
                    static_cast<unsigned>(b / (uint64_t{launch.grid.x} * launch.grid.y))};
    RunBlock(e, idx, schedule, rng);
  }
  tls_exec = saved;
  return e.fault;
}

void SyncThreads() {
  Exec& e = *tls_exec;
  Thread& t = *e.current;
  t.state = ThreadState::kAtBarrier;
  ++e.n_at_barrier;
  ReleaseBarrierIfComplete(e);
  Yield(e, t);
}

uint64_t WarpOp(WarpOpKind kind, unsigned mask, uint64_t value, int arg, int width) {
  Exec& e = *tls_exec;
  Thread& t = *e.current;
  if (((mask >> t.lane) & 1u) == 0) {
    std::ostringstream s;
    s << OpName(kind) << " with mask 0x" << std::hex << mask << std::dec << " called by lane "
      << t.lane << ", which the mask does not name (" << Where(e, t) << ")";
    KernelFault(s.str());
  }
  if (width < 1 || width > 32 || (width & (width - 1)) != 0) {
    KernelFault(std::string(OpName(kind)) + ": width " + std::to_string(width) +
                " is not a power of two in [1, 32] (" + Where(e, t) + ")");
  }
  Warp& w = e.warps[t.warp];
  w.op[t.lane] = PendingOp{kind, mask, value, arg, width};
  w.waiting |= 1u << t.lane;
  t.state = ThreadState::kAtWarp;
  TryCompleteWarp(e, w, mask, t.warp);
  Yield(e, t);
  return w.result[t.lane];
}

void* SharedStatic(const void* site, size_t bytes) {
  Exec& e = *tls_exec;
  auto [it, fresh] = e.slots.try_emplace(site);
  SharedSlot& s = it->second;
  if (fresh) {
    e.static_bytes += bytes;
    if (e.static_bytes > kMaxStaticShared) {
      KernelFault(e.launch->name + ": static shared memory " + std::to_string(e.static_bytes) +
                  " bytes > 48 KiB (" + Where(e, *e.current) + ")");
    }
    if (e.static_bytes + e.launch->dynamic_shared > kMaxSharedOptIn) {
      KernelFault(e.launch->name + ": static + dynamic shared memory " +
                  std::to_string(e.static_bytes + e.launch->dynamic_shared) + " bytes > " +
                  std::to_string(kMaxSharedOptIn));
    }
    e.slot_bufs.push_back(NewAligned(bytes));
    s.data = e.slot_bufs.back().get();
    s.bytes = bytes;
  }
  if (s.block_gen != e.block_gen) {
    std::memset(s.data, 0xFF, s.bytes);
    s.block_gen = e.block_gen;
  }
  return s.data;
}

void* SharedDynamic() { return tls_exec->dynamic.get(); }

int LaneId() { return tls_exec->current->lane; }

void KernelFault(const std::string& what) {
  Exec& e = *tls_exec;
  if (e.fault.empty()) e.fault = what;
  throw FaultUnwind{};
}

}  // namespace moesplit::emu
