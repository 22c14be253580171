// Load-time repacking of the dense (non-expert) matrices the CPU forward pass multiplies: the
// attention projections (with the split MLA maps attn_k_b / attn_v_b, per head), the dense FFN
// of the leading layers and the output head. Same layouts
// and rule as the experts' (moe/expert_store.h): gemv::LoadLayout picks the 16-row group layout
// (Q4_K / Q5_K / Q6_K / Q8_0 / Q5_0 / Q5_1 / Q4_0 / Q4_1 with rows a multiple of 16, on AVX-512
// VNNI; Q2_K, Q3_K and Q4_0 on AVX2), the copy lives in node memory on huge pages, and the file's
// pages of each repacked tensor are released, so the repacked copy replaces the mapping instead of
// doubling memory.
//
// Why: these matrices are ~1/4 of the bytes a decode step reads on ds-v2-lite (output head
// 172 MB Q6_K, attention 177 MB, dense FFN 49 MB of 1615 MB per token) and their file-layout
// GEMVs read ~15% slower than the group layouts (bench_gemv cold, one thread, 2048 x 7168:
// q4_K 13.8 GB/s vs q4_K_r16 16.4; q6_K 13.2 vs q6_K_r16 14.9). Measured end to end in
// docs/PERFORMANCE.md.
//
// Not repacked: token_embd (its rows are looked up one at a time), an output head that is
// token_embd (tied embeddings), the legacy attn_kv_b (its k part runs the transposed product on
// the reference path), norms and the f32 router.
#pragma once

#include <cstdint>
#include <vector>

#include "core/base/status.h"
#include "core/model/model_weights.h"
#include "cpu_kernels/gemv/gemv.h"
#include "core/base/executor.h"
#include "numa/node_memory.h"

namespace moesplit::engine {

struct DenseRepack {
  ModelWeights weights;         // the model's views, the repacked ones pointing into `buffer`
  numa::NodeBuffer buffer;      // [bytes] the repacked tensors back to back, 64-byte aligned
  int64_t tensors = 0;          // tensors repacked
  uint64_t bytes = 0;           // their bytes as repacked
  std::vector<GgmlType> types;  // the layouts used, in order of first use
};

// Repacks every dense matrix of `w` whose LoadLayout for `kernels` differs from its file type
// into memory on `node` (first touch by `pool`'s workers, which also do the repacking), and
// releases the file pages of each. Nothing to repack (another tier, no such types): `tensors`
// is 0 and `weights` is `w`. Errors: the allocation (ResourceExhausted naming the bytes).
StatusOr<DenseRepack> RepackDenseWeights(const ModelWeights& w, const gemv::GemvKernels& kernels,
                                         int node, moesplit::Executor& pool);

}  // namespace moesplit::engine
