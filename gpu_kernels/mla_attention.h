// DeepSeek MLA attention on the GPU, in the absorbed form of core/engine/forward_mla.cc: the
// latent cache holds per position [c (512), k_pe (64)] (576 values, f16 or bf16); the queries
// arrive already absorbed (q_abs = W_kb[h]^T q_nope, 512) and roped (q_pe, 64). Per query token
// t (position pos0 + t) and head h:
//   s_p   = scale * (q_abs . c_p + q_pe . k_pe_p)          for positions p <= pos0 + t (causal)
//   out   = sum_p softmax(s)_p c_p                          (512: o_lat; W_vb[h] is applied after)
// scale is ModelConfig::kq_scale (YaRN models: mscale^2 / sqrt(qk_nope + qk_rope), as the CPU).
// Plain C++ interface (no CUDA headers); all pointers are device memory.
//
//   MOESPLIT_RETURN_IF_ERROR(AppendLatent(rows, n_tok, pos0, cache, type, n_ctx, stream));
//   MlaAttentionParams p{.n_tok = n_tok, .n_head = 128, .n_kv = n_ctx, .pos0 = pos0, ...};
//   MOESPLIT_ASSIGN_OR_RETURN(size_t ws_bytes, MlaAttentionWorkspaceBytes(p));
//   MOESPLIT_RETURN_IF_ERROR(MlaAttention(p, q, cache, out, ws, ws_bytes, stream));
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/base/status.h"
#include "gpu_kernels/device_buffer.h"

namespace moesplit::gpu {

enum class LatentCacheType { kF16, kBF16 };

// Writes n_tok rows [n_tok x 576] f32 into cache [n_ctx x 576] (type; 2 bytes a value) at
// positions p0 .. p0 + n_tok - 1, rounding to nearest even. Errors before any CUDA call:
// OutOfRange when p0 + n_tok > n_ctx or p0 < 0; InvalidArgument for n_tok < 1, a null pointer,
// rows not 8-byte or cache not 4-byte aligned. Asynchronous on `stream`.
Status AppendLatent(const float* rows, int64_t n_tok, int64_t p0, void* cache, LatentCacheType type,
                    int64_t n_ctx, Stream stream);

struct MlaAttentionParams {
  int64_t n_tok = 0;   // query tokens, 1 .. 65535
  int64_t n_head = 0;  // heads, 1 .. 4096
  int64_t n_kv = 0;    // rows the cache holds (>= pos0 + n_tok)
  int64_t pos0 = 0;    // position of query token 0
  float scale = 0.0f;  // kq_scale, finite
  LatentCacheType cache_type = LatentCacheType::kF16;
  int64_t n_split = 0;  // 0: planned (mla_hd.h MlaPlanSplits); > 0: asked for (tests), <= 64
};

// Device workspace MlaAttention needs for these params (the partial results of position splits):
// 0 when the plan does not split. InvalidArgument / OutOfRange for params MlaAttention rejects.
StatusOr<size_t> MlaAttentionWorkspaceBytes(const MlaAttentionParams& p);

// q [n_tok x n_head x 576] f32 (absorbed latent 512, then roped q_pe 64), cache [n_kv x 576] of
// p.cache_type, out [n_tok x n_head x 512] f32. workspace: >= MlaAttentionWorkspaceBytes(p)
// bytes (may be null when that is 0). q, cache, out and workspace 16-byte aligned (cudaMalloc'd
// buffers and row offsets into them are). Every check happens before any CUDA call.
// Asynchronous on `stream`; q, cache and workspace must stay alive until it has run.
Status MlaAttention(const MlaAttentionParams& p, const float* q, const void* cache, float* out,
                    void* workspace, size_t workspace_bytes, Stream stream);

// One token decoding at position n_kv - 1 (attending to every cached position): MlaAttention
// with n_tok = 1, pos0 = n_kv - 1. q [n_head x 576], out [n_head x 512].
Status MlaAttentionDecode(const float* q, int64_t n_head, const void* cache,
                          LatentCacheType cache_type, int64_t n_kv, float scale, float* out,
                          void* workspace, size_t workspace_bytes, Stream stream);

}  // namespace moesplit::gpu
