// Grid-neighbour maps of the lattice quantizers (quant_iq_lattice.h).
//
// The distance between a key and an entry is sum_j (l_j - e_j)^2 over the 8 levels. ggml
// measures it between the odd numbers 2l + 1 (i.e. 4x this) and sorts all entries by (distance,
// index); an off-grid key then keeps every entry up to and including its nwant-th distinct
// distance. The same order comes out of bucketing by distance (at most 8 * 2^2 = 32 here) and
// walking the entries in index order inside each bucket, without the sort.
#include "cpu_kernels/quant/quant_iq_lattice.h"

#include <cfloat>

#include <array>

#include "core/base/status.h"
#include "cpu_kernels/quant/iq_grids.h"

namespace moesplit::quant::internal {
namespace {

constexpr int kMaxDistance = 8 * 2 * 2;  // eight levels each off by at most 2

// The key's 8 levels, or false if one of them is 3.
bool KeyLevels(int key, std::array<int, 8>* l) {
  for (int j = 0; j < 8; ++j) {
    (*l)[j] = (key >> (2 * j)) & 3;
    if ((*l)[j] == 3) return false;
  }
  return true;
}

}  // namespace

IqLattice::IqLattice(const uint64_t* grid, int entries, const uint8_t byte_levels[3], int nwant)
    : entries_(entries),
      levels_(static_cast<size_t>(entries) * 8),
      map_(kKeys, -1),
      level_start_(kKeys, -1) {
  MOESPLIT_CHECK(nwant >= 1 && entries > 0 && entries <= 65536);
  for (int e = 0; e < entries; ++e) {
    int key = 0;
    for (int j = 0; j < 8; ++j) {
      const uint8_t b = static_cast<uint8_t>(grid[e] >> (8 * j));
      int l = 0;
      while (l < 3 && byte_levels[l] != b) ++l;
      MOESPLIT_CHECK(l < 3, "grid entry ", e, " byte ", j, " is not a lattice level");
      levels_[8 * e + j] = static_cast<uint8_t>(l);
      key |= l << (2 * j);
    }
    MOESPLIT_CHECK(map_[key] < 0, "two grid entries with the same levels");
    map_[key] = e;
  }
  std::vector<uint8_t> dist(entries);
  std::array<int, 8> l;
  for (int key = 0; key < kKeys; ++key) {
    if (map_[key] >= 0) continue;
    if (!KeyLevels(key, &l)) {
      map_[key] = kUnreachable;
      continue;
    }
    std::array<int, kMaxDistance + 1> count{};
    for (int e = 0; e < entries; ++e) {
      int d2 = 0;
      for (int j = 0; j < 8; ++j) {
        const int diff = levels_[8 * e + j] - l[j];
        d2 += diff * diff;
      }
      dist[e] = static_cast<uint8_t>(d2);
      ++count[d2];
    }
    // The nwant-th smallest distance that occurs (or the largest, if fewer occur).
    int cutoff = 0, distinct = 0;
    for (int d = 0; d <= kMaxDistance && distinct < nwant; ++d) {
      if (count[d] > 0) {
        cutoff = d;
        ++distinct;
      }
    }
    const size_t offset = neighbours_.size();
    neighbours_.push_back(0);
    for (int d = 0; d <= cutoff; ++d) {
      if (count[d] == 0) continue;
      for (int e = 0; e < entries; ++e) {
        if (dist[e] == d) neighbours_.push_back(static_cast<uint16_t>(e));
      }
    }
    const int n_list = static_cast<int>(neighbours_.size() - offset - 1);
    MOESPLIT_CHECK(n_list <= kMaxNeighbours, "neighbour list of ", n_list, " entries");
    neighbours_[offset] = static_cast<uint16_t>(n_list);
    map_[key] = -static_cast<int32_t>(offset) - 1;
    level_start_[key] = static_cast<int32_t>(neighbour_levels_.size());
    for (int j = 0; j < 8; ++j) {
      for (int c = 0; c < n_list; ++c) {
        neighbour_levels_.push_back(levels_[8 * neighbours_[offset + 1 + c] + j]);
      }
    }
  }
}

int IqLattice::Exact(uint16_t key) const {
  MOESPLIT_CHECK(key < kKeys && map_[key] != kUnreachable, "lattice key ", key,
                 " has a level outside 0..2");
  return map_[key] >= 0 ? map_[key] : -1;
}

const uint16_t* IqLattice::Neighbours(uint16_t key, int* count) const {
  MOESPLIT_CHECK(key < kKeys && map_[key] != kUnreachable && map_[key] < 0, "lattice key ", key,
                 " is on the grid or has a level outside 0..2");
  const uint16_t* list = neighbours_.data() + (-map_[key] - 1);
  *count = list[0];
  return list + 1;
}

const uint8_t* IqLattice::NeighbourLevels(uint16_t key) const {
  MOESPLIT_CHECK(key < kKeys && level_start_[key] >= 0, "lattice key ", key,
                 " is on the grid or has a level outside 0..2");
  return neighbour_levels_.data() + level_start_[key];
}

const IqLattice& Iq2XxsLattice() {
  static constexpr uint8_t kBytes[3] = {8, 25, 43};
  static const IqLattice lattice(kIq2XxsGrid, kIq2XxsGridSize, kBytes, 2);
  return lattice;
}

const IqLattice& Iq1Lattice() {
  // int8 -1, 0, +1 as stored bytes.
  static constexpr uint8_t kBytes[3] = {0xFF, 0x00, 0x01};
  static const IqLattice lattice(kIq1SGrid, kIq1SGridSize, kBytes, 3);
  return lattice;
}

int IqLattice::NearestNeighbour(uint16_t key, const float* x, const float* w, float scale,
                                const float* level_values) const {
  int count = 0;
  const uint16_t* nb = Neighbours(key, &count);
  const uint8_t* lv = NeighbourLevels(key);  // [8][count]
  float d2[kMaxNeighbours];                  // [count] weighted squared distances
  for (int c = 0; c < count; ++c) d2[c] = 0;
  for (int i = 0; i < 8; ++i) {
    const uint8_t* li = lv + i * count;
    for (int c = 0; c < count; ++c) {
      const float diff = scale * level_values[li[c]] - x[i];
      d2[c] += w[i] * diff * diff;
    }
  }
  int e = -1;
  float best = FLT_MAX;
  for (int c = 0; c < count; ++c) {
    if (d2[c] < best) {
      best = d2[c];
      e = nb[c];
    }
  }
  MOESPLIT_CHECK(e >= 0, "no finite grid distance (non-finite input?)");
  return e;
}

}  // namespace moesplit::quant::internal
