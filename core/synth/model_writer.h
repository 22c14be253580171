// Streams a ModelSpec to a GGUF file with seeded random weights: each tensor is generated and
// quantized in chunks of rows (~1 M values), several chunks at a time on worker threads, and
// written in order, so memory stays at a few chunks even for a 400 GB DeepSeek-V3.
// Same spec + same seed -> byte-identical file, whatever the thread count: every chunk has its
// own PRNG stream seeded from (seed, tensor index, chunk index).
#pragma once

#include <cstdint>
#include <string>

#include "core/base/status.h"
#include "core/synth/model_spec.h"

namespace moesplit::synth {

struct WriteOptions {
  std::string path;
  uint64_t seed = 1234;
  int threads = 0;            // 0 = all hardware threads (at most 64)
  bool show_progress = true;  // on stderr, only when the tensor data is > 256 MB
};

struct WriteStats {
  uint64_t n_tensors = 0;
  uint64_t tensor_bytes = 0;  // sum of tensor sizes (without alignment padding)
  uint64_t file_bytes = 0;    // size of the written file
  double seconds = 0.0;
};

// Errors: a type the quantizer cannot produce (Unimplemented), the file cannot be written (IO).
StatusOr<WriteStats> WriteModel(const ModelSpec& spec, const WriteOptions& options);

// The values of chunk `chunk` (rows [chunk*rows_per_chunk, ...)) of tensor `index`, exposed for
// tests: normal(0, 0.02) / ones / normal(0, 0.01) per the tensor's WeightInit.
void FillChunk(const TensorSpec& t, uint64_t seed, uint64_t index, uint64_t chunk, float* out,
               int64_t n);

}  // namespace moesplit::synth
