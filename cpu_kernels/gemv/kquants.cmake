# kquants kernel family: per-ISA sources of moesplit_cpu_gemv and their flags (included by
# cpu_kernels/CMakeLists.txt inside the x86 block; see gemv/gemv_internal.h for file ownership).
# The scalar reference dots are in gemv/gemv_scalar.cc (listed there: built on every platform).
target_sources(moesplit_cpu_gemv PRIVATE
  gemv/gemv_kquants_avx2.cc gemv/gemv_kquants_avx512.cc gemv/gemv_kquants_avx512vnni.cc)
set_source_files_properties(gemv/gemv_kquants_avx2.cc PROPERTIES
  COMPILE_OPTIONS "${MOESPLIT_FLAGS_AVX2}")
set_source_files_properties(gemv/gemv_kquants_avx512.cc PROPERTIES
  COMPILE_OPTIONS "${MOESPLIT_FLAGS_AVX512}")
set_source_files_properties(gemv/gemv_kquants_avx512vnni.cc PROPERTIES
  COMPILE_OPTIONS "${MOESPLIT_FLAGS_AVX512VNNI}")
# IQ4_XS (256-value super-blocks with table levels): AVX2 (in gemv_kquants_avx2.cc; also the
# AVX-512 tier's), VNNI, and VNNI + VBMI (vpermb lookups; picked within the VNNI tier where the
# CPU has VBMI).
target_sources(moesplit_cpu_gemv PRIVATE gemv/gemv_iq4xs_avx512vnni.cc
  gemv/gemv_iq4xs_avx512vbmi.cc)
set_source_files_properties(gemv/gemv_iq4xs_avx512vbmi.cc PROPERTIES
  COMPILE_OPTIONS "${MOESPLIT_FLAGS_AVX512VNNI};-mavx512vbmi")
set_source_files_properties(gemv/gemv_iq4xs_avx512vnni.cc PROPERTIES
  COMPILE_OPTIONS "${MOESPLIT_FLAGS_AVX512VNNI}")
# Q2_K / Q3_K: AVX2 (tiles and the R16 kernels, in gemv_kquants_avx2.cc; also the AVX-512
# tier's) and VNNI (file-layout dots + the R16 kernels).
target_sources(moesplit_cpu_gemv PRIVATE gemv/gemv_q23k_avx512vnni.cc)
set_source_files_properties(gemv/gemv_q23k_avx512vnni.cc PROPERTIES
  COMPILE_OPTIONS "${MOESPLIT_FLAGS_AVX512VNNI}")
# ... and the R16 kernels again with GFNI bit picks (picked within the VNNI tier where the CPU
# has GFNI).
target_sources(moesplit_cpu_gemv PRIVATE gemv/gemv_q23k_avx512gfni.cc)
set_source_files_properties(gemv/gemv_q23k_avx512gfni.cc PROPERTIES
  COMPILE_OPTIONS "${MOESPLIT_FLAGS_AVX512VNNI};-mgfni")
# IQ2_XXS / IQ1_S / IQ1_M (lattice grids): AVX2 (also the AVX-512 tier's and the VNNI tier's
# without VBMI) and VNNI + VBMI + GFNI (vpermi2b / vpmultishiftqb decode, gf2p8affineqb levels;
# picked where the CPU has VBMI and GFNI).
target_sources(moesplit_cpu_gemv PRIVATE gemv/gemv_iq_avx2.cc gemv/gemv_iq_avx512vbmi.cc
  gemv/gemv_iq_r16_avx2.cc gemv/gemv_iq1_r16_avx2.cc)
set_source_files_properties(gemv/gemv_iq_avx2.cc gemv/gemv_iq_r16_avx2.cc
  gemv/gemv_iq1_r16_avx2.cc PROPERTIES
  COMPILE_OPTIONS "${MOESPLIT_FLAGS_AVX2}")
set_source_files_properties(gemv/gemv_iq_avx512vbmi.cc PROPERTIES
  COMPILE_OPTIONS "${MOESPLIT_FLAGS_AVX512VNNI};-mavx512vbmi;-mbmi2;-mgfni")
# IQ2_XXS's / IQ3_XXS's / IQ1_S's / IQ1_M's 16-row layouts (kIQ2_XXS_R16 / kIQ3_XXS_R16 /
# kIQ1_S_R16 / kIQ1_M_R16): VNNI + VBMI + GFNI.
target_sources(moesplit_cpu_gemv PRIVATE gemv/gemv_iq_r16_avx512vbmi.cc)
set_source_files_properties(gemv/gemv_iq_r16_avx512vbmi.cc PROPERTIES
  COMPILE_OPTIONS "${MOESPLIT_FLAGS_AVX512VNNI};-mavx512vbmi;-mgfni")
# IQ3_XXS / IQ3_S / IQ2_XS / IQ2_S (lattice grids): AVX2 dots (also the AVX-512 tier's and the
# VNNI tier's without VBMI) and VNNI + VBMI dots (gathers, vpermi2b signs).
target_sources(moesplit_cpu_gemv PRIVATE gemv/gemv_iq23_avx2.cc gemv/gemv_iq23_avx512vbmi.cc)
set_source_files_properties(gemv/gemv_iq23_avx2.cc PROPERTIES
  COMPILE_OPTIONS "${MOESPLIT_FLAGS_AVX2}")
set_source_files_properties(gemv/gemv_iq23_avx512vbmi.cc PROPERTIES
  COMPILE_OPTIONS "${MOESPLIT_FLAGS_AVX512VNNI};-mavx512vbmi;-mbmi2")
