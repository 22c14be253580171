#include "numa/xml_check.h"

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <string>
#include <vector>

namespace moesplit::numa {
namespace {

constexpr size_t kNpos = std::string_view::npos;

bool Space(char c) { return std::isspace(static_cast<unsigned char>(c)) != 0; }

bool NameChar(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '_' || c == '-' || c == '.' ||
         c == ':';
}

// Text without '<' whose every '&' starts an entity reference (&amp; &lt; &gt; &quot; &apos;
// &#N; &#xH;): hwloc 2.9 loses, and later dereferences, an attribute like "0x00&08000".
bool CleanText(std::string_view v) {
  if (v.find('<') != kNpos) return false;
  for (size_t amp = v.find('&'); amp != kNpos; amp = v.find('&', amp + 1)) {
    const size_t semi = v.find(';', amp);
    if (semi == kNpos) return false;
    const std::string_view ref = v.substr(amp + 1, semi - amp - 1);
    const bool named = ref == "amp" || ref == "lt" || ref == "gt" || ref == "quot" || ref == "apos";
    const bool hex = ref.size() > 2 && ref.starts_with("#x") &&
                     ref.find_first_not_of("0123456789abcdefABCDEF", 2) == kNpos;
    const bool dec =
        ref.size() > 1 && ref[0] == '#' && ref.find_first_not_of("0123456789", 1) == kNpos;
    if (!named && !hex && !dec) return false;
  }
  return true;
}

struct Tag {
  std::string_view name;
  std::vector<std::string_view> attrs;   // attribute names, in order
  std::vector<std::string_view> values;  // their values (between the quotes), same order
  bool self_closing = false;
  size_t end = 0;  // offset just past '>'
};

// Reads the start tag at xml[at] == '<'; false if it is not `<name (attr="value")* /?>`.
bool ReadStartTag(std::string_view xml, size_t at, Tag* tag) {
  size_t i = at + 1;
  while (i < xml.size() && NameChar(xml[i])) ++i;
  tag->name = xml.substr(at + 1, i - at - 1);
  if (tag->name.empty()) return false;
  while (true) {
    const size_t before = i;
    while (i < xml.size() && Space(xml[i])) ++i;
    if (i >= xml.size()) return false;
    if (xml[i] == '>' || (xml[i] == '/' && i + 1 < xml.size() && xml[i + 1] == '>')) {
      tag->self_closing = xml[i] == '/';
      tag->end = i + (tag->self_closing ? 2 : 1);
      return true;
    }
    if (i == before) return false;  // attributes are separated by white space
    const size_t name = i;
    while (i < xml.size() && NameChar(xml[i])) ++i;
    if (i == name) return false;
    tag->attrs.push_back(xml.substr(name, i - name));
    while (i < xml.size() && Space(xml[i])) ++i;
    if (i >= xml.size() || xml[i] != '=') return false;
    ++i;
    while (i < xml.size() && Space(xml[i])) ++i;
    if (i >= xml.size() || (xml[i] != '"' && xml[i] != '\'')) return false;
    const size_t close = xml.find(xml[i], i + 1);
    if (close == kNpos || !CleanText(xml.substr(i + 1, close - i - 1))) return false;
    tag->values.push_back(xml.substr(i + 1, close - i - 1));
    i = close + 1;
  }
}

// The offset just past the markup at xml[at] ("<?...?>", "<!--...-->", "<!DOCTYPE ...>",
// "</name>"), its name for an end tag, or kNpos when it is not well formed.
size_t SkipMarkup(std::string_view xml, size_t at, std::string_view* end_name) {
  const std::string_view rest = xml.substr(at);
  if (rest.starts_with("<?")) {
    const size_t e = xml.find("?>", at + 2);
    return e == kNpos ? kNpos : e + 2;
  }
  if (rest.starts_with("<!--")) {
    const size_t e = xml.find("-->", at + 4);
    return e == kNpos ? kNpos : e + 3;
  }
  const size_t e = xml.find('>', at);
  if (e == kNpos) return kNpos;
  const std::string_view body = xml.substr(at + 2, e - at - 2);
  if (rest.starts_with("<!")) {
    // A DOCTYPE without an internal subset (which could declare entities).
    return body.find_first_of("[<") == kNpos ? e + 1 : kNpos;
  }
  size_t n = 0;
  while (n < body.size() && NameChar(body[n])) ++n;
  if (n == 0 || body.find_first_not_of(" \t\r\n", n) != kNpos) return kNpos;
  *end_name = body.substr(0, n);
  return e + 1;
}

// The largest os_index a PU or NUMA node may have: hwloc sets bit os_index of a bitmap for
// each, and a missing os_index is 2^32 - 1 to it (a 512 MiB bitmap, seconds of copying, found by
// tests/fuzz/topology_fuzz). 65,535 is far past any real CPU or node id.
constexpr uint64_t kMaxOsIndex = 65535;

// A PU or NUMA node must carry a decimal os_index <= kMaxOsIndex (lstopo always writes one).
template <class Fail>
Status CheckObjectIndex(const Tag& tag, const Fail& fail) {
  std::string_view type, os_index;
  bool has_index = false;
  for (size_t a = 0; a < tag.attrs.size(); ++a) {
    if (tag.attrs[a] == "type") type = tag.values[a];
    if (tag.attrs[a] == "os_index") {
      os_index = tag.values[a];
      has_index = true;
    }
  }
  if (type != "PU" && type != "NUMANode") return Status::Ok();
  if (!has_index) return fail("a " + std::string(type) + " object without os_index");
  uint64_t v = 0;
  for (char c : os_index) {
    if (c < '0' || c > '9') return fail("an os_index that is not a decimal number");
    v = std::min<uint64_t>(v * 10 + static_cast<uint64_t>(c - '0'), kMaxOsIndex + 1);
  }
  if (os_index.empty() || v > kMaxOsIndex) {
    return fail("an os_index past " + std::to_string(kMaxOsIndex));
  }
  return Status::Ok();
}

// An attribute hwloc reads with hwloc_bitmap_sscanf: cpuset, complete_cpuset, allowed_cpuset,
// nodeset, complete_nodeset, allowed_nodeset on objects, and the cpusets of <cpukind> and
// <memattr> initiators; all of their names end in "cpuset" or "nodeset".
bool IsBitmapAttr(std::string_view a) { return a.ends_with("cpuset") || a.ends_with("nodeset"); }

// The bitmap syntax lstopo writes: "0xf...f" (all set), or an optional "0xf...f," prefix and
// comma-separated 32-bit words, most significant first, each "0x" and 1-8 hex digits or empty
// (an all-zero word between others), the first word not empty. hwloc 2.9's parser counts the
// words by the commas after the first character, so a value starting with ',' (",0x1") has one
// word more than it counted and trips its assert(count > 0) (found by tests/fuzz/topology_fuzz).
bool BitmapText(std::string_view v) {
  constexpr std::string_view kFull = "0xf...f";
  if (v == kFull) return true;
  // After the prefix hwloc counts right, and its writer may follow it with an empty word.
  const bool prefixed = v.starts_with(kFull) && v.size() > kFull.size() && v[kFull.size()] == ',';
  if (prefixed) v.remove_prefix(kFull.size() + 1);
  for (bool first = true;; first = false) {
    const size_t comma = v.find(',');
    const std::string_view w = v.substr(0, comma);
    if (w.empty() && first && !prefixed) return false;
    const bool hex_word = w.size() >= 3 && w.size() <= 10 &&
                          (w.starts_with("0x") || w.starts_with("0X")) &&
                          w.find_first_not_of("0123456789abcdefABCDEF", 2) == kNpos;
    if (!w.empty() && !hex_word) {
      return false;
    }
    if (comma == kNpos) return true;
    v.remove_prefix(comma + 1);
  }
}

}  // namespace

Status CheckHwlocXml(std::string_view xml, const std::string& name) {
  std::vector<std::string_view> open;  // element names, outermost first
  size_t i = 0;
  auto fail = [&](size_t at, std::string_view what) {
    const size_t line = 1 + std::count(xml.begin(), xml.begin() + std::min(at, xml.size()), '\n');
    return DataLossError("topology ", name, ":", line, ": ", what,
                         " (not an lstopo export; re-export it with `lstopo FILE.xml`)");
  };
  while (i < xml.size()) {
    const size_t lt = xml.find('<', i);
    if (!CleanText(xml.substr(i, lt == kNpos ? kNpos : lt - i))) {
      return fail(i, "text with a bare '&'");
    }
    if (lt == kNpos) break;
    if (lt + 1 < xml.size() && (xml[lt + 1] == '?' || xml[lt + 1] == '!' || xml[lt + 1] == '/')) {
      std::string_view end_name;
      i = SkipMarkup(xml, lt, &end_name);
      if (i == kNpos) return fail(lt, "malformed markup");
      if (xml[lt + 1] == '/') {
        if (open.empty() || open.back() != end_name)
          return fail(lt, "an end tag that closes nothing");
        open.pop_back();
      }
      continue;
    }
    Tag tag;
    if (!ReadStartTag(xml, lt, &tag))
      return fail(lt, "a tag whose attributes are not name=\"value\"");
    auto has = [&](std::string_view a) {
      return std::find(tag.attrs.begin(), tag.attrs.end(), a) != tag.attrs.end();
    };
    if (tag.name == "object") {
      MOESPLIT_RETURN_IF_ERROR(CheckObjectIndex(tag, [&](std::string_view what) {
        return fail(lt, what);
      }));
    }
    for (size_t a = 0; a < tag.attrs.size(); ++a) {
      if (IsBitmapAttr(tag.attrs[a]) && !BitmapText(tag.values[a])) {
        return fail(lt,
                    std::string(tag.attrs[a]) + "=\"" + std::string(tag.values[a].substr(0, 40)) +
                        "\" is not an hwloc bitmap (0x-prefixed hex words separated by commas)");
      }
    }
    if (tag.name == "object" && has("cpuset") && !has("complete_cpuset")) {
      return fail(lt, "an object with a cpuset but no complete_cpuset");
    }
    // hwloc 2.9 inserts NUMA nodes into their parent's complete_nodeset without checking that
    // the parent has one (a NULL dereference, found by tests/fuzz/topology_fuzz).
    if (tag.name == "object" && has("nodeset") && !has("complete_nodeset")) {
      return fail(lt, "an object with a nodeset but no complete_nodeset");
    }
    if (!tag.self_closing) open.push_back(tag.name);
    i = tag.end;
  }
  if (!open.empty()) return fail(xml.size(), "<" + std::string(open.back()) + "> is not closed");
  return Status::Ok();
}

}  // namespace moesplit::numa
