// ParseGguf: parses and validates one GGUF image held in memory. Every read is bounds-checked
// against the image and every size computation is overflow-checked, so any byte string yields
// either a fully validated ParsedGguf or a DataLoss/Unimplemented Status of the form
//   "<name>: offset <byte offset>: <what was found> (<what was expected>)".
#include <algorithm>
#include <bit>
#include <cstring>
#include <limits>
#include <string_view>
#include <unordered_set>

#include "core/gguf/gguf_file.h"

namespace moesplit::gguf {
namespace {

static_assert(std::endian::native == std::endian::little,
              "GGUF is little-endian; this reader memcpy's fields directly");

// Smallest possible encodings, used to reject counts that cannot fit in the bytes left:
//   KV:          u64 key_len + key (>= 0) + u32 type + value (>= 1 byte)  = 13
//   tensor info: u64 name_len + name (>= 0) + u32 n_dims + u64 ne[1] + u32 type + u64 offset = 32
constexpr uint64_t kMinKvBytes = 8 + 4 + 1;
constexpr uint64_t kMinTensorInfoBytes = 8 + 4 + 8 + 4 + 8;

// Encoded size of one element of a scalar type; 0 for string/array (variable length).
uint64_t ScalarBytes(ValueType t) {
  switch (t) {
    case ValueType::kUint8:
    case ValueType::kInt8:
    case ValueType::kBool:
      return 1;
    case ValueType::kUint16:
    case ValueType::kInt16:
      return 2;
    case ValueType::kUint32:
    case ValueType::kInt32:
    case ValueType::kFloat32:
      return 4;
    case ValueType::kUint64:
    case ValueType::kInt64:
    case ValueType::kFloat64:
      return 8;
    default:
      return 0;
  }
}

// Smallest encoding of one array element: string = u64 length; array = u32 type + u64 count.
uint64_t MinElementBytes(ValueType t) {
  if (t == ValueType::kString) return 8;
  if (t == ValueType::kArray) return 12;
  return ScalarBytes(t);
}

uint64_t AlignUp(uint64_t x, uint64_t a) { return (x + a - 1) / a * a; }

// A bounds-checked little-endian reader over [data, data + size).
class Cursor {
 public:
  Cursor(const uint8_t* data, uint64_t size, const std::string& name)
      : data_(data), size_(size), name_(name) {}

  uint64_t pos() const { return pos_; }
  uint64_t size() const { return size_; }
  uint64_t remaining() const { return size_ - pos_; }
  const uint8_t* data() const { return data_; }
  // Prefix for errors, e.g. "key 'general.name': ", while inside one record.
  void set_context(std::string context) { context_ = std::move(context); }

  template <typename... Args>
  Status Error(uint64_t at, const Args&... args) const {
    return DataLossError(name_, ": offset ", at, ": ", context_, args...);
  }

  Status Need(uint64_t n, std::string_view what) const {
    if (n <= remaining()) return Status::Ok();
    return Error(pos_, "truncated: ", what, " needs ", n, " bytes but the ", size_,
                 "-byte file has only ", remaining(), " left");
  }

  Status ReadBytes(void* out, uint64_t n, std::string_view what) {
    MOESPLIT_RETURN_IF_ERROR(Need(n, what));
    std::memcpy(out, data_ + pos_, n);
    pos_ += n;
    return Status::Ok();
  }

  template <typename T>
  Status Read(T* out, std::string_view what) {
    return ReadBytes(out, sizeof(T), what);
  }

  // GGUF string: u64 length + bytes (no NUL).
  Status ReadString(std::string* out, uint64_t max_len, std::string_view what) {
    const uint64_t at = pos_;
    uint64_t len = 0;
    MOESPLIT_RETURN_IF_ERROR(Read(&len, what));
    if (len > remaining()) {
      return Error(at, what, " length ", len, " runs past the end of the ", size_, "-byte file (",
                   remaining(), " bytes left)");
    }
    if (len > max_len) {
      return Error(at, what, " length ", len, " exceeds the limit of ", max_len, " bytes");
    }
    out->assign(reinterpret_cast<const char*>(data_ + pos_), len);
    pos_ += len;
    return Status::Ok();
  }

