// The AMX tile configuration that LDTILECFG loads (palette 1: 8 tiles of up to 16 rows x 64
// bytes), shared by the AMX tier's kernel files (gemv_amx.cc, gemv_float_amx.cc). A plain
// struct: no AMX instruction, so any translation unit may include it.
#pragma once

#include <cstdint>

namespace moesplit::gemv::internal {

struct alignas(64) TileConfig {
  uint8_t palette = 1;
  uint8_t start_row = 0;
  uint8_t reserved[14] = {};
  uint16_t colsb[16] = {};  // [tile] bytes per row
  uint8_t rows[16] = {};    // [tile] rows
};
static_assert(sizeof(TileConfig) == 64, "LDTILECFG reads 64 bytes");

}  // namespace moesplit::gemv::internal
