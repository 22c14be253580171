#include "core/synth/model_writer.h"

#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <thread>
#include <vector>

#include "core/gguf/gguf_writer.h"
#include "cpu_kernels/quant/quant.h"

namespace moesplit::synth {
namespace {

constexpr int64_t kChunkValues = 1 << 20;              // ~1 M values per chunk (4 MB f32)
constexpr uint64_t kProgressThreshold = 256ull << 20;  // 256 MB

// SplitMix64 finalizer: decorrelates the (seed, tensor, chunk) triple into one PRNG seed.
uint64_t Mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

int64_t RowsPerChunk(const TensorSpec& t) { return std::max<int64_t>(1, kChunkValues / t.ne[0]); }

// One chunk's quantized bytes.
struct Chunk {
  std::vector<float> values;
  std::vector<uint8_t> bytes;
};

void MakeChunk(const TensorSpec& t, uint64_t seed, uint64_t index, uint64_t chunk, Chunk* c) {
  const int64_t rows_per = RowsPerChunk(t);
  const int64_t rows = std::min(rows_per, t.NumRows() - static_cast<int64_t>(chunk) * rows_per);
  const int64_t n = rows * t.ne[0];
  const int64_t row_bytes = RowBytes(t.type, t.ne[0]);
  c->values.resize(n);
  c->bytes.resize(rows * row_bytes);
  FillChunk(t, seed, index, chunk, c->values.data(), n);
  for (int64_t r = 0; r < rows; ++r) {
    quant::QuantizeRow(t.type, c->values.data() + r * t.ne[0], c->bytes.data() + r * row_bytes,
                       t.ne[0]);
  }
}

class Progress {
 public:
  Progress(uint64_t total, bool enabled)
      : total_(total), enabled_(enabled && total > kProgressThreshold) {}
  void Update(uint64_t done) {
    if (!enabled_) return;
    const double now = Seconds();
    if (now - last_ < 1.0 && done < total_) return;
    last_ = now;
    std::fprintf(stderr, "\r  %5.1f%%  %.2f / %.2f GB  %.0f MB/s   ", 100.0 * done / total_,
                 done / 1e9, total_ / 1e9, now > 0 ? done / 1e6 / now : 0.0);
    if (done >= total_) std::fprintf(stderr, "\n");
    std::fflush(stderr);
  }
  double Seconds() const {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  }

 private:
  uint64_t total_;
  bool enabled_;
  double last_ = 0.0;
  std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
};

// Generates and writes tensor `index`, `threads` chunks at a time.
Status WriteTensor(const TensorSpec& t, uint64_t seed, uint64_t index, int threads,
                   gguf::GgufWriter* w, uint64_t* done, Progress* progress) {
  const int64_t n_chunks = (t.NumRows() + RowsPerChunk(t) - 1) / RowsPerChunk(t);
  std::vector<Chunk> batch(std::min<int64_t>(threads, n_chunks));
  for (int64_t first = 0; first < n_chunks; first += static_cast<int64_t>(batch.size())) {
    const int64_t n = std::min<int64_t>(batch.size(), n_chunks - first);
    if (n == 1) {
      MakeChunk(t, seed, index, first, &batch[0]);
    } else {
      std::vector<std::thread> pool;
      for (int64_t k = 0; k < n; ++k) {
        pool.emplace_back(MakeChunk, std::cref(t), seed, index, first + k, &batch[k]);
      }
      for (std::thread& th : pool) th.join();
    }
    for (int64_t k = 0; k < n; ++k) {
      MOESPLIT_RETURN_IF_ERROR(w->WriteTensorData(batch[k].bytes.data(), batch[k].bytes.size()));
      *done += batch[k].bytes.size();
    }
    progress->Update(*done);
  }
  return Status::Ok();
}

}  // namespace

void FillChunk(const TensorSpec& t, uint64_t seed, uint64_t index, uint64_t chunk, float* out,
               int64_t n) {
  if (t.init == WeightInit::kOnes) {
    std::fill(out, out + n, 1.0f);
    return;
  }
  const float sigma = t.init == WeightInit::kBias ? 0.01f : 0.02f;
  std::mt19937_64 rng(Mix(Mix(Mix(seed) ^ index) ^ chunk));
  // Box-Muller on 53-bit uniforms: portable (std::normal_distribution differs between libraries).
  constexpr double kTwoPi = 6.283185307179586;
  for (int64_t i = 0; i < n; i += 2) {
    const double u1 = ((rng() >> 11) + 1.0) * 0x1.0p-53;  // (0, 1]
    const double u2 = (rng() >> 11) * 0x1.0p-53;          // [0, 1)
    const double r = std::sqrt(-2.0 * std::log(u1)) * sigma;
    out[i] = static_cast<float>(r * std::cos(kTwoPi * u2));
    if (i + 1 < n) out[i + 1] = static_cast<float>(r * std::sin(kTwoPi * u2));
  }
}

StatusOr<WriteStats> WriteModel(const ModelSpec& spec, const WriteOptions& options) {
  for (const TensorSpec& t : spec.tensors) {
    if (!quant::CanQuantize(t.type)) {
      return UnimplementedError("cannot produce tensor type ", TypeName(t.type), " for ", t.name);
    }
  }
  int threads = options.threads;
  if (threads <= 0) threads = std::clamp<int>(std::thread::hardware_concurrency(), 1, 64);

  // Written under a temporary name and renamed at the end, so an interrupted or failed write
  // never leaves a truncated file under the requested name.
  const std::string partial = options.path + ".partial";
  WriteStats stats;
  stats.tensor_bytes = TotalTensorBytes(spec);
  Progress progress(stats.tensor_bytes, options.show_progress);
  Status s = [&]() -> Status {
    gguf::GgufWriter w(partial);
    for (const gguf::KeyValue& kv : spec.metadata) w.AddKeyValue(kv.key, kv.value);
    for (const TensorSpec& t : spec.tensors) w.AddTensor(t.name, t.type, t.ne);
    MOESPLIT_RETURN_IF_ERROR(w.Begin());
    uint64_t done = 0;
    for (size_t i = 0; i < spec.tensors.size(); ++i) {
      MOESPLIT_RETURN_IF_ERROR(
          WriteTensor(spec.tensors[i], options.seed, i, threads, &w, &done, &progress));
    }
    return w.Finish();
  }();
  if (s.ok() && std::rename(partial.c_str(), options.path.c_str()) != 0) {
    s = IoError(options.path, ": cannot rename ", partial, " to it: ", std::strerror(errno));
  }
  if (!s.ok()) {
    std::remove(partial.c_str());
    return s;
  }

  stats.n_tensors = spec.tensors.size();
  stats.seconds = progress.Seconds();
  struct stat st {};
  if (::stat(options.path.c_str(), &st) == 0) stats.file_bytes = static_cast<uint64_t>(st.st_size);
  return stats;
}

}  // namespace moesplit::synth