 private:
  const uint8_t* data_;
  uint64_t size_;
  uint64_t pos_ = 0;
  const std::string& name_;
  std::string context_;
};

class Parser {
 public:
  Parser(const uint8_t* bytes, uint64_t size, const std::string& name, const OpenOptions& options)
      : cur_(bytes, size, name), opt_(options) {
    out_.info.path = name;
    out_.info.file_size = size;
  }

  StatusOr<ParsedGguf> Run() {
    MOESPLIT_RETURN_IF_ERROR(ParseHeader());
    MOESPLIT_RETURN_IF_ERROR(ParseKeyValues());
    MOESPLIT_RETURN_IF_ERROR(ParseAlignment());
    MOESPLIT_RETURN_IF_ERROR(ParseTensorInfos());
    MOESPLIT_RETURN_IF_ERROR(CheckDataSection());
    return std::move(out_);
  }

 private:
  Status ParseHeader();
  Status ParseKeyValues();
  Status ReadValueType(ValueType* t, std::string_view what);
  Status ReadValue(ValueType type, int depth, Value* out);
  Status ReadScalar(ValueType type, Value* out);
  Status ReadArray(int depth, Value* out);
  Status ParseAlignment();
  Status ParseTensorInfos();
  Status ParseTensorInfo(TensorInfo* t);
  Status ParseTensorShape(TensorInfo* t);
  Status CheckDataSection();

