// GgufFile: maps one GGUF file or all shards of a split model read-only and merges them into one
// tensor table. Parsing and validation of each image is ParseGguf's job (gguf_parse.cc); this
// file handles the OS (open/mmap), shard discovery and cross-shard consistency.
#include "core/gguf/gguf_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

namespace moesplit::gguf {

// One read-only private mapping of a whole file; unmapped when the GgufFile goes away.
struct GgufFile::Mapping {
  const uint8_t* data = nullptr;
  uint64_t size = 0;
  ~Mapping() {
    if (data != nullptr) munmap(const_cast<uint8_t*>(data), size);
  }
};

namespace {

constexpr const char* kSplitNo = "split.no";
constexpr const char* kSplitCount = "split.count";
constexpr const char* kSplitTensors = "split.tensors.count";
constexpr uint64_t kMaxShards = 99999;  // five digits in "-NNNNN-of-MMMMM"

// The three split keys of one shard; `present` is false when none of them is there.
struct SplitKeys {
  bool present = false;
  uint64_t no = 0;  // 0-based
  uint64_t count = 1;
  uint64_t tensors = 0;
};

const Value* FindIn(const std::vector<KeyValue>& kvs, std::string_view key) {
  for (const KeyValue& kv : kvs) {
    if (kv.key == key) return &kv.value;
  }
  return nullptr;
}

// llama.cpp writes u16/u16/i32; any non-negative integer type is accepted.
StatusOr<SplitKeys> ReadSplitKeys(const ParsedGguf& g) {
  const char* names[3] = {kSplitNo, kSplitCount, kSplitTensors};
  const Value* vals[3];
  std::string missing;
  int found = 0;
  for (int i = 0; i < 3; ++i) {
    vals[i] = FindIn(g.metadata, names[i]);
    if (vals[i] != nullptr) {
      ++found;
    } else {
      missing += StrCat(missing.empty() ? "" : ", ", names[i]);
    }
  }
  SplitKeys k;
  if (found == 0) return k;
  if (found < 3) {
    return DataLossError(g.info.path, ": has split keys but lacks ", missing,
                         " (a shard of a split model needs split.no, split.count and "
                         "split.tensors.count)");
  }
  uint64_t* outs[3] = {&k.no, &k.count, &k.tensors};
  for (int i = 0; i < 3; ++i) {
    StatusOr<uint64_t> u = vals[i]->AsUint();
    if (!u.ok()) return DataLossError(g.info.path, ": key ", names[i], ": ", u.status().message());
    *outs[i] = *u;
  }
  if (k.count < 1 || k.count > kMaxShards || k.no >= k.count) {
    return DataLossError(g.info.path, ": split.no = ", k.no, ", split.count = ", k.count,
                         " (expected 0 <= split.no < split.count <= ", kMaxShards, ")");
  }
  k.present = true;
  return k;
}

}  // namespace

// Internal helper with access to GgufFile's privates (declared a friend in the header).
class GgufParser {
 public:
  static StatusOr<std::unique_ptr<GgufFile>> Open(const std::string& path, const OpenOptions& opt);

 private:
  static StatusOr<std::unique_ptr<GgufFile::Mapping>> MapFile(const std::string& path,
                                                              bool populate);
  static StatusOr<ParsedGguf> MapAndParse(GgufFile* f, const std::string& path,
                                          const OpenOptions& opt);
  static StatusOr<std::vector<std::string>> ShardPaths(const std::string& path,
                                                       const SplitKeys& keys);
  static Status AddShard(GgufFile* f, ParsedGguf g, int shard, const SplitKeys& want);
  static Status BuildIndex(GgufFile* f);
};

StatusOr<std::unique_ptr<GgufFile::Mapping>> GgufParser::MapFile(const std::string& path,
                                                                 bool populate) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    const int err = errno;
    if (err == ENOENT) return NotFoundError(path, ": no such file");
    return IoError(path, ": cannot open: ", std::strerror(err));
  }
  struct stat st;
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    return InvalidArgumentError(path, ": not a regular file");
  }
  auto m = std::make_unique<GgufFile::Mapping>();
  m->size = static_cast<uint64_t>(st.st_size);
  if (m->size > 0) {
    void* p = ::mmap(nullptr, m->size, PROT_READ, MAP_PRIVATE, fd, 0);
    if (p == MAP_FAILED) {
      const int err = errno;
      ::close(fd);
      return IoError(path, ": mmap of ", m->size, " bytes failed: ", std::strerror(err));
    }
    m->data = static_cast<const uint8_t*>(p);
    if (populate) ::madvise(p, m->size, MADV_WILLNEED);
  }
  ::close(fd);  // the mapping keeps the file referenced
  return m;
}

StatusOr<ParsedGguf> GgufParser::MapAndParse(GgufFile* f, const std::string& path,
                                             const OpenOptions& opt) {
  MOESPLIT_ASSIGN_OR_RETURN(std::unique_ptr<GgufFile::Mapping> m, MapFile(path, opt.populate));
  const uint8_t* data = m->data;
  const uint64_t size = m->size;
  f->mappings_.push_back(std::move(m));
  return ParseGguf(data, size, path, opt);
}

