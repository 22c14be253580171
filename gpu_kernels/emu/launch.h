// Kernel launches on the emulated device: MOESPLIT_LAUNCH (gpu_kernels/kernel_macros.h) expands
// to MakeLauncher(&kernel, grid, block, shared, stream, "name")(args...). As with <<<>>>, the
// arguments are converted to the kernel's parameter types and copied when the launch is queued;
// every thread of the grid then calls the kernel with its own copy of them.
#pragma once

#include <cstddef>
#include <memory>
#include <tuple>
#include <type_traits>
#include <utility>

#include "gpu_kernels/emu/block.h"
#include "gpu_kernels/emu/runtime_api.h"

namespace moesplit::emu {

template <typename... P>
class Launcher {
 public:
  Launcher(void (*fn)(P...), dim3 grid, dim3 block, size_t shared, cudaStream_t stream,
           const char* name)
      : fn_(fn), grid_(grid), block_(block), shared_(shared), stream_(stream), name_(name) {}

  template <typename... A>
  void operator()(A&&... args) const {
    static_assert(sizeof...(A) == sizeof...(P), "kernel launched with the wrong argument count");
    auto params = std::make_shared<const std::tuple<std::decay_t<P>...>>(
        static_cast<std::decay_t<P>>(std::forward<A>(args))...);
    KernelLaunch l;
    l.name = name_;
    l.grid = grid_;
    l.block = block_;
    l.dynamic_shared = shared_;
    auto* fn = fn_;
    l.body = [fn, params] { std::apply(fn, *params); };
    LaunchKernel(reinterpret_cast<const void*>(fn_), std::move(l), stream_);
  }

 private:
  void (*fn_)(P...);
  dim3 grid_, block_;
  size_t shared_;
  cudaStream_t stream_;
  const char* name_;
};

template <typename... P>
Launcher<P...> MakeLauncher(void (*fn)(P...), dim3 grid, dim3 block, size_t shared,
                            cudaStream_t stream, const char* name) {
  return Launcher<P...>(fn, grid, block, shared, stream, name);
}

}  // namespace moesplit::emu
