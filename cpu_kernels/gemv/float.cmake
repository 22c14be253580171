# float kernel family: per-ISA sources of moesplit_cpu_gemv and their flags (included by
# cpu_kernels/CMakeLists.txt inside the x86 block; see gemv/gemv_internal.h for file ownership).
target_sources(moesplit_cpu_gemv PRIVATE
  gemv/gemv_float_avx2.cc
  gemv/gemv_float_avx512.cc)
set_source_files_properties(gemv/gemv_float_avx2.cc PROPERTIES
  COMPILE_OPTIONS "${MOESPLIT_FLAGS_AVX2}")
set_source_files_properties(gemv/gemv_float_avx512.cc PROPERTIES
  COMPILE_OPTIONS "${MOESPLIT_FLAGS_AVX512}")
# The AMX tier's F32 GEMM (bf16 split products on AMX-BF16 tiles).
target_sources(moesplit_cpu_gemv PRIVATE gemv/gemv_float_amx.cc)
set_source_files_properties(gemv/gemv_float_amx.cc PROPERTIES
  COMPILE_OPTIONS "${MOESPLIT_FLAGS_AVX512};-mavx512bf16;-mamx-tile;-mamx-bf16")
# Softmax of attention score rows (GemvKernels::scaled_softmax) and SwiGLU, kAvx2 and kAvx512 up.
target_sources(moesplit_cpu_gemv PRIVATE gemv/softmax_avx2.cc)
set_source_files_properties(gemv/softmax_avx2.cc PROPERTIES
  COMPILE_OPTIONS "${MOESPLIT_FLAGS_AVX2}")
target_sources(moesplit_cpu_gemv PRIVATE gemv/softmax_avx512.cc)
set_source_files_properties(gemv/softmax_avx512.cc PROPERTIES
  COMPILE_OPTIONS "${MOESPLIT_FLAGS_AVX512}")
# Weighted sums of f32 rows and scores against them (GemvKernels::row_mix, row_scores: MLA's
# absorbed decode), kAvx2 and kAvx512 up.
target_sources(moesplit_cpu_gemv PRIVATE gemv/row_mix_avx2.cc)
set_source_files_properties(gemv/row_mix_avx2.cc PROPERTIES
  COMPILE_OPTIONS "${MOESPLIT_FLAGS_AVX2}")
target_sources(moesplit_cpu_gemv PRIVATE gemv/row_scores_avx2.cc)
set_source_files_properties(gemv/row_scores_avx2.cc PROPERTIES
  COMPILE_OPTIONS "${MOESPLIT_FLAGS_AVX2}")
target_sources(moesplit_cpu_gemv PRIVATE gemv/row_scores_avx512.cc)
set_source_files_properties(gemv/row_scores_avx512.cc PROPERTIES
  COMPILE_OPTIONS "${MOESPLIT_FLAGS_AVX512}")
target_sources(moesplit_cpu_gemv PRIVATE gemv/row_mix_avx512.cc)
set_source_files_properties(gemv/row_mix_avx512.cc PROPERTIES
  COMPILE_OPTIONS "${MOESPLIT_FLAGS_AVX512}")
