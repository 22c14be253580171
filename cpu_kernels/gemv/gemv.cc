#include "cpu_kernels/gemv/gemv.h"

#include <algorithm>
#include <cmath>

#include "core/base/status.h"
#include "cpu_kernels/gemv/gemv_internal.h"
#include "cpu_kernels/ops/ops.h"
#include "cpu_kernels/quant/quant.h"
#include "cpu_kernels/quant/repack.h"

namespace moesplit::gemv {
namespace {

// The scalar tier's activation quantizers are the references; the SIMD tiers' ones
// (gemv_quantize_*.cc) produce the same bytes.
void QuantizeQ8K(const float* x, void* dst, int64_t n) {
  quant::QuantizeRow(GgmlType::kQ8_K, x, dst, n);
}
void QuantizeQ8_0(const float* x, void* dst, int64_t n) {
  quant::QuantizeRow(GgmlType::kQ8_0, x, dst, n);
}

// The reference of scaled_softmax: ops::Softmax (std::exp, a double sum) of the scaled row; the
// log-sum-exp as max + log(the same double sum).
float ScaledSoftmaxScalar(float* x, int64_t valid, int64_t n, float scale) {
  float max = -INFINITY;
  for (int64_t i = 0; i < valid; ++i) max = std::max(max, x[i] *= scale);
  double sum = 0.0;
  for (int64_t i = 0; i < valid; ++i) sum += std::exp(static_cast<double>(x[i]) - max);
  ops::Softmax(x, valid);
  std::fill(x + valid, x + n, 0.0f);
  return valid == 0 ? -INFINITY : max + static_cast<float>(std::log(sum));
}

// The reference of row_mix: each output one f32 sum over the positions in order.
void RowMixScalar(const float* p, int64_t ldp, int64_t n_out, const float* rows, int64_t ld_rows,
                  int64_t n, int64_t d, float* y, int64_t ldy) {
  for (int64_t t = 0; t < n_out; ++t) {
    float* yt = y + t * ldy;
    std::fill(yt, yt + d, 0.0f);
    for (int64_t s = 0; s < n; ++s) {
      const float w = p[t * ldp + s];
      const float* r = rows + s * ld_rows;
      for (int64_t j = 0; j < d; ++j) yt[j] += w * r[j];
    }
  }
}

// The reference of row_scores: each score one f32 sum over the values in order.
void RowScoresScalar(const float* q, int64_t ldq, int64_t n_q, const float* rows, int64_t ld_rows,
                     int64_t n, int64_t d, float* s, int64_t lds) {
  for (int64_t j = 0; j < n_q; ++j) {
    for (int64_t p = 0; p < n; ++p) {
      float sum = 0.0f;
      for (int64_t k = 0; k < d; ++k) sum += q[j * ldq + k] * rows[p * ld_rows + k];
      s[j * lds + p] = sum;
    }
  }
}

#if defined(MOESPLIT_GEMV_X86)
// The AVX2 gemms with a wide path (gemv_avx2_wide.inc, gemv_legacy_wide_avx2.inc: from 8 tokens
// the weights are decoded once per 64-token block) block for the caches themselves: callers hand
// them every token (up to 256 per MoE chunk) instead of L2-sized token chunks of ~24-56 tokens,
// which decoded each weight block 2-3x as often. Marked by function, so the flag follows these
// kernels to every tier that registers them (the AVX-512 tiers take the AVX2 IQ kernels).
void MarkAvx2WideKernels(GemvKernels* k) {
  using namespace internal;  // NOLINT: the kernel names
  constexpr GemmFn kWide[] = {
      GemmQ2K_Q8K_Avx2,      GemmQ3K_Q8K_Avx2,      GemmQ4K_Q8K_Avx2,      GemmQ5K_Q8K_Avx2,
      GemmQ6K_Q8K_Avx2,      GemmIQ2XXS_Q8K_Avx2,   GemmIQ1S_Q8K_Avx2,     GemmIQ1M_Q8K_Avx2,
      GemmIQ3XXS_Q8K_Avx2,   GemmIQ3S_Q8K_Avx2,     GemmIQ2XS_Q8K_Avx2,    GemmIQ2S_Q8K_Avx2,
      GemmQ4_0_Q8_0_Avx2,    GemmQ5_0_Q8_0_Avx2,    GemmQ5_1_Q8_0_Avx2,    GemmQ4_1_Q8_0_Avx2,
      GemmMXFP4_Q8_0_Avx2,   GemmQ4_0R16_Q8_0_Avx2, GemmQ5_0R16_Q8_0_Avx2, GemmQ4_1R16_Q8_0_Avx2,
      GemmQ5_1R16_Q8_0_Avx2, GemmQ2KR16_Q8K_Avx2,   GemmQ3KR16_Q8K_Avx2,   GemmIQ2XXSR16_Q8K_Avx2};
  for (TypeKernels& t : k->by_type) {
    for (GemmFn f : kWide) t.self_blocking = t.self_blocking || t.gemm == f;
  }
}
#endif

GemvKernels BuildTable(cpu::IsaTier tier, DecodeRead read) {
#if defined(MOESPLIT_GEMV_X86)
  if (tier == cpu::IsaTier::kAmx) {  // the VNNI tier with AMX tiles where they pay (prefill)
    // The AMX tiles wrap kPrefetched's VNNI decode kernels (see DecodeRead).
    GemvKernels k = BuildTable(cpu::IsaTier::kAvx512Vnni, DecodeRead::kPrefetched);
    k.tier = tier;
    k.decode_read = read;
    internal::AddAmxKernels(&k);
    internal::AddAmxFloatKernels(&k);
    return k;
  }
#endif
  GemvKernels k;
  k.tier = tier;
  k.decode_read = read;
  k.quantize_q8k = QuantizeQ8K;
  k.quantize_q8_0 = QuantizeQ8_0;
  k.scaled_softmax = ScaledSoftmaxScalar;
  k.swiglu = ops::SwiGluInPlace;
  k.row_mix = RowMixScalar;
  k.row_scores = RowScoresScalar;
#if defined(MOESPLIT_GEMV_X86)
  if (tier == cpu::IsaTier::kAvx2) {
    k.quantize_q8k = internal::QuantizeQ8K_Avx2;
    k.quantize_q8_0 = internal::QuantizeQ8_0_Avx2;
    k.scaled_softmax = internal::ScaledSoftmax_Avx2;
    k.swiglu = internal::SwiGlu_Avx2;
    k.row_mix = internal::RowMix_Avx2;
    k.row_scores = internal::RowScores_Avx2;
  } else if (tier == cpu::IsaTier::kAvx512 || tier == cpu::IsaTier::kAvx512Vnni) {
    k.quantize_q8k = internal::QuantizeQ8K_Avx512;
    k.quantize_q8_0 = internal::QuantizeQ8_0_Avx512;
    k.scaled_softmax = internal::ScaledSoftmax_Avx512;
    k.swiglu = internal::SwiGlu_Avx512;
    k.row_mix = internal::RowMix_Avx512;
    k.row_scores = internal::RowScores_Avx512;
  }
#endif
  internal::AddKQuantKernels(tier, &k);
  internal::AddLegacyKernels(tier, &k);
  internal::AddFloatKernels(tier, &k);
#if defined(MOESPLIT_GEMV_X86)
  MarkAvx2WideKernels(&k);
  if (read == DecodeRead::kHardware && tier == cpu::IsaTier::kAvx512Vnni) {
    internal::UseHardwareDecodeReads(&k);
  }
#endif
  for (uint32_t id = 0; id < kTypeIdLimit; ++id) {
    const TypeKernels& t = k.by_type[id];
    const bool grouped = id >= kGgmlTypeIdLimit;  // internal row-group layouts: gemm only
    MOESPLIT_CHECK(grouped ? t.dot == nullptr : (t.dot == nullptr) == (t.gemm == nullptr),
                   "type id ", id, ": dot and gemm disagree");
  }
  return k;
}

// The four tier tables, built on first use (thread-safe static init) and never modified after.
struct Tables {
  GemvKernels tier[cpu::kNumIsaTiers][kNumDecodeReads];  // [tier][decode read mode]
  Tables() {
    for (int t = 0; t < cpu::kNumIsaTiers; ++t) {
      for (int r = 0; r < kNumDecodeReads; ++r) {
        tier[t][r] = BuildTable(static_cast<cpu::IsaTier>(t), static_cast<DecodeRead>(r));
      }
    }
  }
};

constexpr std::string_view kDecodeReadNames[kNumDecodeReads] = {"prefetched", "hardware"};

const Tables& AllTables() {
  static const Tables tables;
  return tables;
}

}  // namespace

const TypeKernels* GemvKernels::For(GgmlType t) const {
  const auto id = static_cast<uint32_t>(t);
  if (id >= kTypeIdLimit || by_type[id].gemm == nullptr) return nullptr;
  return &by_type[id];
}

QuantizeFn GemvKernels::Quantizer(GgmlType act_type) const {
  if (act_type == GgmlType::kQ8_K) return quantize_q8k;
  if (act_type == GgmlType::kQ8_0) return quantize_q8_0;
  return nullptr;
}

const GemvKernels& KernelsFor(cpu::IsaTier tier, DecodeRead read) {
  const int r = static_cast<int>(read);
  MOESPLIT_CHECK(r >= 0 && r < kNumDecodeReads, "bad DecodeRead ", r);
#if defined(MOESPLIT_GEMV_X86)
  const int t = static_cast<int>(tier);
  MOESPLIT_CHECK(t >= 0 && t < cpu::kNumIsaTiers, "bad IsaTier ", t);
  return AllTables().tier[t][r];
#else
  // Non-x86 builds only have the scalar tier (DetectCpuFeatures reports nothing higher).
  (void)tier;
  return AllTables().tier[0][r];
#endif
}

std::string_view DecodeReadName(DecodeRead read) {
  const int r = static_cast<int>(read);
  MOESPLIT_CHECK(r >= 0 && r < kNumDecodeReads, "bad DecodeRead ", r);
  return kDecodeReadNames[r];
}

DecodeRead PreferredDecodeRead(const cpu::CpuFeatures& features) {
  return cpu::AmdFamily19h(features) ? DecodeRead::kHardware : DecodeRead::kPrefetched;
}

StatusOr<DecodeRead> EffectiveDecodeRead(const cpu::CpuFeatures& features, const char* env) {
  if (env == nullptr || *env == '\0') return PreferredDecodeRead(features);
  for (int r = 0; r < kNumDecodeReads; ++r) {
    if (kDecodeReadNames[r] == env) return static_cast<DecodeRead>(r);
  }
  return InvalidArgumentError("MOESPLIT_DECODE_READ=\"", env,
                              "\" is not a decode read mode; use prefetched or hardware (or unset "
                              "it for the mode measured faster on this CPU)");
}

GgmlType LoadLayout(const GemvKernels& kernels, GgmlType type, int64_t rows) {
  const GgmlType r = quant::RepackedType(type, rows);
  return r != type && kernels.native_layout[static_cast<size_t>(r)] ? r : type;
}

bool ActivationTypeFor(GgmlType weight_type, GgmlType* activation_type) {
  const TypeKernels* t = KernelsFor(cpu::IsaTier::kScalar).For(weight_type);
  if (t == nullptr) return false;
  *activation_type = t->act_type;
  return true;
}

void Gemv(const GemvKernels& kernels, GgmlType weight_type, const void* w, size_t row_stride_bytes,
          int64_t rows, int64_t n, const void* a_q, float* y) {
  const TypeKernels* t = kernels.For(weight_type);
  MOESPLIT_CHECK(t != nullptr, "Gemv has no kernel for weight type ", TypeName(weight_type));
  MOESPLIT_CHECK(static_cast<int64_t>(row_stride_bytes) >= RowBytes(weight_type, n), "row stride ",
                 row_stride_bytes, " < row bytes ", RowBytes(weight_type, n));
  MOESPLIT_CHECK(rows % RowGroup(weight_type) == 0, rows, " rows of ", TypeName(weight_type));
  t->gemm(w, row_stride_bytes, rows, a_q, /*a_stride=*/0, /*n_tok=*/1, n, y, /*ldy=*/0);
}

}  // namespace moesplit::gemv
