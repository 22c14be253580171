// The search structures behind the lattice quantizers (IQ2_XXS, IQ1_S, IQ1_M): for every
// group of 8 integer levels, either the grid entry that holds exactly those levels or, when no
// entry does, the list of nearest entries to try. llama.cpp builds the same map and lists in
// iq2xs_init_impl (ggml-quants.c) into global arrays at ggml_quantize_init; here they are an
// immutable object built once, on first use, behind a function-local static (C++ guarantees
// that initialization is thread-safe), so the quantizers share no mutable state. Internal to
// quant/.
//
// Keys: a group of 8 levels l_0..l_7, each in 0..2 (IQ2: magnitudes 8, 25, 43; IQ1: -1, 0, +1),
// is the key sum_j l_j << 2j (16 bits; the largest, all 2s, is 0xAAAA = 43690).
#pragma once

#include <cstdint>
#include <vector>

namespace moesplit::quant::internal {

class IqLattice {
 public:
  // Levels l_j (0..2) of `entries` grid entries given as 8 signed/unsigned bytes each, with
  // `byte_levels[0..2]` the byte values that stand for levels 0, 1, 2. `nwant`: an off-grid key
  // lists every entry at its nwant smallest distinct squared distances (ggml: 2 for IQ2_XXS,
  // 3 for IQ1_S / IQ1_M). CHECKs that every byte is one of the three.
  IqLattice(const uint64_t* grid, int entries, const uint8_t byte_levels[3], int nwant);

  static constexpr int kKeys = 43692;  // ggml's kmap_size: keys 0 .. 0xAAAA (+1)

  // The entry whose levels are exactly the key's, or -1.
  int Exact(uint16_t key) const;
  // The candidates for an off-grid key (Exact(key) < 0), nearest first, ties by entry index
  // (ggml sorts (distance, index) pairs). CHECKs the key has only levels 0..2 and is off-grid.
  const uint16_t* Neighbours(uint16_t key, int* count) const;
  // The same candidates' levels, transposed for a search over all of them at once: value j of
  // candidate c is at [j * count + c] (count as returned by Neighbours; at most kMaxNeighbours).
  const uint8_t* NeighbourLevels(uint16_t key) const;
  static constexpr int kMaxNeighbours = 256;  // the grids here give at most 150 (IQ2) / 205 (IQ1)
  // Among the neighbours of the off-grid `key`, the entry of least
  // sum_j w[j] (scale * level_values[l_j] - x[j])^2, first on ties (ggml's neighbour search of
  // IQ2 and IQ1). x, w: [8]; level_values: [3], the reconstruction point of each level (IQ2:
  // 1, 3, 5; IQ1: its shifted points). The candidates are scored together, value by value (the
  // loop over candidates vectorizes), but each candidate's sum adds its 8 terms in ggml's order
  // from 0, so the sums and the choice are ggml's. CHECKs that some distance is finite (ggml
  // falls back to a full-grid search there, reachable only with non-finite input).
  int NearestNeighbour(uint16_t key, const float* x, const float* w, float scale,
                       const float* level_values) const;
  // Level j (0..2) of entry e.
  int Level(int e, int j) const { return levels_[8 * e + j]; }
  int entries() const { return entries_; }

 private:
  int entries_;
  std::vector<uint8_t> levels_;  // [entries * 8] level of value j of entry e at 8e + j
  // [kKeys]: >= 0 the entry of an on-grid key; for an off-grid key of levels 0..2,
  // -(offset + 1) with neighbours_[offset] = count and the entries after it; kUnreachable for
  // keys with a level-3 digit (no quantizer forms them: levels are clamped to 0..2).
  std::vector<int32_t> map_;
  std::vector<uint16_t> neighbours_;  // concatenated lists: count, then `count` entries
  // [8 * sum of counts]: per off-grid key, its candidates' levels as [8][count].
  std::vector<uint8_t> neighbour_levels_;
  std::vector<int32_t> level_start_;  // [kKeys]: start of the key's block in neighbour_levels_
  static constexpr int32_t kUnreachable = INT32_MIN;
};

// The IQ2_XXS lattice (kIq2XxsGrid, 256 entries, nwant 2) and the IQ1_S / IQ1_M one
// (kIq1SGrid, 2048 entries, nwant 3), each built on first use (~10 ms / ~0.3 s).
const IqLattice& Iq2XxsLattice();
const IqLattice& Iq1Lattice();

}  // namespace moesplit::quant::internal
