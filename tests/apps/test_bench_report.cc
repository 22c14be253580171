// bench output must line up with llama-bench's, column for column.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "apps/bench_profile.h"
#include "apps/bench_report.h"

namespace moesplit::app {
namespace {

BenchModelInfo Model() {
  BenchModelInfo m;
  m.filename = "ds-v2-lite-Q4_K_M.gguf";
  m.model_type = "deepseek2 16B Q4_K - Medium";
  m.size_bytes = 10359886848ull;  // 9.65 GiB
  m.n_params = 15706484224ull;
  m.isa = "avx512vnni";
  return m;
}

TEST(BenchReport, TestNames) {
  EXPECT_EQ((BenchTest{.n_prompt = 512}).Name(), "pp512");
  EXPECT_EQ((BenchTest{.n_gen = 128}).Name(), "tg128");
  EXPECT_EQ((BenchTest{.n_prompt = 512, .n_gen = 128}).Name(), "pp512+tg128");
  EXPECT_EQ((BenchTest{.n_gen = 128, .n_depth = 4096}).Name(), "tg128 @ d4096");
  EXPECT_EQ((BenchTest{.n_gen = 128, .n_parallel = 4}).Name(), "tg128 x4");
}

TEST(BenchReport, StatisticsAsLlamaBench) {
  // 128 tokens in 1 s, 2 s and 4 s: 128, 64, 32 t/s -> mean 74.67, sample stdev 48.88.
  BenchTest t{.n_gen = 128, .samples_ns = {1000000000ull, 2000000000ull, 4000000000ull}};
  EXPECT_NEAR(t.AvgTs(), 74.6667, 1e-3);
  EXPECT_NEAR(t.StdevTs(), 48.8808, 1e-3);
  EXPECT_NEAR(t.AvgNs(), 2333333333.3, 1.0);
  BenchTest one{.n_gen = 1, .samples_ns = {500000000ull}};
  EXPECT_EQ(one.StdevTs(), 0.0);
  EXPECT_EQ(one.AvgTs(), 2.0);
}

TEST(BenchReport, MarkdownMatchesLlamaBenchLayout) {
  BenchTest pp{.n_prompt = 512, .n_threads = 2, .samples_ns = {2000000000ull, 2000000000ull}};
  const std::string md = FormatBenchReport(Model(), {pp}, BenchFormat::kMarkdown);
  // Header and separator as llama-bench prints them for a CPU backend, plus our "isa" column
  // (the CPU kernel tier) where llama-bench puts its extra parameter columns.
  EXPECT_NE(md.find("| model                          |       size |     params | backend    | "
                    "isa        | threads |            test |                  t/s |\n"),
            std::string::npos)
      << md;
  EXPECT_NE(md.find("| ------------------------------ | ---------: | ---------: | ---------- | "
                    "---------- | ------: | --------------: | -------------------: |\n"),
            std::string::npos)
      << md;
  EXPECT_NE(md.find("| deepseek2 16B Q4_K - Medium    |   9.65 GiB |    15.71 B | CPU        | "
                    "avx512vnni |       2 |           pp512 |        256.00 ± 0.00 |\n"),
            std::string::npos)
      << md;
}

TEST(BenchReport, JsonAndCsvCarryLlamaBenchFields) {
  BenchTest tg{.n_gen = 128, .n_threads = 1, .samples_ns = {1000000000ull, 2000000000ull}};
  auto j = nlohmann::json::parse(FormatBenchReport(Model(), {tg}, BenchFormat::kJson));
  ASSERT_EQ(j.size(), 1u);
  EXPECT_EQ(j[0]["n_gen"], 128);
  EXPECT_EQ(j[0]["n_threads"], 1);
  EXPECT_EQ(j[0]["avg_ns"], 1500000000ull);
  EXPECT_NEAR(j[0]["avg_ts"].get<double>(), 96.0, 1e-9);
  EXPECT_EQ(j[0]["samples_ts"].size(), 2u);
  EXPECT_EQ(j[0]["isa"], "avx512vnni");
  const std::string csv = FormatBenchReport(Model(), {tg}, BenchFormat::kCsv);
  EXPECT_EQ(csv.substr(0, csv.find('\n')),
            "build_commit,cpu_info,backends,model_filename,model_type,model_size,model_n_params,"
            "n_threads,n_prompt,n_gen,n_depth,avg_ns,stddev_ns,avg_ts,stddev_ts,isa,numa");
  EXPECT_NE(csv.find("\"deepseek2 16B Q4_K - Medium\",10359886848,15706484224,1,0,128,0,"
                     "1500000000,707106781,96.000000,45.254834,\"avx512vnni\""),
            std::string::npos)
      << csv;
}

TEST(BenchReport, PromptSizeTable) {
  const std::string t = FormatPromptSizeTable({{1000, 128, 10.0, 16.0}});
  EXPECT_NE(t.find("|          1000 |      100.00 |       8.00 |            10.00 |           "
                   "16.00 |"),
            std::string::npos)
      << t;
}

// bench --verbose's table: per phase ms/token, share, MB/token, GB/s (only for >= 1 MB per
// token), the time between phases, the total, and the fractions of the probe.
TEST(BenchProfile, TableArithmetic) {
  engine::Profile p;
  p.tokens = 4;
  p.evals = 4;
  p.eval_ns = 100'000'000;  // 25 ms per token
  p[engine::Phase::kExperts] = {.ns = 80'000'000, .bytes = 4'000'000'000, .calls = 104};
  p[engine::Phase::kNorm] = {.ns = 2'000'000, .bytes = 0, .calls = 216};
  p[engine::Phase::kRouter] = {.ns = 1'000'000, .bytes = 2'000'000, .calls = 104};  // 0.5 MB/token
  const std::string t = FormatProfile("tg4, 2 threads", p, 62.5);
  EXPECT_NE(t.find("tg4, 2 threads: 4 tokens in 4 evaluations, 25.000 ms per token"),
            std::string::npos)
      << t;
  // 80 ms / 4 tokens = 20 ms, 80% of the time, 1000 MB per token, 4 GB / 80 ms = 50 GB/s.
  EXPECT_NE(t.find("| experts (routed + shared)   |    20.000 |   80.0% |    1000.0 |   50.0 |"),
            std::string::npos)
      << t;
  // Below 1 MB per token: bytes shown, no GB/s.
  EXPECT_NE(t.find("| router                      |     0.250 |    1.0% |       0.5 |        |"),
            std::string::npos)
      << t;
  EXPECT_NE(t.find("| norms, residuals            |     0.500 |    2.0% |           |"),
            std::string::npos)
      << t;
  // 100 - 83 ms between phases; phases that never ran have no row.
  EXPECT_NE(t.find("| (between phases)            |     4.250 |   17.0% |"), std::string::npos)
      << t;
  EXPECT_EQ(t.find("dense FFN"), std::string::npos) << t;
  // Total 4.002 GB / 100 ms = 40.0 GB/s = 64% of 62.5; the experts 50 / 62.5 = 80%.
  EXPECT_NE(t.find("| total                       |    25.000 |  100.0% |    1000.5 |   40.0 |"),
            std::string::npos)
      << t;
  EXPECT_NE(t.find("62.5 GB/s; the whole step reads at 64% of it, the experts at 80%"),
            std::string::npos)
      << t;
  EXPECT_EQ(FormatProfile("x", p, std::nullopt).find("probe"), std::string::npos);
  EXPECT_EQ(FormatProfile("x", engine::Profile(), 10.0), "");  // nothing measured
}

}  // namespace
}  // namespace moesplit::app
