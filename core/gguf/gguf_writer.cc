// GgufWriter: GGUF v3, laid out exactly as llama.cpp's gguf writer does, so that a copy of a
// llama.cpp-written file is byte-identical:
//   header | KVs | tensor infos | zero padding to `alignment` | tensor 0 | pad | tensor 1 | pad ...
// (every tensor, the last one included, is followed by padding to the alignment).
#include "core/gguf/gguf_writer.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <limits>
#include <unordered_set>

namespace moesplit::gguf {
namespace {

constexpr uint32_t kVersion = 3;
constexpr uint64_t kCopyChunk = 64ull << 20;  // bytes per WriteTensorData call when copying

uint64_t AlignUp(uint64_t x, uint64_t a) { return (x + a - 1) / a * a; }

void PutBytes(std::string* b, const void* p, size_t n) {
  b->append(static_cast<const char*>(p), n);
}
void PutU32(std::string* b, uint32_t x) { PutBytes(b, &x, 4); }
void PutU64(std::string* b, uint64_t x) { PutBytes(b, &x, 8); }
void PutString(std::string* b, std::string_view s) {
  PutU64(b, s.size());
  PutBytes(b, s.data(), s.size());
}

// Range of each integer type as [lo, hi] in int128 so one check covers all eight.
bool IntegerRange(ValueType t, __int128* lo, __int128* hi, size_t* bytes) {
  switch (t) {
    case ValueType::kUint8:
      *lo = 0, *hi = UINT8_MAX, *bytes = 1;
      return true;
    case ValueType::kInt8:
      *lo = INT8_MIN, *hi = INT8_MAX, *bytes = 1;
      return true;
    case ValueType::kUint16:
      *lo = 0, *hi = UINT16_MAX, *bytes = 2;
      return true;
    case ValueType::kInt16:
      *lo = INT16_MIN, *hi = INT16_MAX, *bytes = 2;
      return true;
    case ValueType::kUint32:
      *lo = 0, *hi = UINT32_MAX, *bytes = 4;
      return true;
    case ValueType::kInt32:
      *lo = INT32_MIN, *hi = INT32_MAX, *bytes = 4;
      return true;
    case ValueType::kUint64:
      *lo = 0, *hi = UINT64_MAX, *bytes = 8;
      return true;
    case ValueType::kInt64:
      *lo = INT64_MIN, *hi = INT64_MAX, *bytes = 8;
      return true;
    default:
      return false;
  }
}

Status EncodeValue(const Value& v, std::string* b, int depth);

Status EncodeArray(const Value& v, std::string* b, int depth) {
  const auto* a = std::get_if<std::shared_ptr<Array>>(&v.v);
  if (a == nullptr || *a == nullptr) return InvalidArgumentError("array value holds no array");
  if (depth > 64) return InvalidArgumentError("arrays nested more than 64 deep");
  const Array& arr = **a;
  if (static_cast<uint32_t>(arr.elem_type) >= kValueTypeCount) {
    return InvalidArgumentError("array element type ", static_cast<uint32_t>(arr.elem_type));
  }
  PutU32(b, static_cast<uint32_t>(arr.elem_type));
  PutU64(b, arr.items.size());
  for (size_t i = 0; i < arr.items.size(); ++i) {
    if (arr.items[i].type != arr.elem_type) {
      return InvalidArgumentError("array of ", ValueTypeName(arr.elem_type), ": element ", i,
                                  " has type ", ValueTypeName(arr.items[i].type));
    }
    MOESPLIT_RETURN_IF_ERROR(EncodeValue(arr.items[i], b, depth + 1));
  }
  return Status::Ok();
}

// Encodes the value's payload (no type tag). Checks that the contents fit the declared type.
Status EncodeValue(const Value& v, std::string* b, int depth) {
  __int128 lo, hi;
  size_t n;
  if (IntegerRange(v.type, &lo, &hi, &n)) {
    __int128 x;
    if (const auto* u = std::get_if<uint64_t>(&v.v)) {
      x = *u;
    } else if (const auto* i = std::get_if<int64_t>(&v.v)) {
      x = *i;
    } else {
      return InvalidArgumentError(ValueTypeName(v.type), " value holds no integer");
    }
    if (x < lo || x > hi) {
      return InvalidArgumentError("integer ", static_cast<int64_t>(x), " does not fit in ",
                                  ValueTypeName(v.type));
    }
    const uint64_t bits = static_cast<uint64_t>(x);  // two's complement, low n bytes
    PutBytes(b, &bits, n);
    return Status::Ok();
  }
  switch (v.type) {
    case ValueType::kFloat32:
    case ValueType::kFloat64: {
      const auto* d = std::get_if<double>(&v.v);
      if (d == nullptr) return InvalidArgumentError("float value holds no number");
      if (v.type == ValueType::kFloat64) {
        PutBytes(b, d, 8);
      } else {
        const float f = static_cast<float>(*d);
        PutBytes(b, &f, 4);
      }
      return Status::Ok();
    }
    case ValueType::kBool: {
      const auto* x = std::get_if<bool>(&v.v);
      if (x == nullptr) return InvalidArgumentError("bool value holds no bool");
      b->push_back(*x ? 1 : 0);
      return Status::Ok();
    }
    case ValueType::kString: {
      const auto* s = std::get_if<std::string>(&v.v);
      if (s == nullptr) return InvalidArgumentError("string value holds no string");
      PutString(b, *s);
      return Status::Ok();
    }
    case ValueType::kArray:
      return EncodeArray(v, b, depth);
    default:
      return InvalidArgumentError("value type ", static_cast<uint32_t>(v.type));
  }
}

}  // namespace

GgufWriter::GgufWriter(std::string path, uint32_t alignment)
    : path_(std::move(path)), alignment_(alignment) {}

GgufWriter::~GgufWriter() {
  if (f_ != nullptr) std::fclose(f_);
}

void GgufWriter::AddKeyValue(std::string key, Value value) {
  kvs_.push_back(KeyValue{std::move(key), std::move(value)});
}

void GgufWriter::AddTensor(std::string name, GgmlType type, std::vector<int64_t> ne) {
  auto fail = [&](auto&&... args) {
    if (deferred_error_.ok())
      deferred_error_ = InvalidArgumentError("tensor '", name, "': ", args...);
  };
  const TypeTraits* tr = FindTypeTraits(static_cast<uint32_t>(type));
  if (tr == nullptr) return fail("unknown ggml type id ", static_cast<uint32_t>(type));
  if (ne.empty() || ne.size() > static_cast<size_t>(kMaxDims)) {
    return fail(ne.size(), " dimensions (expected 1..", kMaxDims, ")");
  }
  TensorInfo t;
  t.name = std::move(name);
  t.type = type;
  t.n_dims = static_cast<int>(ne.size());
  int64_t elems = 1;
  for (size_t d = 0; d < ne.size(); ++d) {
    if (ne[d] < 1) return fail("ne[", d, "] = ", ne[d], " (expected >= 1)");
    if (__builtin_mul_overflow(elems, ne[d], &elems)) return fail("element count overflows");
    t.ne[d] = ne[d];
  }
  if (ne[0] % tr->block_size != 0) {
    return fail("ne[0] = ", ne[0], " is not a multiple of the ", tr->name, " block size ",
                tr->block_size);
  }
  // Bytes = ne[0] / block_size * type_size * ne[1] * ne[2] * ne[3]; fits since elems fits.
  t.nbytes = static_cast<uint64_t>(elems / tr->block_size * tr->type_size);
  tensors_.push_back(std::move(t));
}

// Checks keys, names and alignment, adds general.alignment if needed, assigns tensor offsets.
Status GgufWriter::ValidateAndLayout() {
  MOESPLIT_RETURN_IF_ERROR(deferred_error_);
  if (alignment_ == 0 || (alignment_ & (alignment_ - 1)) != 0) {
    return InvalidArgumentError("alignment ", alignment_, " is not a nonzero power of two");
  }
  std::unordered_set<std::string_view> keys;
  bool has_alignment_key = false;
  for (const KeyValue& kv : kvs_) {
    if (!keys.insert(kv.key).second) return InvalidArgumentError("duplicate key '", kv.key, "'");
    if (kv.key != "general.alignment") continue;
    has_alignment_key = true;
    const auto* u = std::get_if<uint64_t>(&kv.value.v);
    if (kv.value.type != ValueType::kUint32 || u == nullptr || *u != alignment_) {
      return InvalidArgumentError("general.alignment must be uint32 ", alignment_,
                                  " (the writer's alignment), got ", kv.value.ToDisplayString());
    }
  }
  if (!has_alignment_key && alignment_ != kDefaultAlignment) {
    kvs_.push_back(KeyValue{"general.alignment", Value::U32(alignment_)});
  }
  std::unordered_set<std::string_view> names;
  uint64_t offset = 0;
  for (TensorInfo& t : tensors_) {
    if (!names.insert(t.name).second) {
      return InvalidArgumentError("duplicate tensor name '", t.name, "'");
    }
    t.offset = offset;
    if (__builtin_add_overflow(offset, AlignUp(t.nbytes, alignment_), &offset)) {
      return InvalidArgumentError("tensor data exceeds 2^64 bytes");
    }
  }
  return Status::Ok();
}

Status GgufWriter::EncodeHeader(std::string* b) const {
  PutBytes(b, "GGUF", 4);
  PutU32(b, kVersion);
  PutU64(b, tensors_.size());
  PutU64(b, kvs_.size());
  for (const KeyValue& kv : kvs_) {
    PutString(b, kv.key);
    PutU32(b, static_cast<uint32_t>(kv.value.type));
    Status s = EncodeValue(kv.value, b, 0);
    if (!s.ok()) return InvalidArgumentError("key '", kv.key, "': ", s.message());
  }
  for (const TensorInfo& t : tensors_) {
    PutString(b, t.name);
    PutU32(b, static_cast<uint32_t>(t.n_dims));
    for (int d = 0; d < t.n_dims; ++d) PutU64(b, static_cast<uint64_t>(t.ne[d]));
    PutU32(b, static_cast<uint32_t>(t.type));
    PutU64(b, t.offset);
  }
  return Status::Ok();
}

Status GgufWriter::Begin() {
  if (begun_) return FailedPreconditionError(path_, ": Begin() called twice");
  begun_ = true;
  std::string header;
  Status s = ValidateAndLayout();
  if (s.ok()) s = EncodeHeader(&header);
  if (!s.ok()) {
    deferred_error_ = s.WithContext(path_);
    return deferred_error_;
  }
  f_ = std::fopen(path_.c_str(), "wb");
  if (f_ == nullptr) {
    deferred_error_ = IoError(path_, ": cannot create: ", std::strerror(errno));
    return deferred_error_;
  }
  MOESPLIT_RETURN_IF_ERROR(WriteRaw(header.data(), header.size()));
  MOESPLIT_RETURN_IF_ERROR(WritePadding(alignment_));
  data_start_ = pos_;
  for (TensorInfo& t : tensors_) t.data = nullptr;  // nothing mapped: the writer owns no bytes
  return Status::Ok();
}

Status GgufWriter::WriteRaw(const void* data, uint64_t n) {
  MOESPLIT_RETURN_IF_ERROR(deferred_error_);
  if (n > 0 && std::fwrite(data, 1, n, f_) != n) {
    deferred_error_ = IoError(path_, ": write of ", n, " bytes at offset ", pos_,
                              " failed: ", std::strerror(errno));
    return deferred_error_;
  }
  pos_ += n;
  return Status::Ok();
}

Status GgufWriter::WritePadding(uint64_t to_multiple_of) {
  static constexpr char kZeros[4096] = {};
  uint64_t pad = AlignUp(pos_, to_multiple_of) - pos_;
  while (pad > 0) {
    const uint64_t n = std::min<uint64_t>(pad, sizeof(kZeros));
    MOESPLIT_RETURN_IF_ERROR(WriteRaw(kZeros, n));
    pad -= n;
  }
  return Status::Ok();
}

Status GgufWriter::WriteTensorData(const void* data, uint64_t n) {
  if (!begun_ || f_ == nullptr) {
    MOESPLIT_RETURN_IF_ERROR(deferred_error_);
    return FailedPreconditionError(path_, ": WriteTensorData outside Begin()..Finish()");
  }
  if (cur_tensor_ >= tensors_.size()) {
    return FailedPreconditionError(path_, ": ", n, " more bytes but every tensor is complete");
  }
  const TensorInfo& t = tensors_[cur_tensor_];
  if (n > t.nbytes - cur_written_) {
    return InvalidArgumentError(path_, ": tensor '", t.name, "': chunk of ", n, " bytes but only ",
                                t.nbytes - cur_written_, " of its ", t.nbytes, " bytes remain");
  }
  MOESPLIT_RETURN_IF_ERROR(WriteRaw(data, n));
  cur_written_ += n;
  if (cur_written_ == t.nbytes) {
    MOESPLIT_RETURN_IF_ERROR(WritePadding(alignment_));
    ++cur_tensor_;
    cur_written_ = 0;
  }
  return Status::Ok();
}

Status GgufWriter::Finish() {
  if (!begun_ || f_ == nullptr) {
    MOESPLIT_RETURN_IF_ERROR(deferred_error_);
    return FailedPreconditionError(path_, ": Finish() without Begin()");
  }
  Status s = deferred_error_;
  if (s.ok() && cur_tensor_ < tensors_.size()) {
    const TensorInfo& t = tensors_[cur_tensor_];
    s = FailedPreconditionError(path_, ": tensor '", t.name, "' got ", cur_written_, " of ",
                                t.nbytes, " bytes (", tensors_.size() - cur_tensor_,
                                " tensors incomplete)");
  }
  // Buffered bytes reach the disk only now: a full disk often shows up here, not in fwrite.
  if (s.ok() && (std::fflush(f_) != 0 || std::ferror(f_))) {
    s = IoError(path_, ": write failed: ", std::strerror(errno));
  }
  const int rc = std::fclose(f_);
  f_ = nullptr;
  if (s.ok() && rc != 0) s = IoError(path_, ": close failed: ", std::strerror(errno));
  deferred_error_ = s;
  return s;
}

namespace {

bool IsSplitKey(std::string_view key) { return key.starts_with("split."); }

Status CopyTensors(const GgufFile& file, size_t begin, size_t end, GgufWriter* w) {
  for (size_t i = begin; i < end; ++i) {
    const TensorInfo& t = file.tensors()[i];
    for (uint64_t done = 0; done < t.nbytes;) {
      const uint64_t n = std::min(kCopyChunk, t.nbytes - done);
      MOESPLIT_RETURN_IF_ERROR(w->WriteTensorData(t.data + done, n));
      done += n;
    }
  }
  return w->Finish();
}

void DeclareTensors(const GgufFile& file, size_t begin, size_t end, GgufWriter* w) {
  for (size_t i = begin; i < end; ++i) {
    const TensorInfo& t = file.tensors()[i];
    w->AddTensor(t.name, t.type, std::vector<int64_t>(t.ne.begin(), t.ne.begin() + t.n_dims));
  }
}

}  // namespace

Status WriteCopy(const GgufFile& file, const std::string& path) {
  GgufWriter w(path, static_cast<uint32_t>(file.shards().front().alignment));
  for (const KeyValue& kv : file.metadata()) {
    if (!IsSplitKey(kv.key)) w.AddKeyValue(kv.key, kv.value);
  }
  DeclareTensors(file, 0, file.tensors().size(), &w);
  MOESPLIT_RETURN_IF_ERROR(w.Begin());
  return CopyTensors(file, 0, file.tensors().size(), &w);
}

Status WriteSplit(const GgufFile& file, const std::string& prefix, int n_shards) {
  const size_t n = file.tensors().size();
  if (n_shards < 1 || n_shards > 65535 || static_cast<size_t>(n_shards) > std::max<size_t>(n, 1)) {
    return InvalidArgumentError("cannot split ", n, " tensors into ", n_shards, " shards");
  }
  if (n > static_cast<size_t>(std::numeric_limits<int32_t>::max())) {
    return InvalidArgumentError("too many tensors for split.tensors.count (i32): ", n);
  }
  const auto alignment = static_cast<uint32_t>(file.shards().front().alignment);
  for (int s = 0; s < n_shards; ++s) {
    GgufWriter w(MakeSplitPath(prefix, s + 1, n_shards), alignment);
    if (s == 0) {
      for (const KeyValue& kv : file.metadata()) {
        if (!IsSplitKey(kv.key)) w.AddKeyValue(kv.key, kv.value);
      }
    }
    w.AddKeyValue("split.no", Value::U16(static_cast<uint16_t>(s)));
    w.AddKeyValue("split.count", Value::U16(static_cast<uint16_t>(n_shards)));
    w.AddKeyValue("split.tensors.count", Value::I32(static_cast<int32_t>(n)));
    const size_t begin = n * s / n_shards, end = n * (s + 1) / n_shards;
    DeclareTensors(file, begin, end, &w);
    MOESPLIT_RETURN_IF_ERROR(w.Begin());
    MOESPLIT_RETURN_IF_ERROR(CopyTensors(file, begin, end, &w));
  }
  return Status::Ok();
}

}  // namespace moesplit::gguf
