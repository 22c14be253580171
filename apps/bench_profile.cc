#include "apps/bench_profile.h"

#include <cstdio>
#include <sstream>

#include "apps/bench_report.h"

namespace moesplit::app {
namespace {

// "| name | ms/token | share | MB/token | GB/s |": GB/s only where the phase read >= 1 MB per
// token (below that it says nothing about memory: the bytes come from cache).
std::string Row(const std::string& name, double ns, double bytes, double tokens, double total_ns) {
  char buf[160];
  const double mb = bytes / tokens / 1e6;
  const std::string gbps = (bytes > 0 && ns > 0 && mb >= 1.0) ? Printf("%.1f", bytes / ns) : "";
  const std::string mbs = bytes > 0 ? Printf("%.1f", mb) : "";
  std::snprintf(buf, sizeof(buf), "| %-27s | %9.3f | %6.1f%% | %9s | %6s |\n", name.c_str(),
                ns / tokens / 1e6, 100.0 * ns / total_ns, mbs.c_str(), gbps.c_str());
  return buf;
}

}  // namespace

std::string FormatProfile(const std::string& test_name, const engine::Profile& p,
                          std::optional<double> probe_gbps) {
  std::ostringstream out;
  if (p.tokens == 0 || p.eval_ns == 0) return "";
  const double tokens = static_cast<double>(p.tokens), total = static_cast<double>(p.eval_ns);
  out << "\n"
      << test_name << ": " << p.tokens << " tokens in " << p.evals << " evaluations, "
      << Printf("%.3f", total / tokens / 1e6) << " ms per token\n\n";
  out << "| phase                       |  ms/token |   share |  MB/token |   GB/s |\n"
      << "| --------------------------- | --------: | ------: | --------: | -----: |\n";
  for (int i = 0; i < engine::kNumPhases; ++i) {
    const engine::PhaseTotals& t = p.phases[static_cast<size_t>(i)];
    if (t.calls == 0) continue;
    out << Row(engine::PhaseName(static_cast<engine::Phase>(i)), static_cast<double>(t.ns),
               static_cast<double>(t.bytes), tokens, total);
  }
  const double between = total - static_cast<double>(p.phase_ns());
  out << Row("(between phases)", between > 0 ? between : 0, 0, tokens, total);
  out << Row("total", total, static_cast<double>(p.bytes()), tokens, total);
  const double total_gbps = static_cast<double>(p.bytes()) / total;
  if (probe_gbps.has_value() && *probe_gbps > 0) {
    // The CPU pass's fused experts, or the hybrid pass's CPU share.
    const engine::PhaseTotals& e = p[engine::Phase::kExperts].calls > 0
                                       ? p[engine::Phase::kExperts]
                                       : p[engine::Phase::kCpuExperts];
    out << "\nread bandwidth probe, same threads, before the runs: " << Printf("%.1f", *probe_gbps)
        << " GB/s; the whole step reads at " << Printf("%.0f", 100.0 * total_gbps / *probe_gbps)
        << "% of it";
    if (e.ns > 0 && e.bytes > 0) {
      out << ", the experts at "
          << Printf("%.0f",
                    100.0 * static_cast<double>(e.bytes) / static_cast<double>(e.ns) / *probe_gbps)
          << "%";
    }
    out << "\n";
  }
  return out.str();
}

}  // namespace moesplit::app
