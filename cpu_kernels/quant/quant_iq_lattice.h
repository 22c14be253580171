// The search structures behind the lattice quantizers (IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS, IQ3_S,
// IQ1_S, IQ1_M): for every group of n integer levels (n = 8 for IQ2 / IQ1, 4 for IQ3), either
// the grid entry that holds exactly those levels or, when no entry does, the list of nearest
// entries to try. llama.cpp builds the same map and lists in iq2xs_init_impl / iq3xs_init_impl
// (ggml-quants.c) into global arrays at ggml_quantize_init; here they are an immutable object
// built once, on first use, behind a function-local static (C++ guarantees that initialization
// is thread-safe), so the quantizers share no mutable state. Internal to quant/.
//
// Keys: a group of levels l_0..l_{n-1} is the key sum_j l_j << (b j), b = 2 bits for the
// three-level lattices (IQ2: magnitudes 8, 25, 43; IQ1: -1, 0, +1; the largest key, all 2s, is
// 0xAAAA = 43690) and b = 3 for IQ3's eight levels (4 x 3 = 12 bits).
#pragma once

#include <cstdint>
#include <vector>

namespace moesplit::quant::internal {

class IqLattice {
 public:
  // Levels l_j (0 .. n_levels - 1) of `entries` grid entries of `group` (8 or 4) bytes each,
  // at grid_bytes (entry e's value j at byte group * e + j: a little-endian uint64 / uint32
  // table as is), with byte_levels[0 .. n_levels) the byte values that stand for each level
  // (n_levels 3 or 8). `nwant`: an off-grid key lists every entry at its nwant smallest distinct
  // squared distances (ggml: 2 for IQ2_XXS, IQ2_XS and IQ3_XXS, 1 for IQ2_S, 3 for IQ3_S and
  // IQ1). CHECKs that every byte is one of the levels.
  IqLattice(const uint8_t* grid_bytes, int entries, int group, const uint8_t* byte_levels,
            int n_levels, int nwant);

  // The entry whose levels are exactly the key's, or -1.
  int Exact(uint16_t key) const;
  // The candidates for an off-grid key (Exact(key) < 0), nearest first, ties by entry index
  // (ggml sorts (distance, index) pairs). CHECKs the key has only valid levels and is off-grid.
  const uint16_t* Neighbours(uint16_t key, int* count) const;
  // The same candidates' levels, transposed for a search over all of them at once: value j of
  // candidate c is at [j * count + c] (count as returned by Neighbours; at most kMaxNeighbours).
  const uint8_t* NeighbourLevels(uint16_t key) const;
  static constexpr int kMaxNeighbours = 1024;  // the largest list here is asserted at build
  // Among the neighbours of the off-grid `key`, the entry of least
  // sum_j w[j] (scale * level_values[l_j] - x[j])^2, first on ties (ggml's neighbour search of
  // IQ2, IQ3 and IQ1). x, w: [group]; level_values: [n_levels], the reconstruction point of each
  // level (IQ2: 1, 3, 5; IQ3: 1, 3, .., 15; IQ1: its shifted points). The candidates are scored
  // together, value by value (the loop over candidates vectorizes), but each candidate's sum
  // adds its terms in ggml's order from 0, so the sums and the choice are ggml's. CHECKs that
  // some distance is finite (ggml falls back to a full-grid search there, reachable only with
  // non-finite input).
  int NearestNeighbour(uint16_t key, const float* x, const float* w, float scale,
                       const float* level_values) const;
  // Level j of entry e.
  int Level(int e, int j) const { return levels_[group_ * e + j]; }
  // The key of n = group levels L.
  uint16_t Key(const int8_t* L) const;
  // The entry of levels L that a search left on the grid (CHECKed).
  int Entry(const int8_t* L) const;
  int entries() const { return entries_; }
  int group() const { return group_; }

 private:
  int entries_;
  int group_;                    // values per entry (8 or 4)
  int key_bits_;                 // bits per level in a key (2 or 3)
  std::vector<uint8_t> levels_;  // [entries * group] level of value j of entry e at group e + j
  // [1 << (group * key_bits)]: >= 0 the entry of an on-grid key; for an off-grid key of valid
  // levels, -(offset + 1) with neighbours_[offset] = count and the entries after it;
  // kUnreachable for keys with a digit past the last level (no quantizer forms them: levels
  // are clamped).
  std::vector<int32_t> map_;
  std::vector<uint16_t> neighbours_;  // concatenated lists: count, then `count` entries
  // [group * sum of counts]: per off-grid key, its candidates' levels as [group][count].
  std::vector<uint8_t> neighbour_levels_;
  std::vector<int32_t> level_start_;  // [keys]: start of the key's block in neighbour_levels_
  static constexpr int32_t kUnreachable = INT32_MIN;
};

// Helpers of the IQ2 / IQ3 quantizers' searches (quant_iq2.cc, quant_iq23.cc), in ggml's
// arithmetic order:
// Levels round((id x - 1) / 2) clamped to 0 .. kmax - 1 of the group's values x, snapped to the
// lattice at `scale` (the exact entry's levels, or the nearest neighbour's by sum waux (scale
// (2 l + 1) - x)^2). Returns whether the rounded levels were on the grid.
bool SnapLevels(const IqLattice& lat, int kmax, const float* x, const float* waux, float id,
                float scale, int8_t* L);
// sum w x q and sum w q^2 with q = 2 L + 1 over n values.
void OddSums(int n, const float* x, const float* w, const int8_t* L, float* sumqx, float* sumq2);
// Magnitudes of the 8 values xb in xval and their sign bits (bit i: value i negative). With
// `parity` (7 stored bits, the 8th implied by an even count) an odd count of negatives flips the
// least-w x^2 value: it stays negative in xval, its bit is cleared, and the byte is masked to 7
// bits.
uint8_t GroupSigns(const float* xb, const float* w, bool parity, float* xval);

// The lattices, each built on first use: IQ2_XXS (kIq2XxsGrid, 256 entries, nwant 2, ~10 ms),
// IQ2_XS (512, nwant 2), IQ2_S (1024, nwant 1), IQ3_XXS (kIq3XxsGrid, 256 groups of 4, nwant 2),
// IQ3_S (512, nwant 3) and the IQ1_S / IQ1_M one (kIq1SGrid, 2048 entries, nwant 3, ~0.3 s).
const IqLattice& Iq2XxsLattice();
const IqLattice& Iq2XsLattice();
const IqLattice& Iq2SLattice();
const IqLattice& Iq3XxsLattice();
const IqLattice& Iq3SLattice();
const IqLattice& Iq1Lattice();

}  // namespace moesplit::quant::internal
