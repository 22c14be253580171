// Not built by CMake (it needs a llama.cpp build): the strongest check of the lattice
// quantizers, against llama.cpp's own quantization pipeline (llama_model_quantize, what
// llama-quantize runs) on a whole model. It
//   1. quantizes F16_GGUF to OUT with llama_model_quantize, file type FTYPE (19 IQ2_XXS, 20
//      IQ2_XS, 28 IQ2_S, 23 IQ3_XXS, 26 IQ3_S, 24 IQ1_S, 31 IQ1_M; or the mixes 29 IQ2_M, 27
//      IQ3_M), --pure unless MIX is given (every quantizable tensor in that type, or ggml's
//      fallback; with MIX: llama-quantize's per-tensor rule), and a flat importance matrix
//      (every entry 1.0, ne[0] * ne[2] per tensor) — llama.cpp refuses most of these types
//      without one;
//   2. for every tensor llama.cpp wrote in a lattice type, quantizes the same F16 values (as
//      f32) with moesplit's QuantizeRow and counts identical blocks.
// All must be identical (moesplit runs ggml's algorithms with the same flat weights); measured:
// 25 lattice tensors, 17216 of 17216 blocks identical for each of 19, 24, 31 on ds-tiny (seed
// 1234); the other types: see docs/PERFORMANCE.md ("Quantizers for IQ2_XS, IQ2_S, IQ3_XXS,
// IQ3_S").
//
// Build and run from the repository root after building moesplit_cpu_kernels in build/:
//   g++ -O1 -std=c++20 -I. -I/work/peers/llama.cpp/include -I/work/peers/llama.cpp/ggml/include \
//     tests/apps/llama_compat/quantize_vs_llama.cc build/cpu/cpu_kernels/libmoesplit_cpu_kernels.a
//     \
//     build/cpu/core/libmoesplit_base.a -L/work/peers/llama.cpp/build/bin -lllama -lggml
//     -lggml-base \ -o /tmp/quantize_vs_llama
//   build/apps/moesplit make-model --preset ds-tiny --quant F16 -o /tmp/f16.gguf
//   export LD_LIBRARY_PATH=/work/peers/llama.cpp/build/bin
//   /tmp/quantize_vs_llama /tmp/f16.gguf 19 /tmp/o.gguf [MIX]
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "cpu_kernels/quant/quant.h"
#include "ggml.h"
#include "gguf.h"
#include "llama.h"

namespace {

struct Loaded {
  ggml_context* ctx = nullptr;
  gguf_context* gguf = nullptr;
};

Loaded Load(const char* path) {
  Loaded l;
  gguf_init_params p = {/*no_alloc=*/false, /*ctx=*/&l.ctx};
  l.gguf = gguf_init_from_file(path, p);
  if (l.gguf == nullptr) {
    std::fprintf(stderr, "cannot read %s\n", path);
    std::exit(1);
  }
  return l;
}

// The lattice types (moesplit's GgmlType numbers them as ggml's enum does).
bool IsLattice(ggml_type t) {
  return t == GGML_TYPE_IQ2_XXS || t == GGML_TYPE_IQ2_XS || t == GGML_TYPE_IQ2_S ||
         t == GGML_TYPE_IQ3_XXS || t == GGML_TYPE_IQ3_S || t == GGML_TYPE_IQ1_S ||
         t == GGML_TYPE_IQ1_M;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 4 && argc != 5) {
    std::fprintf(stderr, "usage: %s F16_GGUF FTYPE OUT_GGUF [MIX]\n", argv[0]);
    return 2;
  }
  Loaded in = Load(argv[1]);
  // Flat importance matrix: one vector of 1.0 per 2D/3D tensor.
  std::vector<std::string> names;
  std::vector<std::vector<float>> ones;
  for (ggml_tensor* t = ggml_get_first_tensor(in.ctx); t; t = ggml_get_next_tensor(in.ctx, t)) {
    if (ggml_n_dims(t) < 2) continue;
    names.push_back(t->name);
    ones.emplace_back(static_cast<size_t>(t->ne[0] * t->ne[2]), 1.0f);
  }
  std::vector<llama_model_imatrix_data> imatrix;
  for (size_t i = 0; i < names.size(); ++i)
    imatrix.push_back({names[i].c_str(), ones[i].data(), ones[i].size()});
  imatrix.push_back({nullptr, nullptr, 0});

  llama_model_quantize_params qp = llama_model_quantize_default_params();
  qp.nthread = 2;
  qp.ftype = static_cast<llama_ftype>(std::atoi(argv[2]));
  qp.pure = argc == 4;
  qp.imatrix = imatrix.data();
  if (llama_model_quantize(argv[1], argv[3], &qp) != 0) {
    std::fprintf(stderr, "llama_model_quantize failed\n");
    return 1;
  }

  Loaded out = Load(argv[3]);
  long blocks = 0, same = 0, tensors = 0;
  for (ggml_tensor* q = ggml_get_first_tensor(out.ctx); q; q = ggml_get_next_tensor(out.ctx, q)) {
    if (!IsLattice(q->type)) continue;
    ggml_tensor* src = ggml_get_tensor(in.ctx, q->name);
    if (src == nullptr || src->type != GGML_TYPE_F16) {
      std::fprintf(stderr, "%s: no F16 source\n", q->name);
      return 1;
    }
    const int64_t n_per_row = q->ne[0], rows = ggml_nrows(q);
    const size_t row_bytes = ggml_row_size(q->type, n_per_row);
    const size_t block_bytes = ggml_type_size(q->type);
    std::vector<float> f(n_per_row);
    std::vector<uint8_t> ours(row_bytes);
    const auto mtype = static_cast<moesplit::GgmlType>(q->type);
    long t_blocks = 0, t_same = 0;
    for (int64_t r = 0; r < rows; ++r) {
      ggml_fp16_to_fp32_row(static_cast<const ggml_fp16_t*>(src->data) + r * n_per_row, f.data(),
                            n_per_row);
      moesplit::quant::QuantizeRow(mtype, f.data(), ours.data(), n_per_row);
      const uint8_t* theirs = static_cast<const uint8_t*>(q->data) + r * row_bytes;
      for (size_t b = 0; b < row_bytes; b += block_bytes) {
        ++t_blocks;
        t_same += std::equal(ours.begin() + b, ours.begin() + b + block_bytes, theirs + b);
      }
    }
    std::printf("%-32s %-8s %6ld of %6ld blocks identical\n", q->name, ggml_type_name(q->type),
                t_same, t_blocks);
    blocks += t_blocks;
    same += t_same;
    ++tensors;
  }
  std::printf("total: %ld lattice tensors, %ld of %ld blocks identical (%.4f%%)\n", tensors, same,
              blocks, blocks ? 100.0 * same / blocks : 0.0);
  return 0;
}
