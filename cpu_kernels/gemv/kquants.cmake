# kquants kernel family: per-ISA sources of moesplit_cpu_gemv and their flags (included by
# cpu_kernels/CMakeLists.txt inside the x86 block; see gemv/gemv_internal.h for file ownership).