// Paths of all shards, in order, for a file that carries split keys with split.count > 1.
StatusOr<std::vector<std::string>> GgufParser::ShardPaths(const std::string& path,
                                                          const SplitKeys& keys) {
  const std::optional<SplitName> name = ParseSplitName(path);
  if (!name) {
    return InvalidArgumentError(path, ": split.no = ", keys.no, " and split.count = ", keys.count,
                                " say this is a shard of a split model, but the file name does "
                                "not match NAME-NNNNN-of-MMMMM.gguf, so the other shards cannot "
                                "be found");
  }
  if (static_cast<uint64_t>(name->count) != keys.count ||
      static_cast<uint64_t>(name->no) != keys.no + 1) {
    return DataLossError(path, ": file name says shard ", name->no, " of ", name->count,
                         " but split.no = ", keys.no, " (0-based) and split.count = ", keys.count);
  }
  std::vector<std::string> paths;
  for (int i = 1; i <= name->count; ++i)
    paths.push_back(MakeSplitPath(name->prefix, i, name->count));
  return paths;
}

// Checks shard `shard`'s split keys against the first file's and appends its tensors.
Status GgufParser::AddShard(GgufFile* f, ParsedGguf g, int shard, const SplitKeys& want) {
  MOESPLIT_ASSIGN_OR_RETURN(SplitKeys k, ReadSplitKeys(g));
  if (want.present) {
    if (!k.present) {
      return DataLossError(g.info.path, ": shard ", shard + 1, " of ", want.count,
                           " has no split.* keys");
    }
    if (k.count != want.count || k.no != static_cast<uint64_t>(shard) ||
        k.tensors != want.tensors) {
      return DataLossError(g.info.path, ": split.no = ", k.no, ", split.count = ", k.count,
                           ", split.tensors.count = ", k.tensors, " (expected ", shard, ", ",
                           want.count, ", ", want.tensors, " as in the other shards)");
    }
  }
  if (shard == 0) f->metadata_ = std::move(g.metadata);
  for (TensorInfo& t : g.tensors) {
    t.shard = shard;
    f->tensors_.push_back(std::move(t));
  }
  f->shards_.push_back(std::move(g.info));
  return Status::Ok();
}

Status GgufParser::BuildIndex(GgufFile* f) {
  for (size_t i = 0; i < f->metadata_.size(); ++i) f->kv_index_.emplace(f->metadata_[i].key, i);
  for (size_t i = 0; i < f->tensors_.size(); ++i) {
    const TensorInfo& t = f->tensors_[i];
    auto [it, inserted] = f->tensor_index_.emplace(t.name, i);
    if (!inserted) {
      const TensorInfo& o = f->tensors_[it->second];
      return DataLossError(f->shards_[t.shard].path, ": tensor '", t.name, "' is also in shard ",
                           o.shard + 1, " (", f->shards_[o.shard].path, ")");
    }
  }
  return Status::Ok();
}

StatusOr<std::unique_ptr<GgufFile>> GgufParser::Open(const std::string& path,
                                                     const OpenOptions& opt) {
  std::unique_ptr<GgufFile> f(new GgufFile());
  MOESPLIT_ASSIGN_OR_RETURN(ParsedGguf first, MapAndParse(f.get(), path, opt));
  MOESPLIT_ASSIGN_OR_RETURN(SplitKeys keys, ReadSplitKeys(first));
  const std::optional<SplitName> name = ParseSplitName(path);
  if (!keys.present && name && name->count > 1) {
    return DataLossError(path, ": file name says shard ", name->no, " of ", name->count,
                         " but the file has no split.no / split.count / split.tensors.count keys");
  }
  if (!keys.present || keys.count == 1 || !opt.load_all_shards) {
    if (keys.present && keys.count == 1 && keys.tensors != first.info.n_tensors) {
      return DataLossError(path, ": split.tensors.count = ", keys.tensors, " but the file holds ",
                           first.info.n_tensors, " tensors");
    }
    MOESPLIT_RETURN_IF_ERROR(AddShard(f.get(), std::move(first), 0, SplitKeys{}));
    MOESPLIT_RETURN_IF_ERROR(BuildIndex(f.get()));
    return f;
  }
  MOESPLIT_ASSIGN_OR_RETURN(std::vector<std::string> paths, ShardPaths(path, keys));
  for (size_t i = 0; i < paths.size(); ++i) {
    if (i == keys.no) {
      MOESPLIT_RETURN_IF_ERROR(AddShard(f.get(), std::move(first), static_cast<int>(i), keys));
      continue;
    }
    StatusOr<ParsedGguf> g = MapAndParse(f.get(), paths[i], opt);
    if (!g.ok() && g.status().code() == StatusCode::kNotFound) {
      return NotFoundError(path, ": shard ", i + 1, " of ", keys.count, " is missing: ", paths[i],
                           " does not exist");
    }
    if (!g.ok()) return g.status();
    MOESPLIT_RETURN_IF_ERROR(AddShard(f.get(), std::move(*g), static_cast<int>(i), keys));
  }
  if (f->tensors_.size() != keys.tensors) {
    return DataLossError(path, ": split.tensors.count = ", keys.tensors, " but the ", keys.count,
                         " shards hold ", f->tensors_.size(), " tensors");
  }
  MOESPLIT_RETURN_IF_ERROR(BuildIndex(f.get()));
  return f;
}

