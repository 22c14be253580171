#include "core/engine/mla_split.h"

#include <cmath>
#include <string_view>

#include "cpu_kernels/quant/quant.h"

namespace moesplit::engine {

namespace {

bool IsFloatType(GgmlType t) {
  return t == GgmlType::kF32 || t == GgmlType::kF16 || t == GgmlType::kBF16;
}

// "blk.3.attn_kv_b.weight" -> "blk.3.attn_k_b.weight (derived from attn_kv_b)".
std::string DerivedName(std::string_view kv_b_name, std::string_view part) {
  std::string name(kv_b_name);
  const size_t at = name.find("attn_kv_b");
  if (at != std::string::npos) name.replace(at, 9, part);
  return StrCat(name, " (derived from attn_kv_b)");
}

constexpr float kF16Max = 65504.0f;

}  // namespace

GgmlType MlaSplitType(GgmlType kv_b_type) {
  return IsFloatType(kv_b_type) ? kv_b_type : GgmlType::kF16;
}

uint64_t MlaSplitBytes(GgmlType kv_b_type, const MlaHeadDims& d) {
  const GgmlType t = MlaSplitType(kv_b_type);
  const int64_t k = RowBytes(t, d.qk_nope) * d.kv_lora * d.n_head;
  const int64_t v = RowBytes(t, d.kv_lora) * d.v_head * d.n_head;
  return static_cast<uint64_t>(k + v);
}

MlaSplit::MlaSplit(const TensorView& kv_b, const MlaHeadDims& d)
    : kv_b_(kv_b),
      d_(d),
      type_(MlaSplitType(kv_b.type)),
      k_name_(DerivedName(kv_b.name, "attn_k_b")),
      v_name_(DerivedName(kv_b.name, "attn_v_b")) {
  MOESPLIT_CHECK(kv_b.ne[0] == d.kv_lora && kv_b.NumRows() == d.n_head * (d.qk_nope + d.v_head),
                 "MlaSplit: ", kv_b.name, " is not [", d.kv_lora, ", ",
                 d.n_head * (d.qk_nope + d.v_head), "]");
}

Status MlaSplit::CheckSource() const {
  if (!quant::CanDequantize(kv_b_.type)) {
    return InvalidArgumentError(kv_b_.name, ": type ", TypeName(kv_b_.type),
                                " cannot be dequantized to derive attn_k_b / attn_v_b for the GPU; "
                                "run this file with --device cpu");
  }
  return Status::Ok();
}

// Per head h: its nope + v rows of kv_b dequantized to f32 ([nope+v x L]); the key rows are
// written transposed (L rows of nope), the value rows as they are (v rows of L), each output row
// encoded in type_ by the reference codec.
Status MlaSplit::Derive() {
  MOESPLIT_RETURN_IF_ERROR(CheckSource());
  const int64_t H = d_.n_head, L = d_.kv_lora, nope = d_.qk_nope, hv = d_.v_head;
  const int64_t stride = nope + hv;
  const size_t src_row = static_cast<size_t>(RowBytes(kv_b_.type, L));
  const size_t k_row = static_cast<size_t>(RowBytes(type_, nope));
  const size_t v_row = static_cast<size_t>(RowBytes(type_, L));
  k_b_.assign(k_row * static_cast<size_t>(H * L), 0);
  v_b_.assign(v_row * static_cast<size_t>(H * hv), 0);
  std::vector<float> head(static_cast<size_t>(stride * L));  // [nope+v x L] one head, f32
  std::vector<float> kt(static_cast<size_t>(nope));          // one row of W_kb[h]^T
  const auto* src = static_cast<const uint8_t*>(kv_b_.data);
  for (int64_t h = 0; h < H; ++h) {
    for (int64_t r = 0; r < stride; ++r) {
      quant::DequantizeRow(kv_b_.type, src + static_cast<size_t>(h * stride + r) * src_row,
                           &head[static_cast<size_t>(r * L)], L);
    }
    if (type_ == GgmlType::kF16 && !IsFloatType(kv_b_.type)) {
      for (int64_t i = 0; i < stride * L; ++i) {
        const float x = head[static_cast<size_t>(i)];
        if (std::isfinite(x) && std::fabs(x) > kF16Max) {
          return InvalidArgumentError(kv_b_.name, ": value ", x, " (head ", h,
                                      ") is outside f16's "
                                      "range, so attn_k_b / attn_v_b cannot be derived in f16 for "
                                      "the GPU; run this file with --device cpu");
        }
      }
    }
    for (int64_t l = 0; l < L; ++l) {  // k_b row h*L + l: column i = W_kb[h][i][l]
      for (int64_t i = 0; i < nope; ++i)
        kt[static_cast<size_t>(i)] = head[static_cast<size_t>(i * L + l)];
      quant::QuantizeRow(type_, kt.data(), &k_b_[static_cast<size_t>(h * L + l) * k_row], nope);
    }
    for (int64_t j = 0; j < hv; ++j) {  // v_b row h*v + j = W_vb[h] row j
      quant::QuantizeRow(type_, &head[static_cast<size_t>((nope + j) * L)],
                         &v_b_[static_cast<size_t>(h * hv + j) * v_row], L);
    }
  }
  return Status::Ok();
}

TensorView MlaSplit::View(const std::string& name, const std::vector<uint8_t>& bytes, int64_t row,
                          int64_t rows, int64_t heads) const {
  TensorView t;
  t.name = name;
  t.type = type_;
  t.n_dims = 3;
  t.ne = {row, rows, heads, 1};
  t.data = bytes.empty() ? nullptr : bytes.data();
  t.nbytes = static_cast<uint64_t>(RowBytes(type_, row) * rows * heads);
  return t;
}

TensorView MlaSplit::k_b() const { return View(k_name_, k_b_, d_.qk_nope, d_.kv_lora, d_.n_head); }
TensorView MlaSplit::v_b() const { return View(v_name_, v_b_, d_.kv_lora, d_.v_head, d_.n_head); }

}  // namespace moesplit::engine
