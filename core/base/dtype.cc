#include "core/base/dtype.h"

#include <array>
#include <cctype>

namespace moesplit {
namespace {

using T = GgmlType;

// Block geometry from ggml's type_traits table. K-quants: super-blocks of 256 values (QK_K).
constexpr TypeTraits kTraits[] = {
    {T::kF32, "f32", 1, 4, false},
    {T::kF16, "f16", 1, 2, false},
    {T::kQ4_0, "q4_0", 32, 18, true},    // f16 d + 16 B nibbles
    {T::kQ4_1, "q4_1", 32, 20, true},    // f16 d, m + 16 B nibbles
    {T::kQ5_0, "q5_0", 32, 22, true},    // f16 d + 4 B high bits + 16 B nibbles
    {T::kQ5_1, "q5_1", 32, 24, true},    // f16 d, m + 4 B qh + 16 B
    {T::kQ8_0, "q8_0", 32, 34, true},    // f16 d + 32 int8
    {T::kQ8_1, "q8_1", 32, 36, true},    // f16 d, s + 32 int8
    {T::kQ2_K, "q2_K", 256, 84, true},   // 16 B scales + 64 B quants + 2 f16
    {T::kQ3_K, "q3_K", 256, 110, true},  // 32 B hmask + 64 B quants + 12 B scales + f16
    {T::kQ4_K, "q4_K", 256, 144, true},  // 2 f16 + 12 B scales + 128 B nibbles
    {T::kQ5_K, "q5_K", 256, 176, true},  // 2 f16 + 12 B scales + 32 B qh + 128 B
    {T::kQ6_K, "q6_K", 256, 210, true},  // 128 B ql + 64 B qh + 16 int8 scales + f16
    {T::kQ8_K, "q8_K", 256, 292, true},  // f32 d + 256 int8 + 16 int16 bsums
    {T::kIQ2_XXS, "iq2_xxs", 256, 66, true},
    {T::kIQ2_XS, "iq2_xs", 256, 74, true},
    {T::kIQ3_XXS, "iq3_xxs", 256, 98, true},
    {T::kIQ1_S, "iq1_s", 256, 50, true},
    {T::kIQ4_NL, "iq4_nl", 32, 18, true},  // f16 d + 16 B of table indices
    {T::kIQ3_S, "iq3_s", 256, 110, true},
    {T::kIQ2_S, "iq2_s", 256, 82, true},
    {T::kIQ4_XS, "iq4_xs", 256, 136, true},  // f16 d + 2 + 4 B scales + 128 B indices
    {T::kI8, "i8", 1, 1, false},
    {T::kI16, "i16", 1, 2, false},
    {T::kI32, "i32", 1, 4, false},
    {T::kI64, "i64", 1, 8, false},
    {T::kF64, "f64", 1, 8, false},
    {T::kIQ1_M, "iq1_m", 256, 56, true},
    {T::kBF16, "bf16", 1, 2, false},
    {T::kTQ1_0, "tq1_0", 256, 54, true},
    {T::kTQ2_0, "tq2_0", 256, 66, true},
    {T::kMXFP4, "mxfp4", 32, 17, true},
    {T::kNVFP4, "nvfp4", 64, 36, true},  // 4 E4M3 scales + 32 B of 4-bit values
    {T::kQ1_0, "q1_0", 128, 18, true},   // f16 d + 16 B of 1-bit values
    {T::kQ2_0, "q2_0", 64, 18, true},    // f16 d + 16 B of 2-bit values
};

// Internal layouts (not in kTraits: TypeFromName and FindTypeTraits never return them).
constexpr TypeTraits kInternalTraits[] = {
    {T::kQ4_K_R16, "q4_K_r16", 256, 148, true},
    {T::kQ8_0_R16, "q8_0_r16", 32, 34, true},
    {T::kQ5_0_R16, "q5_0_r16", 32, 22, true},
    {T::kQ4_0_R16, "q4_0_r16", 32, 18, true},
    {T::kQ6_K_R16, "q6_K_r16", 256, 210, true},
    {T::kQ5_K_R16, "q5_K_r16", 256, 180, true},
    {T::kIQ4_NL_R16, "iq4_nl_r16", 32, 18, true},
    {T::kIQ4_XS_R16, "iq4_xs_r16", 256, 138, true},
    {T::kQ2_K_R16, "q2_K_r16", 256, 84, true},
    {T::kQ3_K_R16, "q3_K_r16", 256, 114, true},
    {T::kMXFP4_R16, "mxfp4_r16", 32, 17, true},
    {T::kIQ2_XXS_R16, "iq2_xxs_r16", 256, 70, true},
    {T::kIQ3_XXS_R16, "iq3_xxs_r16", 256, 102, true},
    {T::kIQ1_S_R16, "iq1_s_r16", 256, 58, true},
    {T::kIQ1_M_R16, "iq1_m_r16", 256, 66, true},
    {T::kQ5_1_R16, "q5_1_r16", 32, 24, true},
    {T::kIQ3_S_R16, "iq3_s_r16", 256, 110, true},
    {T::kIQ2_XS_R16, "iq2_xs_r16", 256, 78, true},
    {T::kIQ2_S_R16, "iq2_s_r16", 256, 82, true},
    {T::kQ4_1_R16, "q4_1_r16", 32, 20, true},
};

const TypeTraits* FindInternalTraits(GgmlType t) {
  for (const TypeTraits& tr : kInternalTraits) {
    if (tr.type == t) return &tr;
  }
  return nullptr;
}

// enum llama_ftype (llama.h): id, short name, llama.cpp's long name. Gaps are removed formats.
struct FileType {
  uint32_t id;
  const char* name;
  const char* description;
};
constexpr FileType kFileTypes[] = {
    {0, "F32", "all F32"},
    {1, "F16", "F16"},
    {2, "Q4_0", "Q4_0"},
    {3, "Q4_1", "Q4_1"},
    {7, "Q8_0", "Q8_0"},
    {8, "Q5_0", "Q5_0"},
    {9, "Q5_1", "Q5_1"},
    {10, "Q2_K", "Q2_K - Medium"},
    {11, "Q3_K_S", "Q3_K - Small"},
    {12, "Q3_K_M", "Q3_K - Medium"},
    {13, "Q3_K_L", "Q3_K - Large"},
    {14, "Q4_K_S", "Q4_K - Small"},
    {15, "Q4_K_M", "Q4_K - Medium"},
    {16, "Q5_K_S", "Q5_K - Small"},
    {17, "Q5_K_M", "Q5_K - Medium"},
    {18, "Q6_K", "Q6_K"},
    {19, "IQ2_XXS", "IQ2_XXS - 2.0625 bpw"},
    {20, "IQ2_XS", "IQ2_XS - 2.3125 bpw"},
    {21, "Q2_K_S", "Q2_K - Small"},
    {22, "IQ3_XS", "IQ3_XS - 3.3 bpw"},
    {23, "IQ3_XXS", "IQ3_XXS - 3.0625 bpw"},
    {24, "IQ1_S", "IQ1_S - 1.5625 bpw"},
    {25, "IQ4_NL", "IQ4_NL - 4.5 bpw"},
    {26, "IQ3_S", "IQ3_S - 3.4375 bpw"},
    {27, "IQ3_M", "IQ3_S mix - 3.66 bpw"},
    {28, "IQ2_S", "IQ2_S - 2.5 bpw"},
    {29, "IQ2_M", "IQ2_M - 2.7 bpw"},
    {30, "IQ4_XS", "IQ4_XS - 4.25 bpw"},
    {31, "IQ1_M", "IQ1_M - 1.75 bpw"},
    {32, "BF16", "BF16"},
    {36, "TQ1_0", "TQ1_0 - 1.69 bpw ternary"},
    {37, "TQ2_0", "TQ2_0 - 2.06 bpw ternary"},
    {38, "MXFP4_MOE", "MXFP4 MoE"},
    {39, "NVFP4", "NVFP4"},
    {40, "Q1_0", "Q1_0"},
    {41, "Q2_0", "Q2_0"},
};

const FileType* FindFileType(uint32_t id) {
  for (const FileType& f : kFileTypes) {
    if (f.id == id) return &f;
  }
  return nullptr;
}

constexpr std::array<int8_t, kGgmlTypeIdLimit> BuildIndex() {
  std::array<int8_t, kGgmlTypeIdLimit> idx{};
  for (auto& i : idx) i = -1;
  for (size_t i = 0; i < std::size(kTraits); ++i) {
    idx[static_cast<uint32_t>(kTraits[i].type)] = static_cast<int8_t>(i);
  }
  return idx;
}
constexpr auto kIndex = BuildIndex();

bool EqualsIgnoreCase(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (std::tolower(static_cast<unsigned char>(a[i])) !=
        std::tolower(static_cast<unsigned char>(b[i])))
      return false;
  }
  return true;
}

}  // namespace

