// libFuzzer entry point: any byte string through ParseGguf must give a Status or a model whose
// every tensor byte range and metadata value can be used without faults.
#include <cstddef>
#include <cstdint>
#include <string>

#include "core/gguf/gguf_file.h"

namespace {

// Displays a value and, for arrays, every element (nested arrays included).
size_t TouchValue(const moesplit::gguf::Value& v) {
  size_t n = v.ToDisplayString().size();
  if (v.type == moesplit::gguf::ValueType::kArray) {
    auto a = v.AsArray();
    if (a.ok()) {
      for (const moesplit::gguf::Value& item : (*a)->items) n += TouchValue(item);
    }
  }
  return n;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto parsed = moesplit::gguf::ParseGguf(data, size, "fuzz.gguf");
  if (!parsed.ok()) {
    // Every error names the input.
    if (parsed.status().message().rfind("fuzz.gguf: ", 0) != 0) __builtin_trap();
    return 0;
  }
  volatile size_t sink = 0;
  for (const moesplit::gguf::TensorInfo& t : parsed->tensors) {
    if (t.nbytes == 0 || t.data < data || t.data + t.nbytes > data + size) __builtin_trap();
    sink = sink + t.data[0] + t.data[t.nbytes - 1];
  }
  for (const moesplit::gguf::KeyValue& kv : parsed->metadata) sink = sink + TouchValue(kv.value);
  return 0;
}
