// Grid-neighbour maps of the lattice quantizers (quant_iq_lattice.h).
//
// The distance between a key and an entry is sum_j (l_j - e_j)^2 over the group's levels. ggml
// measures it between the odd numbers 2l + 1 (i.e. 4x this) and sorts all entries by (distance,
// index); an off-grid key then keeps every entry up to and including its nwant-th distinct
// distance. The same order comes out of bucketing by distance and walking the entries in index
// order inside each bucket, without the sort.
#include "cpu_kernels/quant/quant_iq_lattice.h"

#include <algorithm>
#include <cfloat>

#include "core/base/status.h"
#include "cpu_kernels/quant/iq_grids.h"
#include "cpu_kernels/quant/quant_math.h"

namespace moesplit::quant::internal {

IqLattice::IqLattice(const uint8_t* grid_bytes, int entries, int group, const uint8_t* byte_levels,
                     int n_levels, int nwant)
    : entries_(entries),
      group_(group),
      key_bits_(n_levels <= 4 ? 2 : 3),
      levels_(static_cast<size_t>(entries) * group) {
  MOESPLIT_CHECK(nwant >= 1 && entries > 0 && entries <= 65536 && (group == 8 || group == 4) &&
                 (n_levels == 3 || n_levels == 8) && group * key_bits_ <= 16);
  const int keys = 1 << (group * key_bits_);
  map_.assign(keys, -1);
  level_start_.assign(keys, -1);
  for (int e = 0; e < entries; ++e) {
    int key = 0;
    for (int j = 0; j < group; ++j) {
      const uint8_t b = grid_bytes[static_cast<size_t>(group) * e + j];
      int l = 0;
      while (l < n_levels && byte_levels[l] != b) ++l;
      MOESPLIT_CHECK(l < n_levels, "grid entry ", e, " byte ", j, " is not a lattice level");
      levels_[group * e + j] = static_cast<uint8_t>(l);
      key |= l << (key_bits_ * j);
    }
    MOESPLIT_CHECK(map_[key] < 0, "two grid entries with the same levels");
    map_[key] = e;
  }
  // Squared level distances go up to group * (n_levels - 1)^2: 8 * 4 = 32 (IQ2, IQ1), 4 * 49 =
  // 196 (IQ3), so a byte holds one.
  const int max_distance = group * (n_levels - 1) * (n_levels - 1);
  std::vector<uint8_t> dist(entries);
  std::vector<int> count(max_distance + 1);
  int l[8];
  for (int key = 0; key < keys; ++key) {
    if (map_[key] >= 0) continue;
    bool valid = true;
    for (int j = 0; j < group; ++j) {
      l[j] = (key >> (key_bits_ * j)) & ((1 << key_bits_) - 1);
      valid &= l[j] < n_levels;
    }
    if (!valid) {
      map_[key] = kUnreachable;
      continue;
    }
    std::fill(count.begin(), count.end(), 0);
    for (int e = 0; e < entries; ++e) {
      int d2 = 0;
      for (int j = 0; j < group; ++j) {
        const int diff = levels_[group * e + j] - l[j];
        d2 += diff * diff;
      }
      dist[e] = static_cast<uint8_t>(d2);
      ++count[d2];
    }
    // The nwant-th smallest distance that occurs (or the largest, if fewer occur).
    int cutoff = 0, distinct = 0;
    for (int d = 0; d <= max_distance && distinct < nwant; ++d) {
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
    for (int j = 0; j < group; ++j) {
      for (int c = 0; c < n_list; ++c) {
        neighbour_levels_.push_back(levels_[group * neighbours_[offset + 1 + c] + j]);
      }
    }
  }
}

int IqLattice::Entry(const int8_t* L) const {
  const int e = Exact(Key(L));
  MOESPLIT_CHECK(e >= 0, "lattice levels off the grid after the snap");
  return e;
}

uint16_t IqLattice::Key(const int8_t* L) const {
  int key = 0;
  for (int j = 0; j < group_; ++j) key |= L[j] << (key_bits_ * j);
  return static_cast<uint16_t>(key);
}

int IqLattice::Exact(uint16_t key) const {
  MOESPLIT_CHECK(key < map_.size() && map_[key] != kUnreachable, "lattice key ", key,
                 " has a level past the last");
  return map_[key] >= 0 ? map_[key] : -1;
}

const uint16_t* IqLattice::Neighbours(uint16_t key, int* count) const {
  MOESPLIT_CHECK(key < map_.size() && map_[key] != kUnreachable && map_[key] < 0, "lattice key ",
                 key, " is on the grid or has a level past the last");
  const uint16_t* list = neighbours_.data() + (-map_[key] - 1);
  *count = list[0];
  return list + 1;
}

const uint8_t* IqLattice::NeighbourLevels(uint16_t key) const {
  MOESPLIT_CHECK(key < level_start_.size() && level_start_[key] >= 0, "lattice key ", key,
                 " is on the grid or has a level past the last");
  return neighbour_levels_.data() + level_start_[key];
}

namespace {

constexpr uint8_t kIq2Bytes[3] = {8, 25, 43};
constexpr uint8_t kIq3XxsBytes[8] = {4, 12, 20, 28, 36, 44, 52, 62};
constexpr uint8_t kIq3SBytes[8] = {1, 3, 5, 7, 9, 11, 13, 15};

const uint8_t* Bytes(const void* grid) { return static_cast<const uint8_t*>(grid); }

}  // namespace

const IqLattice& Iq2XxsLattice() {
  static const IqLattice lattice(Bytes(kIq2XxsGrid), kIq2XxsGridSize, 8, kIq2Bytes, 3, 2);
  return lattice;
}

const IqLattice& Iq2XsLattice() {
  static const IqLattice lattice(Bytes(kIq2XsGrid), kIq2XsGridSize, 8, kIq2Bytes, 3, 2);
  return lattice;
}

const IqLattice& Iq2SLattice() {
  static const IqLattice lattice(Bytes(kIq2SGrid), kIq2SGridSize, 8, kIq2Bytes, 3, 1);
  return lattice;
}

const IqLattice& Iq3XxsLattice() {
  static const IqLattice lattice(Bytes(kIq3XxsGrid), kIq3XxsGridSize, 4, kIq3XxsBytes, 8, 2);
  return lattice;
}

const IqLattice& Iq3SLattice() {
  static const IqLattice lattice(Bytes(kIq3SGrid), kIq3SGridSize, 4, kIq3SBytes, 8, 3);
  return lattice;
}

const IqLattice& Iq1Lattice() {
  // int8 -1, 0, +1 as stored bytes.
  static constexpr uint8_t kBytes[3] = {0xFF, 0x00, 0x01};
  static const IqLattice lattice(Bytes(kIq1SGrid), kIq1SGridSize, 8, kBytes, 3, 3);
  return lattice;
}

bool SnapLevels(const IqLattice& lat, int kmax, const float* x, const float* waux, float id,
                float scale, int8_t* L) {
  static constexpr float kOdd[8] = {1, 3, 5, 7, 9, 11, 13, 15};  // 2 l + 1
  const int g = lat.group();
  for (int i = 0; i < g; ++i) {
    const int l = NearestInt(0.5f * (id * x[i] - 1));
    L[i] = static_cast<int8_t>(l < 0 ? 0 : (l > kmax - 1 ? kmax - 1 : l));
  }
  const uint16_t key = lat.Key(L);
  if (lat.Exact(key) >= 0) return true;
  const int e = lat.NearestNeighbour(key, x, waux, scale, kOdd);
  for (int i = 0; i < g; ++i) L[i] = static_cast<int8_t>(lat.Level(e, i));
  return false;
}

void OddSums(int n, const float* x, const float* w, const int8_t* L, float* sumqx, float* sumq2) {
  float qx = 0, q2 = 0;
  for (int i = 0; i < n; ++i) {
    const float q = static_cast<float>(2 * L[i] + 1);
    qx += w[i] * x[i] * q;
    q2 += w[i] * q * q;
  }
  *sumqx = qx;
  *sumq2 = q2;
}

uint8_t GroupSigns(const float* xb, const float* w, bool parity, float* xval) {
  int nflip = 0;
  uint8_t s = 0;
  for (int i = 0; i < 8; ++i) {
    xval[i] = xb[i] >= 0 ? xb[i] : -xb[i];
    if (!(xb[i] >= 0)) {
      ++nflip;
      s |= static_cast<uint8_t>(1 << i);
    }
  }
  if (!parity) return s;
  if (nflip % 2) {
    int imin = 0;
    float min = w[0] * xb[0] * xb[0];
    for (int i = 1; i < 8; ++i) {
      const float ax = w[i] * xb[i] * xb[i];
      if (ax < min) {
        min = ax;
        imin = i;
      }
    }
    xval[imin] = -xval[imin];
    s ^= static_cast<uint8_t>(1 << imin);
  }
  return s & 127;
}

int IqLattice::NearestNeighbour(uint16_t key, const float* x, const float* w, float scale,
                                const float* level_values) const {
  int count = 0;
  const uint16_t* nb = Neighbours(key, &count);
  const uint8_t* lv = NeighbourLevels(key);  // [group][count]
  float d2[kMaxNeighbours];                  // [count] weighted squared distances
  for (int c = 0; c < count; ++c) d2[c] = 0;
  for (int i = 0; i < group_; ++i) {
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