StatusOr<std::unique_ptr<GgufFile>> GgufFile::Open(const std::string& path,
                                                   const OpenOptions& options) {
  return GgufParser::Open(path, options);
}

GgufFile::~GgufFile() = default;

const Value* GgufFile::Find(std::string_view key) const {
  auto it = kv_index_.find(key);
  return it == kv_index_.end() ? nullptr : &metadata_[it->second].value;
}

namespace {

template <typename T>
StatusOr<T> Typed(const GgufFile& f, std::string_view key, StatusOr<T> (Value::*get)() const) {
  const Value* v = f.Find(key);
  if (v == nullptr) return NotFoundError(f.path(), ": metadata key '", key, "' not found");
  StatusOr<T> r = (v->*get)();
  if (!r.ok()) return r.status().WithContext(StrCat(f.path(), ": metadata key '", key, "'"));
  return r;
}

}  // namespace

StatusOr<uint64_t> GgufFile::GetUint(std::string_view key) const {
  return Typed(*this, key, &Value::AsUint);
}
StatusOr<int64_t> GgufFile::GetInt(std::string_view key) const {
  return Typed(*this, key, &Value::AsInt);
}
StatusOr<double> GgufFile::GetFloat(std::string_view key) const {
  return Typed(*this, key, &Value::AsFloat);
}
StatusOr<bool> GgufFile::GetBool(std::string_view key) const {
  return Typed(*this, key, &Value::AsBool);
}
StatusOr<std::string> GgufFile::GetString(std::string_view key) const {
  MOESPLIT_ASSIGN_OR_RETURN(std::string_view s, Typed(*this, key, &Value::AsString));
  return std::string(s);
}
StatusOr<const Array*> GgufFile::GetArray(std::string_view key) const {
  return Typed(*this, key, &Value::AsArray);
}

std::string GgufFile::architecture() const {
  StatusOr<std::string> s = GetString("general.architecture");
  return s.ok() ? *s : std::string();
}

const TensorInfo* GgufFile::FindTensor(std::string_view name) const {
  auto it = tensor_index_.find(name);
  return it == tensor_index_.end() ? nullptr : &tensors_[it->second];
}

uint64_t GgufFile::total_file_bytes() const {
  uint64_t n = 0;
  for (const ShardInfo& s : shards_) n += s.file_size;
  return n;
}

// "dir/model-00002-of-00009.gguf": the 20-byte suffix "-NNNNN-of-MMMMM.gguf" with 5 digits each.
std::optional<SplitName> ParseSplitName(const std::string& path) {
  constexpr std::string_view kShape = "-00000-of-00000.gguf";
  if (path.size() < kShape.size()) return std::nullopt;
  const std::string_view tail = std::string_view(path).substr(path.size() - kShape.size());
  int no = 0, count = 0;
  for (size_t i = 0; i < kShape.size(); ++i) {
    const char c = tail[i];
    if (kShape[i] == '0') {
      if (c < '0' || c > '9') return std::nullopt;
      int& target = i < 6 ? no : count;
      target = target * 10 + (c - '0');
    } else if (c != kShape[i]) {
      return std::nullopt;
    }
  }
  if (no < 1 || count < 1 || no > count) return std::nullopt;
  return SplitName{path.substr(0, path.size() - kShape.size()), no, count};
}

std::string MakeSplitPath(const std::string& prefix, int no, int count) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "-%05d-of-%05d.gguf", no, count);
  return prefix + buf;
}

void GgufFile::Prefault() const {
#ifndef MADV_POPULATE_READ
#define MADV_POPULATE_READ 22  // Linux 5.14 uapi value; older kernels return EINVAL
#endif
  for (const std::unique_ptr<Mapping>& m : mappings_) {
    if (m->size == 0) continue;
    void* p = const_cast<uint8_t*>(m->data);
    ::madvise(p, m->size, MADV_POPULATE_READ);  // page tables (or EINVAL before Linux 5.14)
    // And one read per page either way: under a hypervisor the guest's page tables can say
    // "present" while the host has reclaimed or remapped an idle guest's memory, and the first
    // access then pays a host fault. Measured on the 2-vCPU dev VM after 45 s idle, tg64 -r 4,
    // first repetition: 15.3 and 8.2 t/s with the madvise alone (the others ~21), 20.8 and 29.8
    // with this loop (its neighbours 21-28).
    volatile uint8_t sink = 0;
    for (uint64_t off = 0; off < m->size; off += 4096) sink = sink ^ m->data[off];
  }
}

}  // namespace moesplit::gguf