  Cursor cur_;
  const OpenOptions& opt_;
  ParsedGguf out_;
  std::vector<uint64_t> kv_offsets_;      // file offset of each KV record
  std::vector<uint64_t> tensor_offsets_;  // file offset of each tensor info record
};

Status Parser::ParseHeader() {
  MOESPLIT_RETURN_IF_ERROR(cur_.Need(4, "magic \"GGUF\""));
  if (std::memcmp(cur_.data(), "GGUF", 4) != 0) {
    const uint8_t* m = cur_.data();
    return cur_.Error(0, "bad magic ",
                      StrCat(std::hex, int{m[0]}, " ", int{m[1]}, " ", int{m[2]}, " ", int{m[3]}),
                      " (expected \"GGUF\" = 47 47 55 46): not a GGUF file");
  }
  char magic[4];
  MOESPLIT_RETURN_IF_ERROR(cur_.Read(&magic, "magic"));
  uint32_t version = 0;
  MOESPLIT_RETURN_IF_ERROR(cur_.Read(&version, "version"));
  if (version == 1) {
    return UnimplementedError(out_.info.path,
                              ": offset 4: GGUF version 1 is not supported (32-bit lengths; "
                              "expected version 2 or 3; re-convert the model)");
  }
  if (version != 2 && version != 3) {
    const uint32_t swapped = __builtin_bswap32(version);
    const char* hint = (swapped == 2 || swapped == 3) ? " (looks like a big-endian GGUF)" : "";
    return cur_.Error(4, "unsupported GGUF version ", version, hint, " (expected 2 or 3)");
  }
  out_.info.version = version;
  MOESPLIT_RETURN_IF_ERROR(cur_.Read(&out_.info.n_tensors, "tensor count"));
  MOESPLIT_RETURN_IF_ERROR(cur_.Read(&out_.info.n_kv, "metadata key/value count"));

  // Each count must fit in the bytes after the 24-byte header, e.g. 70 tensors need >= 2240.
  const uint64_t n_t = out_.info.n_tensors, n_kv = out_.info.n_kv;
  const uint64_t left = cur_.remaining();
  if (n_t > left / kMinTensorInfoBytes || n_t > opt_.max_tensors) {
    return cur_.Error(8, "tensor count ", n_t, " cannot fit in a ", cur_.size(),
                      "-byte file (each tensor info takes >= ", kMinTensorInfoBytes,
                      " bytes; limit ", opt_.max_tensors, ")");
  }
  if (n_kv > (left - n_t * kMinTensorInfoBytes) / kMinKvBytes || n_kv > opt_.max_kv) {
    return cur_.Error(16, "metadata key/value count ", n_kv, " cannot fit in a ", cur_.size(),
                      "-byte file (each key/value takes >= ", kMinKvBytes, " bytes; limit ",
                      opt_.max_kv, ")");
  }
  return Status::Ok();
}

Status Parser::ReadValueType(ValueType* t, std::string_view what) {
  const uint64_t at = cur_.pos();
  uint32_t raw = 0;
  MOESPLIT_RETURN_IF_ERROR(cur_.Read(&raw, what));
  if (raw >= kValueTypeCount) {
    return cur_.Error(at, "unknown ", what, " ", raw, " (expected 0..", kValueTypeCount - 1, ")");
  }
  *t = static_cast<ValueType>(raw);
  return Status::Ok();
}

Status Parser::ParseKeyValues() {
  std::unordered_set<std::string> seen;
  out_.metadata.reserve(out_.info.n_kv);
  kv_offsets_.reserve(out_.info.n_kv);
  for (uint64_t i = 0; i < out_.info.n_kv; ++i) {
    const uint64_t at = cur_.pos();
    KeyValue kv;
    MOESPLIT_RETURN_IF_ERROR(cur_.ReadString(&kv.key, opt_.max_string_len, "metadata key"));
    if (!seen.insert(kv.key).second) {
      return cur_.Error(at, "duplicate metadata key '", kv.key, "' (keys must be unique)");
    }
    cur_.set_context("key '" + kv.key + "': ");
    ValueType type;
    MOESPLIT_RETURN_IF_ERROR(ReadValueType(&type, "value type"));
    MOESPLIT_RETURN_IF_ERROR(ReadValue(type, 0, &kv.value));
    cur_.set_context("");
    kv_offsets_.push_back(at);
    out_.metadata.push_back(std::move(kv));
  }
  return Status::Ok();
}

Status Parser::ReadScalar(ValueType type, Value* out) {
  const uint64_t at = cur_.pos();
  uint8_t b[8] = {};
  MOESPLIT_RETURN_IF_ERROR(cur_.ReadBytes(b, ScalarBytes(type), ValueTypeName(type)));
  uint64_t u = 0;  // zero-extended little-endian bytes
  std::memcpy(&u, b, 8);
  out->type = type;
  switch (type) {
    case ValueType::kUint8:
    case ValueType::kUint16:
    case ValueType::kUint32:
    case ValueType::kUint64:
      out->v = u;
      break;
    case ValueType::kInt8:
      out->v = int64_t{static_cast<int8_t>(b[0])};
      break;
    case ValueType::kInt16: {
      int16_t x;
      std::memcpy(&x, b, 2);
      out->v = int64_t{x};
      break;
    }
    case ValueType::kInt32: {
      int32_t x;
      std::memcpy(&x, b, 4);
      out->v = int64_t{x};
      break;
    }
    case ValueType::kInt64: {
      int64_t x;
      std::memcpy(&x, b, 8);
      out->v = x;
      break;
    }
    case ValueType::kFloat32: {
      float x;
      std::memcpy(&x, b, 4);
      out->v = double{x};
      break;
    }
    case ValueType::kFloat64: {
      double x;
      std::memcpy(&x, b, 8);
      out->v = x;
      break;
    }
    case ValueType::kBool:
      if (b[0] > 1) return cur_.Error(at, "bool value ", int{b[0]}, " (expected 0 or 1)");
      out->v = b[0] == 1;
      break;
    default:
      MOESPLIT_CHECK(false, "ReadScalar on non-scalar type ", ValueTypeName(type));
  }
  return Status::Ok();
}

Status Parser::ReadValue(ValueType type, int depth, Value* out) {
  if (type == ValueType::kArray) return ReadArray(depth + 1, out);
  if (type == ValueType::kString) {
    std::string s;
    MOESPLIT_RETURN_IF_ERROR(cur_.ReadString(&s, opt_.max_string_len, "string value"));
    *out = Value::Str(std::move(s));
    return Status::Ok();
  }
  return ReadScalar(type, out);
}

// Array: u32 element type, u64 count, then `count` values without type tags; an element of
// type array is itself {u32 type, u64 count, values}. `depth` is 1 for a top-level array.
Status Parser::ReadArray(int depth, Value* out) {
  const uint64_t at = cur_.pos();
  if (depth > opt_.max_array_depth) {
    return cur_.Error(at, "arrays nested ", depth, " deep (limit ", opt_.max_array_depth, ")");
  }
  Array arr;
  MOESPLIT_RETURN_IF_ERROR(ReadValueType(&arr.elem_type, "array element type"));
  uint64_t n = 0;
  MOESPLIT_RETURN_IF_ERROR(cur_.Read(&n, "array length"));
  const uint64_t min_bytes = MinElementBytes(arr.elem_type);
  if (n > cur_.remaining() / min_bytes) {
    return cur_.Error(at, "array of ", n, " ", ValueTypeName(arr.elem_type), " cannot fit in the ",
                      cur_.remaining(), " bytes left of the ", cur_.size(), "-byte file");
  }
  if (n > opt_.max_array_len) {
    return cur_.Error(at, "array length ", n, " exceeds the limit of ", opt_.max_array_len,
                      " elements");
  }
  arr.items.resize(n);
  for (uint64_t i = 0; i < n; ++i) {
    MOESPLIT_RETURN_IF_ERROR(ReadValue(arr.elem_type, depth, &arr.items[i]));
  }
  *out = Value::Arr(std::move(arr));
  return Status::Ok();
}

// `general.alignment`: optional, must be a nonzero power of two stored as uint32.
Status Parser::ParseAlignment() {
  for (size_t i = 0; i < out_.metadata.size(); ++i) {
    const KeyValue& kv = out_.metadata[i];
    if (kv.key != "general.alignment") continue;
    if (kv.value.type != ValueType::kUint32) {
      return cur_.Error(kv_offsets_[i], "general.alignment has type ", ValueTypeName(kv.value.type),
                        " (expected uint32)");
    }
    const uint64_t a = std::get<uint64_t>(kv.value.v);
    if (a == 0 || (a & (a - 1)) != 0) {
      return cur_.Error(kv_offsets_[i], "general.alignment is ", a,
                        " (expected a nonzero power of two)");
    }
    out_.info.alignment = a;
  }
  return Status::Ok();
}

Status Parser::ParseTensorInfos() {
  std::unordered_set<std::string> names;
  out_.tensors.resize(out_.info.n_tensors);
  tensor_offsets_.resize(out_.info.n_tensors);
  for (uint64_t i = 0; i < out_.info.n_tensors; ++i) {
    const uint64_t at = cur_.pos();
    tensor_offsets_[i] = at;
    TensorInfo& t = out_.tensors[i];
    MOESPLIT_RETURN_IF_ERROR(ParseTensorInfo(&t));
    if (!names.insert(t.name).second) {
      return cur_.Error(at, "duplicate tensor name '", t.name, "' (names must be unique)");
    }
  }
  return Status::Ok();
}

Status Parser::ParseTensorInfo(TensorInfo* t) {
  MOESPLIT_RETURN_IF_ERROR(cur_.ReadString(&t->name, opt_.max_string_len, "tensor name"));
  MOESPLIT_RETURN_IF_ERROR(ParseTensorShape(t));
  const uint64_t type_at = cur_.pos();
  uint32_t type_id = 0;
  MOESPLIT_RETURN_IF_ERROR(cur_.Read(&type_id, "tensor type"));
  const TypeTraits* tr = FindTypeTraits(type_id);
  if (tr == nullptr) {
    return cur_.Error(type_at, "tensor '", t->name, "': unknown ggml type id ", type_id,
                      " (not a type this reader knows)");
  }
  t->type = tr->type;
  if (t->ne[0] % tr->block_size != 0) {
    return cur_.Error(type_at, "tensor '", t->name, "': row length ne[0] = ", t->ne[0],
                      " is not a multiple of the ", tr->name, " block size ", tr->block_size);
  }
  // nbytes = ne[0] / block_size * type_size * ne[1] * ne[2] * ne[3], overflow-checked.
  uint64_t nbytes = static_cast<uint64_t>(t->ne[0] / tr->block_size);
  bool overflow = __builtin_mul_overflow(nbytes, static_cast<uint64_t>(tr->type_size), &nbytes);
  for (int d = 1; d < kMaxDims; ++d) {
    overflow |= __builtin_mul_overflow(nbytes, static_cast<uint64_t>(t->ne[d]), &nbytes);
  }
  if (overflow) {
    return cur_.Error(type_at, "tensor '", t->name, "': byte size overflows 64 bits");
  }
  t->nbytes = nbytes;
  const uint64_t off_at = cur_.pos();
  MOESPLIT_RETURN_IF_ERROR(cur_.Read(&t->offset, "tensor data offset"));
  if (t->offset % out_.info.alignment != 0) {
    return cur_.Error(off_at, "tensor '", t->name, "': data offset ", t->offset,
                      " is not a multiple of the alignment ", out_.info.alignment);
  }
  return Status::Ok();
}

// u32 n_dims (1..4) then n_dims x u64 ne; every ne >= 1 and the element count fits in int64.
Status Parser::ParseTensorShape(TensorInfo* t) {
  const uint64_t at = cur_.pos();
  uint32_t n_dims = 0;
  MOESPLIT_RETURN_IF_ERROR(cur_.Read(&n_dims, "tensor n_dims"));
  if (n_dims < 1 || n_dims > static_cast<uint32_t>(kMaxDims)) {
    return cur_.Error(at, "tensor '", t->name, "': n_dims ", n_dims, " (expected 1..", kMaxDims,
                      ")");
  }
  t->n_dims = static_cast<int>(n_dims);
  int64_t product = 1;
  for (uint32_t d = 0; d < n_dims; ++d) {
    const uint64_t ne_at = cur_.pos();
    uint64_t ne = 0;
    MOESPLIT_RETURN_IF_ERROR(cur_.Read(&ne, "tensor dimension"));
    if (ne < 1 || ne > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
      return cur_.Error(ne_at, "tensor '", t->name, "': ne[", d, "] = ", static_cast<int64_t>(ne),
                        " (expected >= 1)");
    }
    t->ne[d] = static_cast<int64_t>(ne);
    if (__builtin_mul_overflow(product, t->ne[d], &product)) {
      return cur_.Error(ne_at, "tensor '", t->name, "': element count overflows int64");
    }
  }
  return Status::Ok();
}

// Data section: starts at the aligned end of the tensor infos; every tensor lies inside the
// file and no two overlap. A file with no tensors may end before the aligned start (vocab-only
// GGUFs written by gguf-py do).
Status Parser::CheckDataSection() {
  const uint64_t a = out_.info.alignment;
  const uint64_t data_off = AlignUp(cur_.pos(), a);
  out_.info.data_offset = data_off;
  if (out_.tensors.empty()) return Status::Ok();
  const uint64_t size = cur_.size();
  if (data_off > size) {
    return cur_.Error(cur_.pos(), "data section would start at offset ", data_off, " (aligned to ",
                      a, ") but the file has only ", size, " bytes");
  }
  const uint64_t data_len = size - data_off;
  for (size_t i = 0; i < out_.tensors.size(); ++i) {
    TensorInfo& t = out_.tensors[i];
    if (t.offset > data_len || t.nbytes > data_len - t.offset) {
      return cur_.Error(tensor_offsets_[i], "tensor '", t.name, "': ", t.nbytes,
                        " bytes at data offset ", t.offset, " (file offset ", data_off, " + ",
                        t.offset, ") run past the end of the ", size, "-byte file");
    }
    t.data = cur_.data() + data_off + t.offset;
  }
  std::vector<size_t> order(out_.tensors.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(),
            [&](size_t x, size_t y) { return out_.tensors[x].offset < out_.tensors[y].offset; });
  for (size_t k = 1; k < order.size(); ++k) {
    const TensorInfo& p = out_.tensors[order[k - 1]];
    const TensorInfo& q = out_.tensors[order[k]];
    if (p.offset + p.nbytes > q.offset) {  // both inside the file: no overflow
      return cur_.Error(tensor_offsets_[order[k]], "tensor '", q.name, "' at data offset ",
                        q.offset, " overlaps tensor '", p.name, "' (data offset ", p.offset, ", ",
                        p.nbytes, " bytes)");
    }
  }
  return Status::Ok();
}

}  // namespace

StatusOr<ParsedGguf> ParseGguf(const uint8_t* bytes, uint64_t size, const std::string& name,
                               const OpenOptions& options) {
  static const uint8_t kEmpty = 0;
  if (bytes == nullptr) bytes = &kEmpty;  // size must be 0 then; keeps pointer math defined
  return Parser(bytes, size, name, options).Run();
}

}  // namespace moesplit::gguf
