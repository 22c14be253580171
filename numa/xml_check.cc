#include "numa/xml_check.h"

#include <algorithm>
#include <cctype>
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
  std::vector<std::string_view> attrs;  // attribute names, in order
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
