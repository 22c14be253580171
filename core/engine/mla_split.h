// The split MLA tensors attn_k_b / attn_v_b derived from the legacy attn_kv_b, as llama.cpp's
// convert_hf_to_gguf.py derives them from kv_b_proj (DeepseekV2Model.modify_tensors: view as
// [H, nope+v, L], split along dim 1, transpose the key part). The hybrid pass's HeadMatMul reads
// the split layout only, so a legacy file (the popular DeepSeek-R1 Q4_K_M uploads) gets them at
// load, one layer at a time (hybrid_forward.cc).
//
// Shapes (ggml order, ne[0] the row length; "rows of" = GGUF rows):
//   attn_kv_b  [L, H*(nope+v)]  H*(nope+v) rows of L; head h's rows h*(nope+v) .. +nope are
//                               W_kb[h] [nope x L] (k_nope = W_kb c), the next v rows W_vb[h]
//   attn_k_b   [nope, L, H]     H*L rows of nope: row h*L + l, column i = W_kb[h][i][l]
//                               (W_kb[h]^T: HeadMatMul's per-head [L x nope] query absorption)
//   attn_v_b   [L, v, H]        H*v rows of L: row h*v + j = W_vb[h] row j (a plain copy)
//
// Type: the float types keep theirs (F32, F16, BF16: the split is a rearrangement of values,
// exact); quantized kv_b (Q6_K in Q4_K_M files, ...) becomes F16, the values dequantized by the
// reference codec (cpu_kernels/quant) and rounded once to f16 (~5e-4 relative, far below the
// quantization error). A K-quant's k part cannot stay quantized anyway: its rows would be nope
// (128) values, shorter than a 256-value super-block.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/base/dtype.h"
#include "core/base/status.h"
#include "core/base/tensor_view.h"

namespace moesplit::engine {

struct MlaHeadDims {
  int64_t n_head = 0;   // H
  int64_t kv_lora = 0;  // L
  int64_t qk_nope = 0;  // nope
  int64_t v_head = 0;   // v
};

// The type of the derived k_b / v_b for an attn_kv_b of kv_b_type (see above).
GgmlType MlaSplitType(GgmlType kv_b_type);

// Device bytes of the derived k_b + v_b of one layer.
uint64_t MlaSplitBytes(GgmlType kv_b_type, const MlaHeadDims& d);

// One layer's derived tensors. Constructed with the shapes only (names, type, sizes: what
// Create's checking pass needs); Derive() then fills the bytes, which this object owns.
class MlaSplit {
 public:
  // kv_b: the layer's attn_kv_b view ("blk.N.attn_kv_b.weight"), [L, H*(nope+v)] (CHECKed: the
  // model loader validated it).
  MlaSplit(const TensorView& kv_b, const MlaHeadDims& d);

  // Whether the reference codec can dequantize kv_b's type: InvalidArgument naming the tensor
  // otherwise (IQ types; cheap: Create's checking pass calls it before any upload).
  Status CheckSource() const;
  // Dequantizes kv_b and fills k_b / v_b. InvalidArgument (naming the tensor) when a finite
  // value lies outside f16's range and the target type is F16 (a corrupt file, in practice).
  Status Derive();

  GgmlType type() const { return type_; }
  // Views of the derived tensors, named "blk.N.attn_k_b (derived from blk.N.attn_kv_b.weight)";
  // data is null before Derive(), nbytes always the full size.
  TensorView k_b() const;
  TensorView v_b() const;

 private:
  TensorView View(const std::string& name, const std::vector<uint8_t>& bytes, int64_t row,
                  int64_t rows, int64_t heads) const;

  TensorView kv_b_;
  MlaHeadDims d_;
  GgmlType type_;
  std::string k_name_, v_name_;
  std::vector<uint8_t> k_b_;  // [H*L rows of nope] of type_, after Derive()
  std::vector<uint8_t> v_b_;  // [H*v rows of L] of type_, after Derive()
};

}  // namespace moesplit::engine
