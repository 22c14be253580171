// Topology loading (live, synthetic, every XML in configs/topologies/), its invariants, clear
// errors — never a crash — on bad specs, and CPU-list formatting / parsing.
#include "numa/topology.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <set>
#include <string>

namespace moesplit::numa {
namespace {

const std::string kTopologies = std::string(MOESPLIT_SOURCE_DIR) + "/configs/topologies";

// Every structural promise of topology.h, for any loaded machine.
void CheckInvariants(const Topology& t) {
  SCOPED_TRACE(t.source);
  ASSERT_FALSE(t.nodes.empty());
  ASSERT_FALSE(t.packages.empty());
  std::set<int> pus;
  int total = 0;
  for (size_t i = 0; i < t.nodes.size(); ++i) {
    const NumaNode& n = t.nodes[i];
    if (i > 0) {
      EXPECT_LT(t.nodes[i - 1].id, n.id) << "nodes ascending by id";
    }
    EXPECT_EQ(t.NodeIndex(n.id), static_cast<int>(i));
    ASSERT_GE(n.package, 0);
    ASSERT_LT(n.package, static_cast<int>(t.packages.size()));
    const std::vector<int>& in_pkg = t.packages[n.package].nodes;
    EXPECT_NE(std::find(in_pkg.begin(), in_pkg.end(), static_cast<int>(i)), in_pkg.end());
    for (const L3Group& g : n.l3_groups) {
      EXPECT_FALSE(g.cores.empty());
      for (const Core& c : g.cores) {
        ASSERT_FALSE(c.pus.empty());
        EXPECT_TRUE(std::is_sorted(c.pus.begin(), c.pus.end()));
        for (int pu : c.pus) EXPECT_TRUE(pus.insert(pu).second) << "PU " << pu << " twice";
        total += static_cast<int>(c.pus.size());
      }
    }
    EXPECT_EQ(n.PrimaryCpus().size(), static_cast<size_t>(n.NumCores()));
  }
  EXPECT_EQ(total, t.NumPus());
  const int n = static_cast<int>(t.nodes.size());
  if (!t.distances.empty()) {
    ASSERT_EQ(t.distances.size(), static_cast<size_t>(n * n));
  }
  for (int a = 0; a < n; ++a) {
    EXPECT_EQ(t.Distance(a, a), 10);
    for (int b = 0; b < n; ++b) {
      EXPECT_EQ(t.Distance(a, b), t.Distance(b, a)) << "symmetric";
      if (a != b) {
        EXPECT_GT(t.Distance(a, b), 10);
      }
    }
  }
}

TEST(Topology, LiveMachineLoads) {
  StatusOr<Topology> t = LoadTopology("");
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  EXPECT_EQ(t->source, "live");
  CheckInvariants(*t);
  EXPECT_GE(t->NumCores(), 1);
  EXPECT_NE(FormatTopology(*t).find("node " + std::to_string(t->nodes[0].id)), std::string::npos);
}

TEST(Topology, SyntheticCounts) {
  StatusOr<Topology> t = LoadTopology("pack:2 numa:2 l3:2 core:4 pu:2");
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  CheckInvariants(*t);
  EXPECT_EQ(t->source, "synthetic:pack:2 numa:2 l3:2 core:4 pu:2");
  EXPECT_EQ(t->packages.size(), 2u);
  ASSERT_EQ(t->nodes.size(), 4u);
  EXPECT_EQ(t->NumCores(), 2 * 2 * 2 * 4);
  EXPECT_EQ(t->NumPus(), 64);
  for (const NumaNode& n : t->nodes) {
    EXPECT_EQ(n.l3_groups.size(), 2u);
    EXPECT_EQ(n.NumCores(), 8);
    EXPECT_GT(n.l3_groups[0].l3_bytes, 0u);  // hwloc gives synthetic caches a default size
  }
  EXPECT_EQ(t->nodes[1].package, 0);
  EXPECT_EQ(t->nodes[2].package, 1);
  // No distances in a plain synthetic string: the documented defaults.
  EXPECT_TRUE(t->distances.empty());
  EXPECT_EQ(t->Distance(0, 1), 20);
  EXPECT_EQ(t->Distance(0, 2), 32);
}

TEST(Topology, SyntheticWithoutCoresOrCaches) {
  StatusOr<Topology> t = LoadTopology("pack:1 pu:3");
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  CheckInvariants(*t);
  ASSERT_EQ(t->nodes.size(), 1u);
  ASSERT_EQ(t->nodes[0].l3_groups.size(), 1u);
  EXPECT_EQ(t->nodes[0].l3_groups[0].l3_bytes, 0u);
  EXPECT_EQ(t->NumCores(), 3);  // every PU is its own core
}

// An L3 below the core (found by topology_fuzz: "pack:1 numa:3 l3:2 core:3 l3:2 pu:2" indexed
// one L3 group's cores with another's position): a core stays in the group of its first PU.
TEST(Topology, CacheBelowTheCoreKeepsEachCoreInOneGroup) {
  StatusOr<Topology> t = LoadTopology("pack:1 numa:3 l3:2 core:3 l3:2 pu:2");
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  CheckInvariants(*t);
  EXPECT_EQ(t->NumPus(), 72);
  EXPECT_EQ(t->NumCores(), 18);
}

TEST(Topology, SyntheticIndexesAreOsIds) {
  // Two cores x 2 threads numbered like Linux on SMT x86: core c = {c, c + 2}.
  StatusOr<Topology> t = LoadTopology("pack:1 core:2 pu:2(indexes=2*2:1*2)");
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  const std::vector<Core>& cores = t->nodes[0].l3_groups[0].cores;
  ASSERT_EQ(cores.size(), 2u);
  EXPECT_EQ(cores[0].pus, (std::vector<int>{0, 2}));
  EXPECT_EQ(cores[1].pus, (std::vector<int>{1, 3}));
  EXPECT_EQ(t->nodes[0].PrimaryCpus(), (std::vector<int>{0, 1}));
  EXPECT_EQ(t->nodes[0].Cpus(), (std::vector<int>{0, 1, 2, 3}));
  EXPECT_EQ(t->nodes[0].SiblingCpus(), (std::vector<int>{2, 3}));
  EXPECT_EQ(t->nodes[0].CoresFirstCpus(), (std::vector<int>{0, 1, 2, 3}));
}

TEST(Topology, CoresFirstCpusPutsSiblingsLast) {
  // Siblings numbered next to each other (core c = {2 c, 2 c + 1}, as some BIOSes number them):
  // ascending ids would give two workers one core; cores first gives them two.
  StatusOr<Topology> t = LoadTopology("pack:1 core:3 pu:2");
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  const NumaNode& n = t->nodes[0];
  EXPECT_EQ(n.PrimaryCpus(), (std::vector<int>{0, 2, 4}));
  EXPECT_EQ(n.SiblingCpus(), (std::vector<int>{1, 3, 5}));
  EXPECT_EQ(n.CoresFirstCpus(), (std::vector<int>{0, 2, 4, 1, 3, 5}));
  StatusOr<Topology> flat = LoadTopology("pack:1 core:2 pu:1");
  ASSERT_TRUE(flat.ok()) << flat.status().ToString();
  EXPECT_TRUE(flat->nodes[0].SiblingCpus().empty());
  EXPECT_EQ(flat->nodes[0].CoresFirstCpus(), (std::vector<int>{0, 1}));
}

// Expected facts per example file (configs/topologies/README.md). A new file without an entry
// here still gets every invariant checked.
struct Expected {
  int packages, nodes, cores, pus;
  uint64_t memory_gib, l3_mib_x4;   // L3 per group in quarter MiB (26.25 MiB = 105)
  int same_package, other_package;  // SLIT between nodes; 0 = not applicable
};
std::map<std::string, Expected> Examples() {
  return {
      {"epyc-9554-1s-nps1.xml", {1, 1, 64, 128, 768, 128, 0, 0}},
      {"epyc-9554-1s-nps4.xml", {1, 4, 64, 128, 768, 128, 12, 0}},
      {"epyc-9554-2s-nps1.xml", {2, 2, 128, 256, 1536, 128, 0, 32}},
      {"epyc-9554-2s-nps4.xml", {2, 8, 128, 256, 1536, 128, 12, 32}},
      {"xeon-8480-2s-snc4.xml", {2, 8, 112, 224, 1024, 105, 12, 21}},
  };
}

TEST(Topology, EveryExampleFileLoads) {
  const std::map<std::string, Expected> examples = Examples();
  int files = 0;
  for (const auto& entry : std::filesystem::directory_iterator(kTopologies)) {
    if (entry.path().extension() != ".xml") continue;
    ++files;
    const std::string name = entry.path().filename().string();
    SCOPED_TRACE(name);
    StatusOr<Topology> t = LoadTopology(entry.path().string());
    ASSERT_TRUE(t.ok()) << t.status().ToString();
    CheckInvariants(*t);
    EXPECT_EQ(t->source, "xml:" + entry.path().string());
    EXPECT_FALSE(t->cpu_model.empty());
    EXPECT_FALSE(FormatTopology(*t).empty());
    // SMT siblings are numbered core + cores_in_machine: core c holds {c, c + C}, so a node's
    // CPU list is never one contiguous range when it has SMT.
    const int machine_cores = t->NumCores();
    for (const NumaNode& n : t->nodes) {
      for (const L3Group& g : n.l3_groups) {
        for (const Core& c : g.cores) {
          if (c.pus.size() == 2) {
            EXPECT_EQ(c.pus[1], c.pus[0] + machine_cores);
          }
        }
      }
      // With several nodes and SMT, a node's CPU list is two ranges, never one.
      const std::vector<int> cpus = n.Cpus();
      if (t->NumPus() > machine_cores && t->nodes.size() > 1) {
        EXPECT_NE(cpus.back() - cpus.front() + 1, static_cast<int>(cpus.size()));
      }
    }
    const auto it = examples.find(name);
    if (it == examples.end()) continue;
    const Expected& e = it->second;
    EXPECT_EQ(t->packages.size(), static_cast<size_t>(e.packages));
    EXPECT_EQ(t->nodes.size(), static_cast<size_t>(e.nodes));
    EXPECT_EQ(t->NumCores(), e.cores);
    EXPECT_EQ(t->NumPus(), e.pus);
    EXPECT_EQ(t->MemoryBytes(), e.memory_gib << 30);
    for (const NumaNode& n : t->nodes) {
      EXPECT_EQ(n.memory_bytes, (e.memory_gib << 30) / e.nodes);
      for (const L3Group& g : n.l3_groups) EXPECT_EQ(g.l3_bytes, e.l3_mib_x4 << 18);
    }
    EXPECT_EQ(t->distances.empty(), e.nodes == 1);
    for (int a = 0; a < e.nodes; ++a) {
      for (int b = 0; b < e.nodes; ++b) {
        if (a == b) continue;
        const bool same = t->nodes[a].package == t->nodes[b].package;
        EXPECT_EQ(t->Distance(a, b), same ? e.same_package : e.other_package) << a << "," << b;
      }
    }
  }
  EXPECT_GE(files, static_cast<int>(examples.size()));
}

TEST(Topology, EpycNps4NodeCpus) {
  StatusOr<Topology> t = LoadTopology(kTopologies + "/epyc-9554-2s-nps4.xml");
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  EXPECT_EQ(FormatCpuList(t->nodes[0].Cpus()), "0-15,128-143");
  EXPECT_EQ(FormatCpuList(t->nodes[5].Cpus()), "80-95,208-223");
  EXPECT_EQ(FormatCpuList(t->nodes[5].PrimaryCpus()), "80-95");
  EXPECT_EQ(t->cpu_model, "AMD EPYC 9554 64-Core Processor");
  const std::string text = FormatTopology(*t);
  for (const char* want :
       {"node 5: 192.0 GiB, 16 cores, 32 PUs (2 PUs per core), cpus 80-95,208-223",
        "L3 32 MiB: 8 cores, cpus 0-7,128-135", "package 1: node(s) 4-7", "distances (ACPI SLIT"}) {
    EXPECT_NE(text.find(want), std::string::npos) << want << "\n" << text;
  }
}

TEST(Topology, BadSpecsAreClearErrors) {
  StatusOr<Topology> t = LoadTopology("pack:2 bogus:3");
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(t.status().message().find("pack:2 bogus:3"), std::string::npos);

  t = LoadTopology("/nonexistent/machine.xml");
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.status().code(), StatusCode::kNotFound);
  EXPECT_NE(t.status().message().find("/nonexistent/machine.xml"), std::string::npos);

