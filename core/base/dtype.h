// Tensor element types: ggml's type ids exactly as stored in GGUF tensor infos, with their block
// geometry. A quantized type stores `block_size` values in `type_size` bytes, e.g. Q4_K: 256 values
// in 144 bytes = 4.5 bits/weight.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "core/base/status.h"

namespace moesplit {

// Values are ggml's `enum ggml_type` (ggml.h). Gaps (4, 5, 31-33, 36-38) are ids ggml removed;
// a file that uses them is rejected as an unknown type.
enum class GgmlType : uint32_t {
  kF32 = 0,
  kF16 = 1,
  kQ4_0 = 2,
  kQ4_1 = 3,
  kQ5_0 = 6,
  kQ5_1 = 7,
  kQ8_0 = 8,
  kQ8_1 = 9,
  kQ2_K = 10,
  kQ3_K = 11,
  kQ4_K = 12,
  kQ5_K = 13,
  kQ6_K = 14,
  kQ8_K = 15,
  kIQ2_XXS = 16,
  kIQ2_XS = 17,
  kIQ3_XXS = 18,
  kIQ1_S = 19,
  kIQ4_NL = 20,
  kIQ3_S = 21,
  kIQ2_S = 22,
  kIQ4_XS = 23,
  kI8 = 24,
  kI16 = 25,
  kI32 = 26,
  kI64 = 27,
  kF64 = 28,
  kIQ1_M = 29,
  kBF16 = 30,
  kTQ1_0 = 34,
  kTQ2_0 = 35,
  kMXFP4 = 39,
  kNVFP4 = 40,
  kQ1_0 = 41,
  kQ2_0 = 42,

