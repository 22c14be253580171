// The three places where CUDA source needs a different spelling on the emulated device
// (gpu_kernels/emu, MOESPLIT_CUDA_EMU) — launches and shared-memory declarations — written once
// here so that kernel bodies carry no #ifdef:
//
//   MOESPLIT_LAUNCH(grid, block, shared_bytes, stream, Kernel<T>)(args...);   Kernel<<<...>>>
//   MOESPLIT_SHARED(float, name, [32][4]);            __shared__ __align__(16) float name[32][4]
//   MOESPLIT_SHARED(int, name, );                     __shared__ __align__(16) int name
//   MOESPLIT_DYNAMIC_SHARED(float4, name);            extern __shared__ __align__(16) float4 name[]
//
// On the emulator a static declaration becomes a reference to the block's copy (one per block,
// poisoned with 0xFF when the block first reaches it), the dynamic one a pointer to the block's
// dynamic shared memory: the names are used exactly as the arrays they replace.
#pragma once

#if defined(MOESPLIT_CUDA_EMU)

#define MOESPLIT_LAUNCH(grid, block, shared, stream, ...) \
  ::moesplit::emu::MakeLauncher(__VA_ARGS__, grid, block, shared, stream, #__VA_ARGS__)

#define MOESPLIT_SHARED(type, name, dims)            \
  static const char moesplit_shared_site_##name = 0; \
  auto& name = *reinterpret_cast<type(*) dims>(      \
      ::moesplit::emu::SharedStatic(&moesplit_shared_site_##name, sizeof(type dims)))

#define MOESPLIT_DYNAMIC_SHARED(type, name) \
  type* const name = static_cast<type*>(::moesplit::emu::SharedDynamic())

#else

#define MOESPLIT_LAUNCH(grid, block, shared, stream, ...) \
  __VA_ARGS__<<<grid, block, shared, stream>>>
#define MOESPLIT_SHARED(type, name, dims) __shared__ __align__(16) type name dims
#define MOESPLIT_DYNAMIC_SHARED(type, name) extern __shared__ __align__(16) type name[]

#endif
