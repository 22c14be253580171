# legacy kernel family: per-ISA sources of moesplit_cpu_gemv and their flags (included by
# cpu_kernels/CMakeLists.txt inside the x86 block; see gemv/gemv_internal.h for file ownership).
target_sources(moesplit_cpu_gemv PRIVATE
  gemv/gemv_legacy_avx2.cc
  gemv/gemv_legacy_avx512.cc
  gemv/gemv_legacy_avx512vnni.cc)
set_source_files_properties(gemv/gemv_legacy_avx2.cc PROPERTIES
  COMPILE_OPTIONS "${MOESPLIT_FLAGS_AVX2}")
set_source_files_properties(gemv/gemv_legacy_avx512.cc PROPERTIES
  COMPILE_OPTIONS "${MOESPLIT_FLAGS_AVX512}")
set_source_files_properties(gemv/gemv_legacy_avx512vnni.cc PROPERTIES
  COMPILE_OPTIONS "${MOESPLIT_FLAGS_AVX512VNNI}")
# Activation quantizers (Q8_K / Q8_0) of the AVX2 and AVX-512 tiers. -ffp-contract=off: they
# must round exactly like the reference quantizers (a fused x * id - t would change ties).
target_sources(moesplit_cpu_gemv PRIVATE
  gemv/gemv_quantize_avx2.cc
  gemv/gemv_quantize_avx512.cc)
set_source_files_properties(gemv/gemv_quantize_avx2.cc PROPERTIES
  COMPILE_OPTIONS "${MOESPLIT_FLAGS_AVX2};-ffp-contract=off")
set_source_files_properties(gemv/gemv_quantize_avx512.cc PROPERTIES
  COMPILE_OPTIONS "${MOESPLIT_FLAGS_AVX512};-ffp-contract=off")
