#include "apps/bench_report.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <numeric>
#include <sstream>

namespace moesplit::app {
namespace {

double Mean(const std::vector<double>& v) {
  if (v.empty()) return 0.0;
  return std::accumulate(v.begin(), v.end(), 0.0) / static_cast<double>(v.size());
}

// Sample standard deviation (divides by n - 1), as llama-bench reports it.
double Stdev(const std::vector<double>& v) {
  if (v.size() <= 1) return 0.0;
  const double m = Mean(v);
  double sq = 0.0;
  for (double x : v) sq += (x - m) * (x - m);
  return std::sqrt(sq / static_cast<double>(v.size() - 1));
}

std::vector<double> AsDoubles(const std::vector<uint64_t>& v) {
  return std::vector<double>(v.begin(), v.end());
}

// Markdown columns: name and width (negative = left-aligned), as llama-bench's markdown printer.
struct Column {
  const char* name;
  int width;
};
// "isa" is ours (the CPU kernel tier); llama-bench adds such columns for its non-default
// parameters in the same place.
constexpr Column kColumns[] = {{"model", -30}, {"size", 10},   {"params", 10}, {"backend", -10},
                               {"isa", -10},   {"threads", 7}, {"test", 15},   {"t/s", 20}};

std::string Cell(const std::string& value, int width) {
  char buf[256];
  std::snprintf(buf, sizeof(buf), " %*s |", width, value.c_str());
  return buf;
}

std::string Markdown(const BenchModelInfo& m, const std::vector<BenchTest>& tests) {
  // A "numa" column after "threads" when some test ran with a placement (sweeps), as llama-bench
  // shows its non-default parameters.
  const bool numa =
      std::any_of(tests.begin(), tests.end(), [](const BenchTest& t) { return !t.numa.empty(); });
  std::vector<Column> columns(std::begin(kColumns), std::end(kColumns));
  if (numa) columns.insert(columns.begin() + 6, Column{"numa", -18});
  std::string out = "|";
  for (const Column& c : columns) out += Cell(c.name, c.width);
  out += "\n|";
  for (const Column& c : columns) {
    out.append(" ").append(std::abs(c.width) - 1, '-').append(c.width > 0 ? ":" : "-");
    out.append(" |");
  }
  out += "\n";
  for (const BenchTest& t : tests) {
    const std::string ts = Printf("%.2f", t.AvgTs()) + " ± " + Printf("%.2f", t.StdevTs());
    std::vector<std::string> values = {m.model_type,
                                       BenchSizeString(m.size_bytes),
                                       BenchParamsString(m.n_params),
                                       m.backend,
                                       m.isa,
                                       std::to_string(t.n_threads),
                                       t.Name(),
                                       ts};
    if (numa) values.insert(values.begin() + 6, t.numa.empty() ? "default" : t.numa);
    out += "|";
    for (size_t i = 0; i < columns.size(); ++i) {
      // "±" is two bytes in UTF-8 but one column on screen: widen by one, as llama-bench does.
      out += Cell(values[i], columns[i].width + (i == columns.size() - 1 ? 1 : 0));
    }
    out += "\n";
  }
  out += "\nbuild: " + m.build + "\n";
  return out;
}

nlohmann::json TestJson(const BenchModelInfo& m, const BenchTest& t) {
  return {{"build_commit", m.build},
          {"cpu_info", m.cpu_info},
          {"backends", m.backend},
          {"isa", m.isa},
          {"model_filename", m.filename},
          {"model_type", m.model_type},
          {"model_size", m.size_bytes},
          {"model_n_params", m.n_params},
          {"n_threads", t.n_threads},
          {"numa", t.numa},
          {"n_prompt", t.n_prompt},
          {"n_gen", t.n_gen},
          {"n_depth", t.n_depth},
          {"n_parallel", t.n_parallel},
          {"avg_ns", static_cast<uint64_t>(std::llround(t.AvgNs()))},
          {"stddev_ns", static_cast<uint64_t>(std::llround(t.StdevNs()))},
          {"avg_ts", t.AvgTs()},
          {"stddev_ts", t.StdevTs()},
          {"samples_ns", t.samples_ns},
          {"samples_ts", t.TokensPerSecond()}};
}

std::string CsvQuote(const std::string& s) {
  std::string out = "\"";
  for (char c : s) out += (c == '"') ? std::string("\"\"") : std::string(1, c);
  return out + "\"";
}

std::string Csv(const BenchModelInfo& m, const std::vector<BenchTest>& tests) {
  const char* fields[] = {"build_commit", "cpu_info",   "backends",       "model_filename",
                          "model_type",   "model_size", "model_n_params", "n_threads",
                          "n_prompt",     "n_gen",      "n_depth",        "avg_ns",
                          "stddev_ns",    "avg_ts",     "stddev_ts",      "isa",
                          "numa"};
  std::string out;
  for (size_t i = 0; i < std::size(fields); ++i) out.append(i ? "," : "").append(fields[i]);
  out += "\n";
  for (const BenchTest& t : tests) {
    const nlohmann::json j = TestJson(m, t);
    for (size_t i = 0; i < std::size(fields); ++i) {
      const nlohmann::json& v = j.at(fields[i]);
      out += (i ? "," : "");
      out += v.is_string()         ? CsvQuote(v.get<std::string>())
             : v.is_number_float() ? Printf("%.6f", v.get<double>())
                                   : v.dump();
    }
    out += "\n";
  }
  return out;
}

}  // namespace

std::string Printf(const char* fmt, double v) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), fmt, v);
  return buf;
}

