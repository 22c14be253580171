// A strict check of hwloc XML text before hwloc reads it. hwloc 2.9's XML importers crash (null
// dereferences, reads past the buffer) on some damaged files instead of failing, and a topology
// file is user input (`--topology FILE.xml`). lstopo writes a small, regular subset of XML; this
// accepts that subset — balanced tags, name="value" attributes with well-formed entity
// references, no DTD internal subset, cpuset / nodeset values in lstopo's bitmap syntax (hwloc
// 2.9 asserts on ",0x1") — and an <object> with a cpuset must have a complete_cpuset (hwloc 2.9
// dereferences the missing one).
#pragma once

#include <string>
#include <string_view>

#include "core/base/status.h"

namespace moesplit::numa {

// Ok, or DataLoss naming `name`, the line and what is wrong.
Status CheckHwlocXml(std::string_view xml, const std::string& name);

}  // namespace moesplit::numa