const TypeTraits* FindTypeTraits(uint32_t id) {
  if (id >= kGgmlTypeIdLimit || kIndex[id] < 0) return nullptr;
  return &kTraits[kIndex[id]];
}

const TypeTraits& GetTypeTraits(GgmlType t) {
  if (const TypeTraits* internal = FindInternalTraits(t)) return *internal;
  const TypeTraits* tr = FindTypeTraits(static_cast<uint32_t>(t));
  MOESPLIT_CHECK(tr != nullptr, "unknown ggml type id ", static_cast<uint32_t>(t));
  return *tr;
}

int64_t RowGroup(GgmlType t) { return FindInternalTraits(t) != nullptr ? 16 : 1; }

StatusOr<GgmlType> TypeFromName(std::string_view name) {
  for (const TypeTraits& tr : kTraits) {
    if (EqualsIgnoreCase(tr.name, name)) return tr.type;
  }
  return InvalidArgumentError("unknown tensor type '", name,
                              "' (expected a ggml type name such as f32, f16, bf16, q8_0, q4_K)");
}

int64_t RowBytes(GgmlType t, int64_t n) {
  const TypeTraits& tr = GetTypeTraits(t);
  MOESPLIT_CHECK(n % tr.block_size == 0, n, " values is not a multiple of the ", tr.name,
                 " block size ", tr.block_size);
  return n / tr.block_size * tr.type_size;
}

std::string FileTypeName(uint32_t ftype) {
  const FileType* f = FindFileType(ftype);
  return f ? f->name : StrCat("unknown(", ftype, ")");
}

std::string FileTypeDescription(uint32_t ftype) {
  const FileType* f = FindFileType(ftype);
  return f ? f->description : "unknown, may not work";
}

}  // namespace moesplit