std::string BenchTest::Name() const {
  std::string name;
  if (n_prompt > 0 && n_gen == 0) {
    name = "pp" + std::to_string(n_prompt);
  } else if (n_gen > 0 && n_prompt == 0) {
    name = "tg" + std::to_string(n_gen);
  } else {
    name = "pp" + std::to_string(n_prompt) + "+tg" + std::to_string(n_gen);
  }
  if (n_depth > 0) name += " @ d" + std::to_string(n_depth);
  if (n_parallel > 1) name += " x" + std::to_string(n_parallel);
  return name;
}

std::vector<double> BenchTest::TokensPerSecond() const {
  std::vector<double> ts;
  for (uint64_t ns : samples_ns) {
    ts.push_back(ns ? 1e9 * (n_prompt + n_gen) * n_parallel / static_cast<double>(ns) : 0.0);
  }
  return ts;
}

double BenchTest::AvgTs() const { return Mean(TokensPerSecond()); }
double BenchTest::StdevTs() const { return Stdev(TokensPerSecond()); }
double BenchTest::AvgNs() const { return Mean(AsDoubles(samples_ns)); }
double BenchTest::StdevNs() const { return Stdev(AsDoubles(samples_ns)); }

std::string BenchSizeString(uint64_t bytes) {
  if (bytes < (1ull << 30)) return Printf("%.2f MiB", bytes / 1024.0 / 1024.0);
  return Printf("%.2f GiB", bytes / 1024.0 / 1024.0 / 1024.0);
}

std::string BenchParamsString(uint64_t n) {
  if (n < 1000ull * 1000 * 1000) return Printf("%.2f M", n / 1e6);
  return Printf("%.2f B", n / 1e9);
}

std::string FormatBenchReport(const BenchModelInfo& model, const std::vector<BenchTest>& tests,
                              BenchFormat format) {
  switch (format) {
    case BenchFormat::kMarkdown:
      return Markdown(model, tests);
    case BenchFormat::kCsv:
      return Csv(model, tests);
    case BenchFormat::kJson: {
      nlohmann::json arr = nlohmann::json::array();
      for (const BenchTest& t : tests) arr.push_back(TestJson(model, t));
      return arr.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
    }
  }
  return "";
}

std::string FormatPromptSizeTable(const std::vector<PromptSizeRow>& rows) {
  std::ostringstream os;
  os << "| prompt tokens | prefill t/s | decode t/s | prefill time (s) | decode time (s) |\n"
     << "| ------------: | ----------: | ---------: | ---------------: | --------------: |\n";
  for (const PromptSizeRow& r : rows) {
    const double pp = r.prefill_seconds > 0 ? r.prompt_tokens / r.prefill_seconds : 0.0;
    const double tg = r.decode_seconds > 0 ? r.gen_tokens / r.decode_seconds : 0.0;
    char line[160];
    std::snprintf(line, sizeof(line), "| %13d | %11.2f | %10.2f | %16.2f | %15.2f |\n",
                  r.prompt_tokens, pp, tg, r.prefill_seconds, r.decode_seconds);
    os << line;
  }
  return os.str();
}

}  // namespace moesplit::app
