// GGUF metadata values: the 13 value types of the GGUF spec (v2/v3), arrays possibly nested.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "core/base/status.h"

namespace moesplit::gguf {

// enum gguf_type in the spec; the numbers are what the file stores.
enum class ValueType : uint32_t {
  kUint8 = 0,
  kInt8 = 1,
  kUint16 = 2,
  kInt16 = 3,
  kUint32 = 4,
  kInt32 = 5,
  kFloat32 = 6,
  kBool = 7,
  kString = 8,
  kArray = 9,
  kUint64 = 10,
  kInt64 = 11,
  kFloat64 = 12,
};
inline constexpr uint32_t kValueTypeCount = 13;

const char* ValueTypeName(ValueType t);  // "uint32", "string", "array", ...

struct Value;

// An array's elements all have `elem_type`; for nested arrays each element is itself an Array.
struct Array {
  ValueType elem_type = ValueType::kUint8;
  std::vector<Value> items;
};

// One metadata value. Integers are held widened (uint64 / int64), floats as double, and
// `type` remembers the exact on-disk type so the writer reproduces the file byte for byte.
struct Value {
  ValueType type = ValueType::kUint8;
  std::variant<uint64_t, int64_t, double, bool, std::string, std::shared_ptr<Array>> v;

  // Constructors for each on-disk type.
  static Value U8(uint8_t x) { return {ValueType::kUint8, uint64_t{x}}; }
  static Value I8(int8_t x) { return {ValueType::kInt8, int64_t{x}}; }
  static Value U16(uint16_t x) { return {ValueType::kUint16, uint64_t{x}}; }
  static Value I16(int16_t x) { return {ValueType::kInt16, int64_t{x}}; }
  static Value U32(uint32_t x) { return {ValueType::kUint32, uint64_t{x}}; }
  static Value I32(int32_t x) { return {ValueType::kInt32, int64_t{x}}; }
  static Value F32(float x) { return {ValueType::kFloat32, double{x}}; }
  static Value Bool(bool x) { return {ValueType::kBool, x}; }
  static Value Str(std::string s) { return {ValueType::kString, std::move(s)}; }
  static Value U64(uint64_t x) { return {ValueType::kUint64, x}; }
  static Value I64(int64_t x) { return {ValueType::kInt64, x}; }
  static Value F64(double x) { return {ValueType::kFloat64, x}; }
  static Value Arr(Array a) { return {ValueType::kArray, std::make_shared<Array>(std::move(a))}; }
  static Value StrArray(const std::vector<std::string>& xs);
  static Value F32Array(const std::vector<float>& xs);
  static Value I32Array(const std::vector<int32_t>& xs);

  bool is_integer() const;  // any of the 8 integer types
  bool is_float() const { return type == ValueType::kFloat32 || type == ValueType::kFloat64; }

  // Typed reads; an error names the actual type. AsUint rejects negative values.
  StatusOr<uint64_t> AsUint() const;
  StatusOr<int64_t> AsInt() const;
  StatusOr<double> AsFloat() const;  // floats, and integers converted
  StatusOr<bool> AsBool() const;
  StatusOr<std::string_view> AsString() const;
  StatusOr<const Array*> AsArray() const;

  // Short human form for `inspect`: numbers, quoted strings, "[string x 102400]" for arrays.
  std::string ToDisplayString(size_t max_chars = 80) const;

  bool operator==(const Value& o) const;  // deep comparison (type and contents)
};

struct KeyValue {
  std::string key;
  Value value;
};

}  // namespace moesplit::gguf
