#include "gpu_kernels/emu/fiber.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>

#if defined(__SANITIZE_ADDRESS__)
#define MOESPLIT_EMU_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define MOESPLIT_EMU_ASAN 1
#endif
#endif

#if defined(MOESPLIT_EMU_ASAN)
#include <sanitizer/asan_interface.h>
#include <sanitizer/common_interface_defs.h>
#endif

#if !defined(__x86_64__)
#error "the emulated CUDA device's fibers are written for x86-64 (gpu_kernels/emu/fiber.cc)"
#endif

// void moesplit_emu_switch(void** save_sp, void* load_sp): pushes the System V callee-saved
// registers, stores the stack pointer, loads the other one and pops its registers. A fresh
// context (MakeContext) "returns" into moesplit_emu_trampoline with the entry in r12 and its
// argument in r13.
asm(R"(
  .text
  .globl moesplit_emu_switch
  .type moesplit_emu_switch,@function
moesplit_emu_switch:
  pushq %rbp
  pushq %rbx
  pushq %r12
  pushq %r13
  pushq %r14
  pushq %r15
  movq %rsp, (%rdi)
  movq %rsi, %rsp
  popq %r15
  popq %r14
  popq %r13
  popq %r12
  popq %rbx
  popq %rbp
  ret
  .size moesplit_emu_switch,.-moesplit_emu_switch

  .globl moesplit_emu_trampoline
  .type moesplit_emu_trampoline,@function
moesplit_emu_trampoline:
  movq %r13, %rdi
  callq *%r12
  ud2
  .size moesplit_emu_trampoline,.-moesplit_emu_trampoline
)");

extern "C" void moesplit_emu_switch(void** save_sp, void* load_sp);
extern "C" void moesplit_emu_trampoline();

namespace moesplit::emu {

void Switch(Context& from, Context& to, bool from_exits) {
#if defined(MOESPLIT_EMU_ASAN)
  __sanitizer_start_switch_fiber(from_exits ? nullptr : &from.asan_fake_stack, to.stack_bottom,
                                 to.stack_size);
#else
  (void)from_exits;
#endif
  moesplit_emu_switch(&from.sp, to.sp);
  // Back in `from`, resumed by someone: the resumer's bookkeeping happens in FinishSwitch,
  // called by the code that knows what it was switched from.
}

void FinishSwitch(Context& self, Context* from) {
#if defined(MOESPLIT_EMU_ASAN)
  const void* bottom = nullptr;
  size_t size = 0;
  __sanitizer_finish_switch_fiber(self.asan_fake_stack, &bottom, &size);
  if (from != nullptr) {
    from->stack_bottom = bottom;
    from->stack_size = size;
  }
#else
  (void)self;
  (void)from;
#endif
}

FiberStack::FiberStack(size_t bytes) {
  page_ = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  bytes_ = (bytes + page_ - 1) / page_ * page_;
  void* p =
      mmap(nullptr, bytes_ + page_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) {
    std::fprintf(stderr, "emulated CUDA device: mmap of a %zu-byte fiber stack failed\n", bytes_);
    std::abort();
  }
  base_ = static_cast<uint8_t*>(p);
  mprotect(base_, page_, PROT_NONE);
}

FiberStack::~FiberStack() { munmap(base_, bytes_ + page_); }

void MakeContext(Context& ctx, FiberStack& stack, void (*entry)(void*), void* arg) {
  uint8_t* top = static_cast<uint8_t*>(stack.bottom()) + stack.size();  // 16-byte aligned
#if defined(MOESPLIT_EMU_ASAN)
  // A fiber abandoned mid-kernel (an emulator error) left its frames' redzones poisoned.
  __asan_unpoison_memory_region(stack.bottom(), stack.size());
#endif
  // sp = top - 72: six registers, the trampoline's address, padding; after the pops and the ret
  // the trampoline runs with rsp = top - 16, 16-byte aligned for its call (System V).
  void** sp = reinterpret_cast<void**>(top - 72);
  sp[0] = nullptr;                                            // r15
  sp[1] = nullptr;                                            // r14
  sp[2] = arg;                                                // r13
  sp[3] = reinterpret_cast<void*>(entry);                     // r12
  sp[4] = nullptr;                                            // rbx
  sp[5] = nullptr;                                            // rbp
  sp[6] = reinterpret_cast<void*>(&moesplit_emu_trampoline);  // return address
  sp[7] = nullptr;
  sp[8] = nullptr;
  ctx.sp = sp;
  ctx.stack_bottom = stack.bottom();
  ctx.stack_size = stack.size();
  ctx.asan_fake_stack = nullptr;
}

namespace {
#if defined(MOESPLIT_EMU_ASAN)
constexpr size_t kStackBytes = 512 * 1024;  // ASan's redzones make frames several times larger
#else
constexpr size_t kStackBytes = 128 * 1024;
#endif
}  // namespace

FiberStack& StackPool::Get(size_t i) {
  while (stacks_.size() <= i) stacks_.push_back(std::make_unique<FiberStack>(kStackBytes));
  return *stacks_[i];
}

}  // namespace moesplit::emu
