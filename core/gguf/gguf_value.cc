#include "core/gguf/gguf_value.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>

namespace moesplit::gguf {

const char* ValueTypeName(ValueType t) {
  switch (t) {
    case ValueType::kUint8:
      return "uint8";
    case ValueType::kInt8:
      return "int8";
    case ValueType::kUint16:
      return "uint16";
    case ValueType::kInt16:
      return "int16";
    case ValueType::kUint32:
      return "uint32";
    case ValueType::kInt32:
      return "int32";
    case ValueType::kFloat32:
      return "float32";
    case ValueType::kBool:
      return "bool";
    case ValueType::kString:
      return "string";
    case ValueType::kArray:
      return "array";
    case ValueType::kUint64:
      return "uint64";
    case ValueType::kInt64:
      return "int64";
    case ValueType::kFloat64:
      return "float64";
  }
  return "invalid";
}

Value Value::StrArray(const std::vector<std::string>& xs) {
  Array a{ValueType::kString, {}};
  a.items.reserve(xs.size());
  for (const std::string& s : xs) a.items.push_back(Str(s));
  return Arr(std::move(a));
}

Value Value::F32Array(const std::vector<float>& xs) {
  Array a{ValueType::kFloat32, {}};
  a.items.reserve(xs.size());
  for (float x : xs) a.items.push_back(F32(x));
  return Arr(std::move(a));
}

Value Value::I32Array(const std::vector<int32_t>& xs) {
  Array a{ValueType::kInt32, {}};
  a.items.reserve(xs.size());
  for (int32_t x : xs) a.items.push_back(I32(x));
  return Arr(std::move(a));
}

bool Value::is_integer() const {
  switch (type) {
    case ValueType::kUint8:
    case ValueType::kInt8:
    case ValueType::kUint16:
    case ValueType::kInt16:
    case ValueType::kUint32:
    case ValueType::kInt32:
    case ValueType::kUint64:
    case ValueType::kInt64:
      return true;
    default:
      return false;
  }
}

namespace {

Status WrongType(const Value& v, const char* wanted) {
  return InvalidArgumentError("expected ", wanted, " but the value is of type ",
                              ValueTypeName(v.type));
}

}  // namespace

StatusOr<uint64_t> Value::AsUint() const {
  if (const auto* u = std::get_if<uint64_t>(&v); u && is_integer()) return *u;
  if (const auto* i = std::get_if<int64_t>(&v); i && is_integer()) {
    if (*i < 0) return InvalidArgumentError("expected a non-negative integer, got ", *i);
    return static_cast<uint64_t>(*i);
  }
  return WrongType(*this, "an integer");
}

StatusOr<int64_t> Value::AsInt() const {
  if (const auto* i = std::get_if<int64_t>(&v); i && is_integer()) return *i;
  if (const auto* u = std::get_if<uint64_t>(&v); u && is_integer()) {
    // uint64 values above 2^63 - 1 have no int64 representation.
    if (*u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
      return InvalidArgumentError("integer ", *u, " does not fit in int64");
    }
    return static_cast<int64_t>(*u);
  }
  return WrongType(*this, "an integer");
}

StatusOr<double> Value::AsFloat() const {
  if (const auto* d = std::get_if<double>(&v); d && is_float()) return *d;
  if (const auto* u = std::get_if<uint64_t>(&v); u && is_integer()) return static_cast<double>(*u);
  if (const auto* i = std::get_if<int64_t>(&v); i && is_integer()) return static_cast<double>(*i);
  return WrongType(*this, "a number");
}

StatusOr<bool> Value::AsBool() const {
  if (const auto* b = std::get_if<bool>(&v); b && type == ValueType::kBool) return *b;
  return WrongType(*this, "a bool");
}

StatusOr<std::string_view> Value::AsString() const {
  if (const auto* s = std::get_if<std::string>(&v); s && type == ValueType::kString) {
    return std::string_view(*s);
  }
  return WrongType(*this, "a string");
}

StatusOr<const Array*> Value::AsArray() const {
  if (const auto* a = std::get_if<std::shared_ptr<Array>>(&v);
      a && *a && type == ValueType::kArray) {
    return static_cast<const Array*>(a->get());
  }
  return WrongType(*this, "an array");
}

namespace {

// Quotes a string for display, escaping control characters, cut at `max_chars`.
std::string QuoteForDisplay(std::string_view s, size_t max_chars) {
  std::string out = "\"";
  for (unsigned char c : s) {
    if (out.size() >= max_chars) {
      out += "...";
      break;
    }
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c == '\n') {
      out += "\\n";
    } else if (c < 0x20 || c == 0x7f) {
      char buf[8];
      std::snprintf(buf, sizeof(buf), "\\x%02x", c);
      out += buf;
    } else {
      out += static_cast<char>(c);
    }
  }
  out += '"';
  return out;
}

// Shortest decimal that reads back as the same value in the stored precision, so a float32
// 1e-6 shows as "1e-06", not "9.99999997e-07".
std::string FloatForDisplay(double d, bool is_f32) {
  char buf[64];
  for (int digits = 6; digits <= 17; ++digits) {
    std::snprintf(buf, sizeof(buf), "%.*g", digits, d);
    const double back = std::strtod(buf, nullptr);
    if (is_f32 ? static_cast<float>(back) == static_cast<float>(d) : back == d) break;
  }
  return buf;
}

}  // namespace

std::string Value::ToDisplayString(size_t max_chars) const {
  switch (type) {
    case ValueType::kFloat32:
    case ValueType::kFloat64:
      if (const auto* d = std::get_if<double>(&v)) {
        return FloatForDisplay(*d, type == ValueType::kFloat32);
      }
      break;
    case ValueType::kBool:
      if (const auto* b = std::get_if<bool>(&v)) return *b ? "true" : "false";
      break;
    case ValueType::kString:
      if (const auto* s = std::get_if<std::string>(&v)) return QuoteForDisplay(*s, max_chars);
      break;
    case ValueType::kArray:
      if (const auto* a = std::get_if<std::shared_ptr<Array>>(&v); a && *a) {
        return StrCat("[", ValueTypeName((*a)->elem_type), " x ", (*a)->items.size(), "]");
      }
      break;
    default:
      if (const auto* u = std::get_if<uint64_t>(&v)) return std::to_string(*u);
      if (const auto* i = std::get_if<int64_t>(&v)) return std::to_string(*i);
      break;
  }
  return StrCat("<", ValueTypeName(type), " with mismatched contents>");
}

bool Value::operator==(const Value& o) const {
  if (type != o.type || v.index() != o.v.index()) return false;
  if (const auto* a = std::get_if<std::shared_ptr<Array>>(&v)) {
    const auto& b = std::get<std::shared_ptr<Array>>(o.v);
    if (!*a || !b) return !*a && !b;
    return (*a)->elem_type == b->elem_type && (*a)->items == b->items;
  }
  if (const auto* d = std::get_if<double>(&v)) {
    // Bitwise-equal semantics for floats so NaN round-trips compare equal.
    const double e = std::get<double>(o.v);
    return *d == e || (std::isnan(*d) && std::isnan(e));
  }
  return v == o.v;
}

}  // namespace moesplit::gguf
