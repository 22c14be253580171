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
    {T::kIQ4_NL, "iq4_nl", 32, 18, true},
    {T::kIQ3_S, "iq3_s", 256, 110, true},
    {T::kIQ2_S, "iq2_s", 256, 82, true},
    {T::kIQ4_XS, "iq4_xs", 256, 136, true},
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
};

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
  const TypeTraits* tr = FindTypeTraits(static_cast<uint32_t>(t));
  MOESPLIT_CHECK(tr != nullptr, "unknown ggml type id ", static_cast<uint32_t>(t));
  return *tr;
}

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
  // enum llama_ftype (llama.h); gaps are removed formats.
  switch (ftype) {
    case 0:
      return "F32";
    case 1:
      return "F16";
    case 2:
      return "Q4_0";
    case 3:
      return "Q4_1";
    case 7:
      return "Q8_0";
    case 8:
      return "Q5_0";
    case 9:
      return "Q5_1";
    case 10:
      return "Q2_K";
    case 11:
      return "Q3_K_S";
    case 12:
      return "Q3_K_M";
    case 13:
      return "Q3_K_L";
    case 14:
      return "Q4_K_S";
    case 15:
      return "Q4_K_M";
    case 16:
      return "Q5_K_S";
    case 17:
      return "Q5_K_M";
    case 18:
      return "Q6_K";
    case 19:
      return "IQ2_XXS";
    case 20:
      return "IQ2_XS";
    case 21:
      return "Q2_K_S";
    case 22:
      return "IQ3_XS";
    case 23:
      return "IQ3_XXS";
    case 24:
      return "IQ1_S";
    case 25:
      return "IQ4_NL";
    case 26:
      return "IQ3_S";
    case 27:
      return "IQ3_M";
    case 28:
      return "IQ2_S";
    case 29:
      return "IQ2_M";
    case 30:
      return "IQ4_XS";
    case 31:
      return "IQ1_M";
    case 32:
      return "BF16";
    case 36:
      return "TQ1_0";
    case 37:
      return "TQ2_0";
    case 38:
      return "MXFP4_MOE";
    default:
      return StrCat("unknown(", ftype, ")");
  }
}

}  // namespace moesplit
