// The chart `moesplit bench --sweep` writes: tokens/s against threads, one line per
// (placement, test) — the curve users otherwise draw by hand when tuning a server.
#pragma once

#include <string>
#include <vector>

#include "apps/bench_report.h"

namespace moesplit::app {

// A standalone SVG document (no scripts, no external fonts). Tests with the same numa label and
// name form a series, ordered by thread count; the y axis starts at 0.
std::string SweepChartSvg(const std::vector<BenchTest>& tests, const std::string& title);

}  // namespace moesplit::app