  // moesplit's own load-time layouts, never read from or written to a file (FindTypeTraits
  // refuses their ids, so a GGUF that names one is rejected as unknown).
  // Q4_K with 16 rows interleaved (cpu_kernels/quant/repack.h): 256 values per row and block,
  // 148 bytes per row and block (2368 per 16-row group block: the 16 rows' 144-byte blocks
  // with their 6-bit scales unpacked to bytes).
  kQ4_K_R16 = 64,
  // The 32-value legacy blocks with 16 rows interleaved (repack.h): same bytes per row and
  // block as the file type (Q8_0 34, Q5_0 22, Q4_0 18), rearranged per 16-row group.
  kQ8_0_R16 = 65,
  kQ5_0_R16 = 66,
  kQ4_0_R16 = 67,
  // Q6_K with 16 rows interleaved (repack.h): 210 bytes per row and block, as the file type.
  kQ6_K_R16 = 68,
  // Q5_K with 16 rows interleaved (repack.h): 180 bytes per row and block (Q5_K: 176; the
  // scales are stored unpacked, as kQ4_K_R16).
  kQ5_K_R16 = 69,
  // IQ4_NL with 16 rows interleaved (repack.h): Q4_0_R16's layout (the nibbles are table
  // indices), 18 bytes per row and block as the file type.
  kIQ4_NL_R16 = 70,
  // IQ4_XS with 16 rows interleaved (repack.h): 138 bytes per row and block (IQ4_XS: 136; the
  // 6-bit scales are stored unpacked, as kQ4_K_R16).
  kIQ4_XS_R16 = 71,
  // Q2_K with 16 rows interleaved (repack.h): 84 bytes per row and block, as the file type.
  kQ2_K_R16 = 72,
  // Q3_K with 16 rows interleaved (repack.h): 114 bytes per row and block (Q3_K: 110; the
  // 6-bit scales are stored unpacked, as kQ4_K_R16).
  kQ3_K_R16 = 73,
  // MXFP4 with 16 rows interleaved (repack.h): kIQ4_NL_R16's layout with the E8M0 exponent
  // bytes in place of the f16 d's, 17 bytes per row and block as the file type.
  kMXFP4_R16 = 74,
  // IQ2_XXS with 16 rows interleaved (repack.h): 70 bytes per row and block (IQ2_XXS: 66; the
  // 7-bit sign indices are stored as whole sign bytes, 1 bit more per 8 values).
  kIQ2_XXS_R16 = 75,
  // IQ3_XXS with 16 rows interleaved (repack.h): 102 bytes per row and block (IQ3_XXS: 98; the
  // sign indices stored as whole sign bytes).
  kIQ3_XXS_R16 = 76,
  // IQ1_S with 16 rows interleaved (repack.h): 58 bytes per row and block (IQ1_S: 50; the
  // grid entries stored as base-3 digits, 5 + 3 values per group: 13 bits where the grid's
  // index is 11).
  kIQ1_S_R16 = 77,
  // IQ1_M the same way (repack.h): 66 bytes per row and block (IQ1_M: 56; each group's delta
  // sign and the 3-bit scales beside the digits in one 30-bit word per 32 values).
  kIQ1_M_R16 = 78,
  // Q5_1 with 16 rows interleaved (repack.h): kQ5_0_R16's payload with each block's 16 f16 d's
  // and 16 f16 m's in the group's head, 24 bytes per row and block as the file type.
  kQ5_1_R16 = 79,
  // IQ3_S with 16 rows interleaved (repack.h): 110 bytes per row and block, as the file type
  // (the grid indices' 9th bits and the signs as 64-bit lane masks).
  kIQ3_S_R16 = 80,
  // IQ2_XS with 16 rows interleaved (repack.h): 78 bytes per row and block (IQ2_XS: 74; the
  // 7-bit sign indices stored as whole sign bytes, as kIQ2_XXS_R16).
  kIQ2_XS_R16 = 81,
  // IQ2_S with 16 rows interleaved (repack.h): 82 bytes per row and block, as the file type.
  kIQ2_S_R16 = 82,
  // Q4_1 with 16 rows interleaved (repack.h): kQ4_0_R16's payload with each block's 16 f16 d's
  // and 16 f16 m's in the group's head, 20 bytes per row and block as the file type.
  kQ4_1_R16 = 83,
};

inline constexpr uint32_t kGgmlTypeIdLimit = 43;  // ids >= this are unknown (ggml 0a50d9909)
inline constexpr uint32_t kTypeIdLimit = 84;      // ggml's ids and moesplit's internal layouts

// The rows a layout interleaves: 16 for the *_R16 layouts, 1 for every GGUF type. Matrices of such
// a type are sliced only at multiples of this many rows.
int64_t RowGroup(GgmlType t);

struct TypeTraits {
  GgmlType type;
  const char* name;    // ggml's spelling: "f32", "q4_K", "iq2_xxs", "bf16"
  int64_t block_size;  // values per block (1 for plain types)
  int64_t type_size;   // bytes per block
  bool quantized;      // block-quantized (not a plain scalar type)
};

// nullptr when `id` is not a type ggml currently defines (moesplit's internal layouts included:
// this is the lookup for ids read from files).
const TypeTraits* FindTypeTraits(uint32_t id);
// CHECKs that `t` is known (a GgmlType value can only come from a validated id or from
// moesplit's own repacking).
const TypeTraits& GetTypeTraits(GgmlType t);
inline const char* TypeName(GgmlType t) { return GetTypeTraits(t).name; }
// Case-insensitive lookup by ggml name ("Q4_K", "q4_k", "BF16").
StatusOr<GgmlType> TypeFromName(std::string_view name);

// Bytes of `n` values of type `t`; CHECKs that n is a multiple of the block size.
int64_t RowBytes(GgmlType t, int64_t n);

// llama.cpp's `general.file_type` (enum llama_ftype) names, e.g. 15 -> "Q4_K_M".
// Returns "unknown(N)" for ids it does not know.
std::string FileTypeName(uint32_t ftype);
// The long form llama.cpp prints (llama_model_ftype_name; llama-bench's "model" column), e.g.
// 15 -> "Q4_K - Medium"; "unknown, may not work" for ids it does not know.
std::string FileTypeDescription(uint32_t ftype);

}  // namespace moesplit
