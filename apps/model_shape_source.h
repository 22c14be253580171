// Where a ModelShape (numa/model_shape.h) comes from: a GGUF file on disk, or a make-model preset
// at any layer count — so `moesplit plan --preset ds-v3` answers "will R1 Q4_K_M fit, and how
// fast will it run?" before a 400 GB download. Both go through one function over (name, shape,
// type) of every tensor, so a file written from a preset and the preset give the same shape.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/base/status.h"
#include "core/model/device_map.h"
#include "numa/model_shape.h"

namespace moesplit::app {

// Opens `path` with the GGUF reader (its errors come back unchanged) and classifies every
// tensor by name (core/model/tensor_role.h). Unsupported architectures -> the config's error.
// `tensors` (optional) receives every tensor's name and size, for the device map.
StatusOr<numa::ModelShape> ModelShapeFromGguf(const std::string& path,
                                              std::vector<TensorEntry>* tensors = nullptr);

// The preset's tensor table (core/synth BuildTensorTable: no vocabulary, no weights) at `layers`
// blocks (0 = the preset's full depth) and quant mix `quant` ("Q4_K_M", "Q8_0", "F16", "BF16").
// Unknown preset -> InvalidArgument listing the presets.
StatusOr<numa::ModelShape> ModelShapeFromPreset(const std::string& preset, int64_t layers = 0,
                                                const std::string& quant = "Q4_K_M",
                                                std::vector<TensorEntry>* tensors = nullptr);

}  // namespace moesplit::app
