// Fibers for the emulated CUDA device: every CUDA thread of a block runs on its own stack and
// gives the CPU back (Switch) only at a synchronisation point (__syncthreads, a warp shuffle or
// vote, __syncwarp) or when it returns. The switch is 12 instructions of x86-64 assembly
// (fiber.cc): ucontext's swapcontext makes a sigprocmask system call per switch, and the kernel
// tests switch tens of millions of times.
//
// Under AddressSanitizer every switch is announced (__sanitizer_start/finish_switch_fiber), so
// ASan checks the kernels' stack accesses on the fiber stacks too.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

namespace moesplit::emu {

// A saved execution context: a stack pointer, plus the stack's bounds for ASan.
struct Context {
  void* sp = nullptr;
  const void* stack_bottom = nullptr;  // lowest address of the stack (ASan)
  size_t stack_size = 0;
  void* asan_fake_stack = nullptr;  // ASan's fake-stack handle while switched away
};

// Suspends `from` and resumes `to`. `from_exits`: `from` never resumes (its stack is reused).
void Switch(Context& from, Context& to, bool from_exits = false);

// A fiber stack with a guard page below it (an overflowing kernel faults instead of writing
// into the next fiber's stack).
class FiberStack {
 public:
  explicit FiberStack(size_t bytes);
  ~FiberStack();
  FiberStack(const FiberStack&) = delete;
  FiberStack& operator=(const FiberStack&) = delete;
  void* bottom() const { return base_ + page_; }
  size_t size() const { return bytes_; }

 private:
  uint8_t* base_ = nullptr;  // guard page, then the stack
  size_t page_ = 0;
  size_t bytes_ = 0;
};

// Prepares `ctx` to start, at its first Switch into it, in entry(arg) on `stack`. entry must
// never return: it ends by switching away with from_exits = true.
void MakeContext(Context& ctx, FiberStack& stack, void (*entry)(void*), void* arg);

// Called first thing in a fiber entry and after every Switch returns in a fiber: completes
// ASan's bookkeeping of the switch and records the bounds of the context switched from
// (the scheduler's stack, needed for switching back to it).
void FinishSwitch(Context& self, Context* from);

// Per OS thread (each stream's worker runs its blocks on its own stacks): stacks are reused
// across blocks and kernels.
class StackPool {
 public:
  FiberStack& Get(size_t i);

 private:
  std::vector<std::unique_ptr<FiberStack>> stacks_;
};

}  // namespace moesplit::emu
