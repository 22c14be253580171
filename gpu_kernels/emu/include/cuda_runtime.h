// The emulated CUDA device (gpu_kernels/emu, MOESPLIT_CUDA_EMU): this header stands in for the
// CUDA toolkit's cuda_runtime.h when the .cu sources are compiled by the host compiler.
#pragma once

#include "gpu_kernels/emu/kernel_api.h"
#include "gpu_kernels/emu/launch.h"
#include "gpu_kernels/emu/runtime_api.h"
