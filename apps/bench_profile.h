// `moesplit bench --verbose`: where a test's time goes, per phase of the forward pass (time per
// token, share, bytes read per token, GB/s), set against a read-bandwidth probe taken just before
// the test's configuration ran: the lines that say whether a box is DRAM-bound (a phase's GB/s
// near the probe) or compute- / sync-bound (far below it).
#pragma once

#include <optional>
#include <string>

#include "core/engine/profile.h"

namespace moesplit::app {

// One markdown table for `test_name` ("tg128, 2 threads") over `profile` (the timed runs only).
// probe_gbps: the read bandwidth measured with the test's thread count, nullopt when it could
// not be measured (the table then has no "of probe" line).
std::string FormatProfile(const std::string& test_name, const engine::Profile& profile,
                          std::optional<double> probe_gbps);

}  // namespace moesplit::app
