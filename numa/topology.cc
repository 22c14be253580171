#include "numa/topology.h"

#include <hwloc.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <sstream>
#include <string_view>

#include "numa/xml_check.h"

namespace moesplit::numa {

// ---- Plain-data queries ------------------------------------------------------------------

int NumaNode::NumCores() const {
  int n = 0;
  for (const L3Group& g : l3_groups) n += static_cast<int>(g.cores.size());
  return n;
}

std::vector<int> NumaNode::Cpus() const {
  std::vector<int> cpus;
  for (const L3Group& g : l3_groups) {
    for (const Core& c : g.cores) cpus.insert(cpus.end(), c.pus.begin(), c.pus.end());
  }
  std::sort(cpus.begin(), cpus.end());
  return cpus;
}

std::vector<int> NumaNode::PrimaryCpus() const {
  std::vector<int> cpus;
  for (const L3Group& g : l3_groups) {
    for (const Core& c : g.cores) {
      if (!c.pus.empty()) cpus.push_back(c.pus.front());
    }
  }
  std::sort(cpus.begin(), cpus.end());
  return cpus;
}

std::vector<int> NumaNode::SiblingCpus() const {
  std::vector<int> cpus;
  for (const L3Group& g : l3_groups) {
    for (const Core& c : g.cores) {
      if (c.pus.size() > 1) cpus.insert(cpus.end(), c.pus.begin() + 1, c.pus.end());
    }
  }
  std::sort(cpus.begin(), cpus.end());
  return cpus;
}

std::vector<int> NumaNode::CoresFirstCpus() const {
  std::vector<int> cpus = PrimaryCpus();
  const std::vector<int> siblings = SiblingCpus();
  cpus.insert(cpus.end(), siblings.begin(), siblings.end());
  return cpus;
}

int Topology::NumCores() const {
  int n = 0;
  for (const NumaNode& node : nodes) n += node.NumCores();
  return n;
}

int Topology::NumPus() const {
  int n = 0;
  for (const NumaNode& node : nodes) n += static_cast<int>(node.Cpus().size());
  return n;
}

uint64_t Topology::MemoryBytes() const {
  uint64_t n = 0;
  for (const NumaNode& node : nodes) n += node.memory_bytes;
  return n;
}

int Topology::Distance(int a, int b) const {
  const int n = static_cast<int>(nodes.size());
  MOESPLIT_CHECK(a >= 0 && a < n && b >= 0 && b < n, "node indices ", a, ", ", b, " of ", n);
  if (distances.size() == static_cast<size_t>(n) * n) return distances[a * n + b];
  if (a == b) return 10;
  return nodes[a].package == nodes[b].package ? 20 : 32;
}

int Topology::NodeIndex(int id) const {
  for (size_t i = 0; i < nodes.size(); ++i) {
    if (nodes[i].id == id) return static_cast<int>(i);
  }
  return -1;
}

// ---- Loading with hwloc ----------------------------------------------------------------

namespace {

struct TopologyCloser {
  void operator()(hwloc_topology* t) const { hwloc_topology_destroy(t); }
};
using TopologyHandle = std::unique_ptr<hwloc_topology, TopologyCloser>;

struct BitmapFree {
  void operator()(hwloc_bitmap_s* b) const { hwloc_bitmap_free(b); }
};
using Bitmap = std::unique_ptr<hwloc_bitmap_s, BitmapFree>;

// os_index, or the logical index when the source did not give one (HWLOC_UNKNOWN_INDEX).
int OsIndex(hwloc_obj_t obj) {
  return obj->os_index == HWLOC_UNKNOWN_INDEX ? static_cast<int>(obj->logical_index)
                                              : static_cast<int>(obj->os_index);
}

// A spec that names a file rather than describing a machine: a path separator or an .xml
// ending. Synthetic descriptions contain neither ("pack:2 numa:4 core:8 pu:2(indexes=...)").
bool LooksLikePath(const std::string& spec) {
  return spec.find('/') != std::string::npos ||
         (spec.size() >= 4 && spec.compare(spec.size() - 4, 4, ".xml") == 0);
}

// The largest machine a synthetic description may describe: 4,096 hardware threads is 2x the
// largest single-image servers sold today (8 sockets x 128 cores x 2 threads = 2,048). hwloc
// itself takes "pack:3 numa:20 l3:21 core:7 pu:2" (17,640 PUs) and spends seconds building it,
// and "pack:999 core:999 pu:999" would not fit in memory.
constexpr int64_t kMaxSyntheticPus = 4096;

// The number of leaves `spec` may describe, counted the way hwloc 2.9 reads it or more: hwloc
// takes a level's count with strtoul(base 0) right after the ':' that ends the type token,
// whatever the token holds ("numa:20l3#:21" is 20 NUMA nodes, then 21 L3s; "co(x:2" is 2
// cores), or as a bare number ("2 4 8"). So every number counts, read as strtoul would (hex
// "0x1000" is 4,096), except digits that end a type name ("l3", "l1i", "group0") and those in
// attributes: a closed "(...)" right after a count or inside an attached-memory "[...]"
// ("core:8(indexes=...)", "[numa(memory=1GB)]"). A minus sign (strtoul wraps "-1" to 2^64-1)
// saturates. Saturates past the cap, so the product cannot overflow.
int64_t SyntheticLeaves(const std::string& spec) {
  constexpr int64_t kSaturated = kMaxSyntheticPus + 1;
  int64_t leaves = 1;
  int brackets = 0;  // attached-memory nesting
  for (size_t i = 0; i < spec.size();) {
    const char c = spec[i];
    const unsigned char prev = i > 0 ? static_cast<unsigned char>(spec[i - 1]) : ' ';
    if (c == '[') ++brackets;
    if (c == ']' && brackets > 0) --brackets;
    if (c == '(' && brackets > 0) {  // "[numa(memory=1GB)]"
      const size_t close = spec.find(')', i);
      if (close != std::string::npos) {
        i = close + 1;
        continue;
      }
    }
    if (!std::isdigit(static_cast<unsigned char>(c)) || std::isalpha(prev)) {
      ++i;
      continue;
    }
    if (prev == '-') return kSaturated;
    const bool hex = c == '0' && i + 2 < spec.size() && (spec[i + 1] | 0x20) == 'x' &&
                     std::isxdigit(static_cast<unsigned char>(spec[i + 2]));
    const int base = hex ? 16 : 10;
    if (hex) i += 2;
    int64_t n = 0;
    for (; i < spec.size(); ++i) {
      const unsigned char d = static_cast<unsigned char>(spec[i]);
      if (hex ? !std::isxdigit(d) : !std::isdigit(d)) break;
      const int v = std::isdigit(d) ? d - '0' : (d | 0x20) - 'a' + 10;
      n = std::min<int64_t>(n * base + v, kSaturated);
    }
    leaves = std::min<int64_t>(leaves * std::max<int64_t>(n, 1), kSaturated);
    // The count's attributes, "core:8(indexes=...)": only right after the count, as hwloc
    // reads them. A '(' after a type name ("numa(:999") is part of the type token.
    if (i < spec.size() && spec[i] == '(') {
      const size_t close = spec.find(')', i);
      if (close != std::string::npos) i = close + 1;
    }
  }
  return leaves;
}

// The largest OS index an "indexes=" list may give: hwloc sizes a bitmap by it (an index of
// 10^55, saturated, took 2 GB in the fuzzer). 65,535 is far past any real CPU or node id.
constexpr uint64_t kMaxSyntheticIndex = 65535;

// The first number in an "indexes=..." attribute of `spec` above kMaxSyntheticIndex, if any.
std::optional<std::string> OversizedSyntheticIndex(const std::string& spec) {
  for (size_t at = spec.find("indexes="); at != std::string::npos;
       at = spec.find("indexes=", at + 1)) {
    const size_t end = std::min(spec.find(')', at), spec.size());
    for (size_t i = at + 8; i < end;) {
      if (!std::isdigit(static_cast<unsigned char>(spec[i]))) {
        ++i;
        continue;
      }
      const size_t first = i;
      uint64_t v = 0;
      for (; i < end && std::isdigit(static_cast<unsigned char>(spec[i])); ++i) {
        v = std::min<uint64_t>(v * 10 + static_cast<uint64_t>(spec[i] - '0'),
                               kMaxSyntheticIndex + 1);
      }
      if (v > kMaxSyntheticIndex) return spec.substr(first, std::min<size_t>(i - first, 24));
    }
  }
  return std::nullopt;
}

// Hands `text` (which must outlive hwloc_topology_load) to hwloc as the XML to load.
Status SetXmlText(hwloc_topology_t topo, const std::string& text, const std::string& name) {
  // hwloc reads up to the first NUL and wants the length with it (c_str() has one at the end).
  const size_t len = std::min(text.find('\0'), text.size());
  if (len >= static_cast<size_t>(std::numeric_limits<int>::max())) {
    return DataLossError("topology ", name, ": ", len, " bytes is too large for an hwloc XML");
  }
  // hwloc 2.9 crashes on some damaged files instead of failing (numa/xml_check.h).
  MOESPLIT_RETURN_IF_ERROR(CheckHwlocXml(std::string_view(text).substr(0, len), name));
  if (hwloc_topology_set_xmlbuffer(topo, text.c_str(), static_cast<int>(len + 1)) != 0) {
    return DataLossError("topology ", name, ": hwloc cannot read it as XML (", std::strerror(errno),
                         ")");
  }
  return Status::Ok();
}

// Points the (initialized, not yet loaded) topology at `spec` and loads it.
Status LoadHwloc(hwloc_topology_t topo, const std::string& spec, std::string* source) {
  std::error_code ec;
  std::string xml_text;  // an XML file's text, read by hwloc_topology_load below
  if (spec.empty()) {
    *source = "live";
  } else if (std::filesystem::is_regular_file(spec, ec)) {
    *source = "xml:" + spec;
    std::ifstream f(spec, std::ios::binary);
    if (!f) return NotFoundError("topology ", spec, ": cannot open it");
    xml_text.assign(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
    MOESPLIT_RETURN_IF_ERROR(SetXmlText(topo, xml_text, spec));
  } else if (LooksLikePath(spec)) {
    return NotFoundError("topology ", spec, ": no such file (expected an hwloc XML export, ",
                         "e.g. `lstopo ", spec, "`, or a synthetic description such as ",
                         "\"pack:2 numa:4 core:8 pu:2\")");
  } else {
    *source = "synthetic:" + spec;
    if (SyntheticLeaves(spec) > kMaxSyntheticPus) {
      return InvalidArgumentError("topology \"", spec, "\": describes more than ", kMaxSyntheticPus,
                                  " hardware threads (the product of the ",
                                  "level counts); describe one machine, e.g. ",
                                  "\"pack:2 numa:4 core:24 pu:2\"");
    }
    if (const std::optional<std::string> big = OversizedSyntheticIndex(spec)) {
      return InvalidArgumentError("topology \"", spec, "\": index ", *big, " in indexes= is ",
                                  "past ", kMaxSyntheticIndex, "; OS indexes are CPU or node ids");
    }
    if (hwloc_topology_set_synthetic(topo, spec.c_str()) != 0) {
      return InvalidArgumentError("topology \"", spec, "\": not a valid hwloc synthetic ",
                                  "description (", std::strerror(errno), "); expected levels ",
                                  "like \"pack:2 numa:4 l3:2(size=32MiB) core:8 pu:2\", and a ",
                                  "file that does not exist is not read as XML");
    }
  }
  // PCI / OS devices are not needed and are slow to enumerate on a live machine.
  hwloc_topology_set_io_types_filter(topo, HWLOC_TYPE_FILTER_KEEP_NONE);
  if (hwloc_topology_load(topo) != 0) {
    const std::string why = std::strerror(errno);
    if (spec.empty()) return IoError("live topology: hwloc could not load it (", why, ")");
    if (source->rfind("xml:", 0) == 0) {
      return DataLossError("topology ", spec, ": broken or truncated hwloc XML (", why,
                           "); re-export it with `lstopo FILE.xml`");
    }
    return InvalidArgumentError("topology \"", spec, "\": hwloc rejected the synthetic ",
                                "description (", why, ")");
  }
  return Status::Ok();
}

// The hardware threads of one node, grouped by L3 and core, in hwloc's logical order.
// `avail`: the PUs of the node not already given to an earlier node. An L3 that spans several
// nodes (Intel SNC reports one L3 per package) is split in proportion to the cores each node
// holds — with SNC each cluster's addresses are homed in its own L3 slices — e.g. 105 MiB over
// 56 cores, 14 in the node: 105 * 14 / 56 = 26.25 MiB.
// `pus`: every PU of the machine in logical order, tested here by one bit each: hwloc's walk
// inside a cpuset compares whole bitmaps per PU, which made a 1,752-node synthetic machine take
// seconds (nodes x PUs bitmap compares; found by topology_fuzz).
std::vector<L3Group> GroupCores(hwloc_topology_t topo, const std::vector<hwloc_obj_t>& pus,
                                hwloc_const_cpuset_t avail) {
  std::vector<L3Group> groups;
  std::map<hwloc_obj_t, size_t> group_of;  // L3 object (nullptr: none) -> index in groups
  std::map<hwloc_obj_t, std::pair<size_t, size_t>> core_of;  // core -> (group, index)
  for (hwloc_obj_t pu : pus) {
    if (!hwloc_bitmap_isset(avail, pu->os_index)) continue;
    hwloc_obj_t core = hwloc_get_ancestor_obj_by_type(topo, HWLOC_OBJ_CORE, pu);
    if (core == nullptr) core = pu;  // no core level: every PU is its own core
    // A core joins the group of its first PU's L3 and stays there: in odd (synthetic) machines
    // an L3 sits below the core, so its later PUs name another L3 (found by topology_fuzz).
    auto c = core_of.find(core);
    if (c == core_of.end()) {
      hwloc_obj_t l3 = hwloc_get_ancestor_obj_by_type(topo, HWLOC_OBJ_L3CACHE, pu);
      auto [g, new_group] = group_of.emplace(l3, groups.size());
      if (new_group) groups.emplace_back();
      std::vector<Core>& cores = groups[g->second].cores;
      c = core_of.emplace(core, std::make_pair(g->second, cores.size())).first;
      cores.push_back(Core{static_cast<int>(core->logical_index), {}});
    }
    groups[c->second.first].cores[c->second.second].pus.push_back(OsIndex(pu));
  }
  for (auto& [l3, g] : group_of) {
    for (Core& c : groups[g].cores) std::sort(c.pus.begin(), c.pus.end());
    if (l3 == nullptr || l3->attr == nullptr) continue;
    // Cores under this L3 in the whole machine vs in this node: [cores].
    const int l3_cores =
        std::max(1, hwloc_get_nbobjs_inside_cpuset_by_type(topo, l3->cpuset, HWLOC_OBJ_CORE));
    const int mine = static_cast<int>(groups[g].cores.size());
    const uint64_t size = l3->attr->cache.size;
    groups[g].l3_bytes = mine >= l3_cores ? size : size / l3_cores * mine;
  }
  return groups;
}

// Copies the NUMA latency matrix when it covers every node; leaves it empty otherwise.
void ReadDistances(hwloc_topology_t topo, Topology* out) {
  unsigned nr = 1;
  hwloc_distances_s* d = nullptr;
  if (hwloc_distances_get_by_type(topo, HWLOC_OBJ_NUMANODE, &nr, &d,
                                  HWLOC_DISTANCES_KIND_MEANS_LATENCY, 0) != 0 ||
      nr == 0 || d == nullptr) {
    return;
  }
  const size_t n = out->nodes.size();
  std::vector<int> index(d->nbobjs, -1);  // [nbobjs] matrix row -> index into out->nodes
  for (unsigned i = 0; i < d->nbobjs; ++i) {
    if (d->objs[i] != nullptr) index[i] = out->NodeIndex(OsIndex(d->objs[i]));
  }
  std::vector<int> m(n * n, -1);  // [n x n] row-major
  for (unsigned i = 0; i < d->nbobjs; ++i) {
    for (unsigned j = 0; j < d->nbobjs; ++j) {
      if (index[i] < 0 || index[j] < 0) continue;
      m[index[i] * n + index[j]] = static_cast<int>(d->values[i * d->nbobjs + j]);
    }
  }
  hwloc_distances_release(topo, d);
  if (std::find(m.begin(), m.end(), -1) == m.end()) out->distances = std::move(m);
}

// Node and CPU ids are what numactl, mbind and sched_setaffinity are given: a (hand-edited or
// damaged) XML file that repeats one, or whose index does not fit an int, would pin two workers
// to one CPU or place memory on the wrong node.
Status CheckIds(const Topology& t, const std::string& what) {
  std::set<int> cpus;
  for (size_t i = 0; i < t.nodes.size(); ++i) {
    const int id = t.nodes[i].id;
    if (id < 0 || (i > 0 && t.nodes[i - 1].id == id)) {
      return DataLossError("topology ", what, ": NUMA node os_index ", id,
                           id < 0 ? " is out of range" : " appears twice");
    }
    for (int cpu : t.nodes[i].Cpus()) {
      if (cpu < 0 || !cpus.insert(cpu).second) {
        return DataLossError("topology ", what, ": PU os_index ", cpu,
                             cpu < 0 ? " is out of range" : " appears twice");
      }
    }
  }
  return Status::Ok();
}

StatusOr<Topology> Extract(hwloc_topology_t topo, const std::string& spec, std::string source) {
  Topology out;
  out.source = std::move(source);
  // Packages in logical order; a source without package objects is one package.
  std::vector<hwloc_obj_t> pkgs;
  for (hwloc_obj_t p = nullptr; (p = hwloc_get_next_obj_by_type(topo, HWLOC_OBJ_PACKAGE, p));) {
    pkgs.push_back(p);
    out.packages.push_back(Package{OsIndex(p), {}});
  }
  if (out.packages.empty()) out.packages.push_back(Package{0, {}});
  hwloc_obj_t info_obj = pkgs.empty() ? hwloc_get_root_obj(topo) : pkgs.front();
  if (const char* model = hwloc_obj_get_info_by_name(info_obj, "CPUModel")) out.cpu_model = model;

  std::vector<hwloc_obj_t> numa;
  for (hwloc_obj_t n = nullptr; (n = hwloc_get_next_obj_by_type(topo, HWLOC_OBJ_NUMANODE, n));) {
    numa.push_back(n);
  }
  std::sort(numa.begin(), numa.end(),
            [](hwloc_obj_t a, hwloc_obj_t b) { return OsIndex(a) < OsIndex(b); });
  // Each PU goes to the first node (ascending id) whose cpuset holds it: a second node with the
  // same CPUs (HBM next to DDR, CXL) is memory-only here.
  std::vector<hwloc_obj_t> pus;  // [PUs] in logical order
  for (hwloc_obj_t pu = nullptr; (pu = hwloc_get_next_obj_by_type(topo, HWLOC_OBJ_PU, pu));) {
    pus.push_back(pu);
  }
  Bitmap assigned(hwloc_bitmap_alloc());
  Bitmap avail(hwloc_bitmap_alloc());
  for (hwloc_obj_t n : numa) {
    NumaNode node;
    node.id = OsIndex(n);
    node.memory_bytes = n->attr != nullptr ? n->attr->numanode.local_memory : 0;
    hwloc_obj_t pkg = hwloc_get_ancestor_obj_by_type(topo, HWLOC_OBJ_PACKAGE, n);
    if (pkg == nullptr && n->cpuset != nullptr) {
      pkg = hwloc_get_next_obj_covering_cpuset_by_type(topo, n->cpuset, HWLOC_OBJ_PACKAGE, nullptr);
    }
    const auto it = std::find(pkgs.begin(), pkgs.end(), pkg);
    node.package = it == pkgs.end() ? 0 : static_cast<int>(it - pkgs.begin());
    if (n->cpuset != nullptr) {
      hwloc_bitmap_andnot(avail.get(), n->cpuset, assigned.get());
      node.l3_groups = GroupCores(topo, pus, avail.get());
      hwloc_bitmap_or(assigned.get(), assigned.get(), avail.get());
    }
    out.nodes.push_back(std::move(node));
  }
  for (size_t i = 0; i < out.nodes.size(); ++i) {
    out.packages[out.nodes[i].package].nodes.push_back(static_cast<int>(i));
  }
  if (out.NumPus() == 0) {
    return DataLossError("topology ", spec.empty() ? "live" : spec, ": no NUMA node has any CPU (",
                         out.nodes.size(), " nodes)");
  }
  const int all_pus = static_cast<int>(pus.size());
  if (out.NumPus() != all_pus) {
    return DataLossError("topology ", spec.empty() ? "live" : spec, ": ", all_pus - out.NumPus(),
                         " of ", all_pus, " PUs are in no NUMA node");
  }
  MOESPLIT_RETURN_IF_ERROR(CheckIds(out, spec.empty() ? "live" : spec));
  ReadDistances(topo, &out);
  return out;
}

}  // namespace

StatusOr<Topology> LoadTopology(const std::string& spec) {
  hwloc_topology_t raw = nullptr;
  if (hwloc_topology_init(&raw) != 0) {
    return InternalError("hwloc_topology_init failed: ", std::strerror(errno));
  }
  TopologyHandle topo(raw);
  std::string source;
  MOESPLIT_RETURN_IF_ERROR(LoadHwloc(topo.get(), spec, &source));
  return Extract(topo.get(), spec, std::move(source));
}

StatusOr<Topology> LoadTopologyXml(std::string_view xml, const std::string& name) {
  hwloc_topology_t raw = nullptr;
  if (hwloc_topology_init(&raw) != 0) {
    return InternalError("hwloc_topology_init failed: ", std::strerror(errno));
  }
  TopologyHandle topo(raw);
  const std::string text(xml);
  MOESPLIT_RETURN_IF_ERROR(SetXmlText(topo.get(), text, name));
  hwloc_topology_set_io_types_filter(topo.get(), HWLOC_TYPE_FILTER_KEEP_NONE);
  if (hwloc_topology_load(topo.get()) != 0) {
    return DataLossError("topology ", name, ": broken or truncated hwloc XML (",
                         std::strerror(errno), ")");
  }
  return Extract(topo.get(), name, "xml:" + name);
}

// ---- Printing ----------------------------------------------------------------------------

namespace {

std::string Fixed(double v, int decimals) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.*f", decimals, v);
  return buf;
}

std::string GiB(uint64_t bytes) {
  return Fixed(static_cast<double>(bytes) / (1 << 30), 1) + " GiB";
}

// "32 MiB", "26.25 MiB": L3 sizes are whole or quarter MiB on the machines we know.
std::string MiB(uint64_t bytes) {
  const double mib = static_cast<double>(bytes) / (1 << 20);
  return (mib == static_cast<int64_t>(mib) ? Fixed(mib, 0) : Fixed(mib, 2)) + " MiB";
}

// "2 PUs per core" / "1-2 PUs per core" (hybrid or partly offlined SMT).
std::string SmtText(const std::vector<L3Group>& groups) {
  size_t lo = SIZE_MAX, hi = 0;
  for (const L3Group& g : groups) {
    for (const Core& c : g.cores) {
      lo = std::min(lo, c.pus.size());
      hi = std::max(hi, c.pus.size());
    }
  }
  if (hi == 0) return "no CPUs";
  const std::string n = lo == hi ? std::to_string(hi) : StrCat(lo, "-", hi);
  return n + (hi == 1 && lo == 1 ? " PU per core" : " PUs per core");
}

void FormatNode(const NumaNode& node, std::ostringstream& os) {
  os << "    node " << node.id << ": " << GiB(node.memory_bytes);
  if (node.l3_groups.empty()) {
    os << ", memory only (no CPUs)\n";
    return;
  }
  const std::vector<int> cpus = node.Cpus();
  os << ", " << node.NumCores() << " cores, " << cpus.size() << " PUs (" << SmtText(node.l3_groups)
     << "), cpus " << FormatCpuList(cpus) << "\n";
  for (const L3Group& g : node.l3_groups) {
    std::vector<int> gcpus;
    for (const Core& c : g.cores) gcpus.insert(gcpus.end(), c.pus.begin(), c.pus.end());
    os << "      L3 " << (g.l3_bytes > 0 ? MiB(g.l3_bytes) : std::string("(size unknown)")) << ": "
       << g.cores.size() << " cores, cpus " << FormatCpuList(gcpus) << "\n";
  }
}

// Right-aligns `s` in `width` columns.
std::string Pad(const std::string& s, size_t width) {
  return std::string(width > s.size() ? width - s.size() : 0, ' ') + s;
}

// The most nodes whose distance matrix is printed (64 columns of 4: 262 characters a line).
// Past it the matrix is summarized: 1,752 synthetic nodes printed 12 MB (found by
// topology_fuzz), and no one reads a 100-column matrix.
constexpr int kMaxPrintedDistanceNodes = 64;

void FormatDistances(const Topology& topo, std::ostringstream& os) {
  const int n = static_cast<int>(topo.nodes.size());
  os << (topo.distances.empty() ? "distances (none in the source; assumed 10 local, 20 same "
                                  "package, 32 other package)"
                                : "distances (ACPI SLIT, 10 = local)");
  if (n > kMaxPrintedDistanceNodes) {
    int lo = std::numeric_limits<int>::max(), hi = 0;
    for (int i = 0; i < n; ++i) {
      for (int j = 0; j < n; ++j) {
        if (i == j) continue;
        const int d = topo.Distance(i, j);
        lo = std::min(lo, d);
        hi = std::max(hi, d);
      }
    }
    os << ": " << n << " x " << n << " matrix not printed (more than " << kMaxPrintedDistanceNodes
       << " nodes); between nodes " << lo << "-" << hi << "\n";
    return;
  }
  os << ":\n";
  os << "  node";
  for (int j = 0; j < n; ++j) os << Pad(std::to_string(topo.nodes[j].id), 4);
  os << "\n";
  for (int i = 0; i < n; ++i) {
    os << Pad(std::to_string(topo.nodes[i].id), 6);
    for (int j = 0; j < n; ++j) os << Pad(std::to_string(topo.Distance(i, j)), 4);
    os << "\n";
  }
}

}  // namespace

std::string FormatTopology(const Topology& topo) {
  std::ostringstream os;
  os << "topology: " << topo.source << "\n";
  if (!topo.cpu_model.empty()) os << "cpu: " << topo.cpu_model << "\n";
  os << "machine: " << topo.packages.size() << " package(s), " << topo.nodes.size()
     << " NUMA node(s), " << topo.NumCores() << " cores, " << topo.NumPus() << " PUs, "
     << GiB(topo.MemoryBytes()) << "\n";
  for (size_t p = 0; p < topo.packages.size(); ++p) {
    const Package& pkg = topo.packages[p];
    std::vector<int> ids;
    for (int i : pkg.nodes) ids.push_back(topo.nodes[i].id);
    os << "  package " << pkg.id << ": node(s) " << FormatCpuList(ids) << "\n";
    for (int i : pkg.nodes) FormatNode(topo.nodes[i], os);
  }
  FormatDistances(topo, os);
  return os.str();
}

// ---- CPU lists ---------------------------------------------------------------------------

std::string FormatCpuList(const std::vector<int>& ids) {
  std::vector<int> v = ids;
  std::sort(v.begin(), v.end());
  v.erase(std::unique(v.begin(), v.end()), v.end());
  std::string s;
  for (size_t i = 0; i < v.size();) {
    size_t j = i;
    while (j + 1 < v.size() && v[j + 1] == v[j] + 1) ++j;
    if (!s.empty()) s += ',';
    s += std::to_string(v[i]);
    if (j > i) {
      s += '-';
      s += std::to_string(v[j]);
    }
    i = j + 1;
  }
  return s;
}

namespace {

// Largest id accepted: Linux's CONFIG_NR_CPUS tops out at 8192; a typo like "0-40000000" must
// not allocate a billion ints.
constexpr int64_t kMaxCpuId = (int64_t{1} << 16) - 1;

// Parses one non-negative decimal id, whitespace around it allowed.
bool ParseId(std::string_view s, int64_t* v) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  if (s.empty() || s.size() > 9) return false;
  int64_t x = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return false;
    x = x * 10 + (c - '0');
  }
  *v = x;
  return true;
}

}  // namespace

StatusOr<std::vector<int>> ParseCpuList(const std::string& text) {
  std::vector<int> ids;
  std::string_view rest = text;
  if (rest.find_first_not_of(" \t") == std::string_view::npos) return ids;  // "" = none
  while (true) {
    const size_t comma = rest.find(',');
    const std::string_view item = rest.substr(0, comma);
    const size_t dash = item.find('-');
    int64_t lo = 0, hi = 0;
    const bool ok = dash == std::string_view::npos
                        ? ParseId(item, &lo) && ParseId(item, &hi)
                        : ParseId(item.substr(0, dash), &lo) && ParseId(item.substr(dash + 1), &hi);
    if (!ok || lo > hi || hi > kMaxCpuId) {
      return InvalidArgumentError("cpu list \"", text, "\": bad item \"", item, "\" (expected ",
                                  "ids or ranges like \"0-3,8,10-11\", ids 0..", kMaxCpuId,
                                  ", ranges low-high)");
    }
    for (int64_t i = lo; i <= hi; ++i) ids.push_back(static_cast<int>(i));
    if (comma == std::string_view::npos) break;
    rest.remove_prefix(comma + 1);
  }
  std::sort(ids.begin(), ids.end());
  ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
  return ids;
}

}  // namespace moesplit::numa