  t = LoadTopology("missing.xml");
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.status().code(), StatusCode::kNotFound);
}

// hwloc builds any size it is asked for (seconds for 17,640 PUs; found by topology_fuzz): a
// description past 4,096 hardware threads is refused before hwloc sees it.
TEST(Topology, OversizedSyntheticDescriptionIsRefused) {
  // hwloc reads a count after any type token ("l3#" is an L3), in hex, or wrapped from "-1".
  for (const char* spec :
       {"pack:3 numa:20l3:21core:7 pu:2", "pack:999 core:999 pu:999",
        "pack:2 numa:4(memory=1GiB) core:257 pu:2", "939388", "16 16 17",
        "pack:3 numa:20l3#:21core:7 pu:2", "pack:3 numa:20l3\x9b\x02n:21core:7 pu:2",
        "pack:2 core:0x1000 pu:2", "pack:2 core:-1 pu:2", "pack:42 co(1<--index:2 numa:24 pu:70",
        "pack:2 numa(:999 core:4 l1d:1(size=32KiB) pu:4"}) {
    StatusOr<Topology> t = LoadTopology(spec);
    ASSERT_FALSE(t.ok()) << spec;
    EXPECT_EQ(t.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(t.status().message().find("more than 4096 hardware threads"), std::string::npos)
        << t.status().ToString();
  }
  // An OS index hwloc would size a bitmap by (2 GB for this one in the fuzzer).
  StatusOr<Topology> huge =
      LoadTopology("pack:2 core:2 pu:2(indexes=5,2,4,6,99999999999999999999999,3,5,7)");
  ASSERT_FALSE(huge.ok());
  EXPECT_EQ(huge.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(huge.status().message().find("index 99999"), std::string::npos)
      << huge.status().ToString();
  // 4,096 exactly, with attributes whose colons are not levels.
  StatusOr<Topology> t = LoadTopology("pack:2 numa:4(memory=1GiB) core:256 pu:2(indexes=4096:1)");
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  EXPECT_EQ(t->NumPus(), 4096);
  // Digits in cache names are not counts: 2 x 4 x 2 x 8 x 2 = 256 PUs.
  StatusOr<Topology> caches = LoadTopology("pack:2 numa:4 l3:2 l2:8 l1d:1 core:1 pu:2");
  ASSERT_TRUE(caches.ok()) << caches.status().ToString();
  EXPECT_EQ(caches->NumPus(), 256);
}

// A machine of many one-core nodes (found by topology_fuzz: 1,752 nodes took seconds, most of
// it hwloc's bitmap walk per node and a 12 MB distance matrix): each node gets its own cores,
// and past 64 nodes the matrix is summarized in one line.
TEST(Topology, ManyNodesLoadAndPrintASummary) {
  StatusOr<Topology> t = LoadTopology("pack:8 numa:200 core:1 pu:2");
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  ASSERT_EQ(t->nodes.size(), 1600u);
  for (size_t i = 0; i < t->nodes.size(); ++i) {
    ASSERT_EQ(t->nodes[i].NumCores(), 1) << "node " << i;
    EXPECT_EQ(t->nodes[i].Cpus(), (std::vector<int>{2 * static_cast<int>(i),
                                                    2 * static_cast<int>(i) + 1}));
  }
  const std::string text = FormatTopology(*t);
  EXPECT_NE(text.find("1600 x 1600 matrix not printed (more than 64 nodes); between nodes 20-32"),
            std::string::npos)
      << text.substr(text.size() - 300);
  EXPECT_LT(text.size(), 300'000u);
  // 64 nodes still print the matrix: a header of 64 ids and 64 rows.
  StatusOr<Topology> small = LoadTopology("pack:2 numa:32 core:1 pu:1");
  ASSERT_TRUE(small.ok()) << small.status().ToString();
  const std::string matrix = FormatTopology(*small);
  EXPECT_EQ(matrix.find("not printed"), std::string::npos);
  EXPECT_NE(matrix.find("  node   0   1   2"), std::string::npos);
}

TEST(Topology, TruncatedXmlIsDataLoss) {
  std::ifstream in(kTopologies + "/epyc-9554-1s-nps4.xml");
  const std::string xml((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  ASSERT_GT(xml.size(), 1000u);
  const std::string path = std::string(MOESPLIT_BINARY_DIR) + "/topology_test_truncated.xml";
  for (size_t cut : {size_t{0}, size_t{10}, xml.size() / 3, xml.size() / 2, xml.size() - 20}) {
    {
      std::ofstream out(path, std::ios::trunc);
      out << xml.substr(0, cut);
    }
    StatusOr<Topology> t = LoadTopology(path);
    ASSERT_FALSE(t.ok()) << "cut at " << cut;
    EXPECT_EQ(t.status().code(), StatusCode::kDataLoss) << t.status().ToString();
    EXPECT_NE(t.status().message().find(path), std::string::npos);
  }
  std::filesystem::remove(path);
}

// hwloc 2.9 dereferences a missing complete_nodeset (found by tests/fuzz/topology_fuzz): the
// pre-check refuses such a file with its line instead of letting hwloc crash.
TEST(Topology, XmlObjectWithoutCompleteNodesetIsDataLoss) {
  std::ifstream in(kTopologies + "/epyc-9554-1s-nps4.xml");
  std::string xml((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const size_t at = xml.find(" complete_nodeset=");
  ASSERT_NE(at, std::string::npos);
  xml.replace(at, 18, " other_nodeset=");
  StatusOr<Topology> t = LoadTopologyXml(xml, "edited.xml");
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.status().code(), StatusCode::kDataLoss) << t.status().ToString();
  EXPECT_NE(t.status().message().find("edited.xml:"), std::string::npos);
  EXPECT_NE(t.status().message().find("no complete_nodeset"), std::string::npos);
}

// hwloc 2.9 counts a bitmap's words by the commas after its first character and asserts on a
// value that starts with one (found by tests/fuzz/topology_fuzz): every cpuset / nodeset value
// is checked against lstopo's syntax first, and the file refused with its line and attribute.
TEST(Topology, XmlMalformedBitmapIsDataLoss) {
  std::ifstream in(kTopologies + "/epyc-9554-1s-nps4.xml");
  const std::string xml((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  for (const std::string attr : {" cpuset=\"", " complete_nodeset=\"", " allowed_cpuset=\""}) {
    for (const std::string bad : {",0x00000001", "", "0x1,zz", "ff", "0x123456789", "0xf...f0"}) {
      std::string edited = xml;
      const size_t at = edited.find(attr);
      ASSERT_NE(at, std::string::npos) << attr;
      const size_t value = at + attr.size();
      edited.replace(value, edited.find('"', value) - value, bad);
      StatusOr<Topology> t = LoadTopologyXml(edited, "edited.xml");
      ASSERT_FALSE(t.ok()) << attr << bad;
      EXPECT_EQ(t.status().code(), StatusCode::kDataLoss) << t.status().ToString();
      EXPECT_NE(t.status().message().find("is not an hwloc bitmap"), std::string::npos)
          << t.status().ToString();
    }
  }
  // What lstopo writes stays accepted: empty words between others, the infinite prefix.
  for (const std::string good : {"0x00000001,,0x0", "0xf...f", "0xf...f,,0x00000001"}) {
    std::string edited = xml;
    const size_t value = edited.find(" allowed_cpuset=\"") + 17;
    edited.replace(value, edited.find('"', value) - value, good);
    StatusOr<Topology> t = LoadTopologyXml(edited, "edited.xml");
    EXPECT_TRUE(t.ok()) << good << ": " << t.status().ToString();
  }
}

// hwloc takes a PU or NUMA node without os_index as index 2^32 - 1 and grows a bitmap to
// 512 MiB for it (seconds; found by topology_fuzz): refused before hwloc reads the file.
TEST(Topology, XmlPuOrNodeWithoutOsIndexIsDataLoss) {
  std::ifstream in(kTopologies + "/epyc-9554-1s-nps4.xml");
  const std::string xml((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  for (const std::string type : {"PU", "NUMANode"}) {
    for (const std::string& replacement : {std::string(""), std::string(" os_index=\"99999\"")}) {
      std::string edited = xml;
      const size_t at = edited.find("<object type=\"" + type + "\" os_index=\"");
      ASSERT_NE(at, std::string::npos) << type;
      const size_t begin = edited.find(" os_index=", at);
      const size_t end = edited.find('"', edited.find('"', begin) + 1) + 1;
      edited.replace(begin, end - begin, replacement);
      StatusOr<Topology> t = LoadTopologyXml(edited, "edited.xml");
      ASSERT_FALSE(t.ok()) << type << replacement;
      EXPECT_EQ(t.status().code(), StatusCode::kDataLoss) << t.status().ToString();
      EXPECT_NE(t.status().message().find(replacement.empty() ? "without os_index" : "past 65535"),
                std::string::npos)
          << t.status().ToString();
    }
  }
}

// Random strings, and valid descriptions with characters deleted or replaced (no digits added,
// so no mutant asks for a million PUs): an error naming the string, or a sane topology.
TEST(Topology, GarbageSyntheticStringsNeverCrash) {
  std::mt19937 rng(1234);
  const std::string alphabet = "packnumal3corepu:0123456789()=*, -.GiBMsizeindexes";
  const std::string punct = ":()=*, ak";
  const std::string valid =
      "pack:2 numa:2(memory=1GiB) l3:2(size=8MiB) core:3 pu:2(indexes=2*12:1*2)";
  int rejected = 0, accepted = 0;
  for (int i = 0; i < 400; ++i) {
    std::string s;
    if (i % 2 == 0) {
      const int len = 1 + static_cast<int>(rng() % 40);
      for (int k = 0; k < len; ++k) s += alphabet[rng() % alphabet.size()];
    } else {
      s = valid;
      for (int k = 0, n = 1 + static_cast<int>(rng() % 3); k < n; ++k) {
        const size_t at = rng() % s.size();
        if (rng() % 2) {
          s.erase(at, 1);
        } else {
          s[at] = punct[rng() % punct.size()];
        }
      }
    }
    if (s.find('/') != std::string::npos) continue;
    StatusOr<Topology> t = LoadTopology(s);
    if (t.ok()) {
      ++accepted;
      CheckInvariants(*t);
    } else {
      ++rejected;
      EXPECT_NE(t.status().message().find(s), std::string::npos) << t.status().ToString();
    }
  }
  EXPECT_GT(rejected, 0);
  EXPECT_GT(accepted, 0);
}

TEST(CpuList, FormatAndParseRoundTrip) {
  EXPECT_EQ(FormatCpuList({}), "");
  EXPECT_EQ(FormatCpuList({3}), "3");
  EXPECT_EQ(FormatCpuList({0, 1, 2, 3, 8, 10, 11}), "0-3,8,10-11");
  EXPECT_EQ(FormatCpuList({11, 10, 3, 2, 1, 0, 8, 8}), "0-3,8,10-11");
  std::mt19937 rng(7);
  for (int i = 0; i < 200; ++i) {
    std::set<int> ids;
    const int n = static_cast<int>(rng() % 30);
    for (int k = 0; k < n; ++k) ids.insert(static_cast<int>(rng() % 300));
    const std::vector<int> v(ids.begin(), ids.end());
    StatusOr<std::vector<int>> back = ParseCpuList(FormatCpuList(v));
    ASSERT_TRUE(back.ok()) << back.status().ToString();
    EXPECT_EQ(*back, v);
  }
  StatusOr<std::vector<int>> p = ParseCpuList(" 4, 0-2 ,2");
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(*p, (std::vector<int>{0, 1, 2, 4}));
  p = ParseCpuList("");
  ASSERT_TRUE(p.ok());
  EXPECT_TRUE(p->empty());
}

TEST(CpuList, BadInputNamesTheText) {
  for (const char* bad :
       {"a", "1-", "-1", "3-1", "1,,2", "1,", "0-99999999", "1.5", "1-2-3", "x-y"}) {
    StatusOr<std::vector<int>> p = ParseCpuList(bad);
    ASSERT_FALSE(p.ok()) << bad;
    EXPECT_EQ(p.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(p.status().message().find(bad), std::string::npos) << p.status().message();
  }
}

}  // namespace
}  // namespace moesplit::numa
