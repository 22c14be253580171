// The KV cache: one pool of fixed-size blocks shared by every sequence of an Engine (the
// PagedAttention idea of vLLM, for MLA's latent rows and for GQA's K/V rows). A sequence owns a
// block table; its logical position p lives in cache slot blocks[p / B] * B + p % B (B =
// block_size(), kBlockSize = 32 positions). Per layer and slot, what attention needs of a past
// token:
//  - deepseek2 (MLA): the latent form, one row of [kv_lora + qk_rope] values: the normalised
//    compressed kv (c, 512 for V3) followed by the roped shared key (k_pe, 64): 576 values per
//    token per layer (V3, 61 layers, f16: 70 KB per token, 288 MB at 4096). Both of
//    attention's products read these rows as they lie: scores = Q C^T in the dot form (or
//    GemvKernels::row_scores, in long-context decode), and o_lat = P C as weighted sums of the
//    rows (GemvKernels::row_mix). (Until 2026-12-03 the c
//    part was also kept transposed, [kv_lora][slots] per layer, for a dot-form P C: 1.9x the
//    memory, a write scattered over 512 pages per token and layer, and a slower product.)
//  - GQA archs (qwen3moe, llama): K rows [n_head_kv x head_dim_k] and V rows [n_head_kv x
//    head_dim_v] per token.
// Stored as f32 or f16 (llama.cpp's default); attention reads rows back as f32. The pool is
// zero pages (ZeroedPages): its memory becomes resident as positions are written (2 MiB at a
// time per layer where transparent huge pages are granted: the TLB reach long-context decode
// needs), so a large -c costs RAM only as far as it is used. A sequence
// whose blocks are consecutive (the usual case for a lone sequence: blocks are handed out lowest
// first) is read in place, exactly as an unpaged cache; a fragmented one (a shared prefix, a
// pool with holes) is gathered into a scratch buffer per layer: W floats per position copied,
// the bytes attention reads anyway. MLA's long-context decode (split over positions) reads
// chunk by chunk instead (RowRange): in place where a chunk's blocks are consecutive, else each
// task gathers its own chunk, in parallel, into an L2-sized buffer.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "core/base/status.h"
#include "core/base/zeroed_pages.h"
#include "core/model/model_config.h"

namespace moesplit::engine {

enum class KvCacheType { kF32, kF16 };

// Positions per block. 32 x 576 x 2 B = 36 KB per block and layer (MLA, f16): small enough that
// a shared prefix wastes little, large enough that a block table stays short (128 entries at 4K).
inline constexpr int64_t kKvBlockSize = 32;

class KvCache {
 public:
  enum Part { kK = 0, kV = 1 };  // MLA uses kK for the latent row

  // A pool of ceil(positions / block_size) blocks. CHECK-fails when the memory cannot be
  // reserved (tests); Create says so as a Status.
  KvCache(const ModelConfig& config, int64_t positions, KvCacheType type = KvCacheType::kF32,
          int64_t block_size = kKvBlockSize);
  // ResourceExhausted naming the positions, the bytes and the RAM when the pool cannot be
  // reserved (-c larger than the machine can ever back).
  static StatusOr<std::unique_ptr<KvCache>> Create(const ModelConfig& config, int64_t positions,
                                                   KvCacheType type = KvCacheType::kF32,
                                                   int64_t block_size = kKvBlockSize);

  int64_t block_size() const { return block_; }
  int64_t n_blocks() const { return n_blocks_; }
  int64_t slots() const { return slots_; }  // n_blocks x block_size
  KvCacheType type() const { return type_; }
  uint64_t element_bytes() const { return type_ == KvCacheType::kF16 ? 2 : 4; }
  uint64_t bytes() const;
  uint64_t resident_bytes() const;  // of bytes(), what has been touched (written) so far
  uint64_t bytes_per_block() const;
  int64_t width(Part part) const { return width_[part]; }  // values per row

  // The slot of logical position pos of a sequence with block table `blocks`.
  int64_t Slot(std::span<const int32_t> blocks, int64_t pos) const {
    return int64_t{blocks[static_cast<size_t>(pos / block_)]} * block_ + pos % block_;
  }

  // Stores row[width(part)] for layer il in cache slot `slot`.
  void Write(Part part, int64_t il, int64_t slot, const float* row);
  // Positions [0, n) of a sequence (block table `blocks`) for layer il as f32 [n x width(part)]:
  // a pointer into the pool (f32, consecutive blocks) or into *buffer (converted / gathered).
  // Valid until the next Write or buffer change.
  const float* Rows(Part part, int64_t il, std::span<const int32_t> blocks, int64_t n,
                    std::vector<float>* buffer) const;
  // Positions [p0, p0 + n) the same way: in place when f32 and their blocks are consecutive.
  // (MLA's split decode: each task gathers only its chunk, in parallel, into its own buffer.)
  const float* RowRange(Part part, int64_t il, std::span<const int32_t> blocks, int64_t p0,
                        int64_t n, std::vector<float>* buffer) const;
  // Copies block src's rows (every layer and part) into block dst: copy-on-write of a shared
  // block before a sequence writes into it.
  void CopyBlock(int32_t src, int32_t dst);

 private:
  struct Unallocated {};
  KvCache(const ModelConfig& config, int64_t positions, KvCacheType type, int64_t block_size,
          Unallocated);
  Status Allocate();
  // Whether the blocks holding positions [p0, p0 + n) are consecutive in the table.
  bool Contiguous(std::span<const int32_t> blocks, int64_t p0, int64_t n) const;
  size_t Index(Part part, int64_t il, int64_t slot) const {
    return static_cast<size_t>((il * slots_ + slot) * width_[part]);
  }
  int64_t block_;
  int64_t n_blocks_;
  int64_t slots_;
  int64_t n_layer_;
  KvCacheType type_;
  int64_t width_[2];              // values per row: [K or latent, V (0 for MLA)]
  ZeroedArray<float> f32_[2];     // [n_layer][slots][width] when type_ == kF32
  ZeroedArray<uint16_t> f16_[2];  // the same in IEEE half when type_ == kF16
};

}  // namespace moesplit::engine
