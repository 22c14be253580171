// `run` and `bench` end to end (in process) on the llama.cpp-made tiny DeepSeek model.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <utility>
#include <vector>

#include "apps/cmd_bench.h"
#include "apps/cmd_run.h"
#include "apps/cpu_tier.h"
#include "tests/testdata.h"

namespace moesplit::app {
namespace {

using moesplit::testing::TestDataPath;

RunArgs TinyRun() {
  RunArgs a;
  a.model = TestDataPath("models/ds-tiny-Q4_K_M.gguf");
  a.prompt = "MoE test: 42 experts!";
  a.n_predict = 8;
  a.threads = 2;
  a.ctx_size = 64;
  a.sampling.seed = 7;
  return a;
}

// `bench` on the same model: prompt and generation sizes, threads (empty: bench's default, all
// hardware threads) and repetitions.
BenchArgs TinyBench(std::vector<int> n_prompt, std::vector<int> n_gen, std::vector<int> threads,
                    int repetitions) {
  BenchArgs a;
  a.model = TestDataPath("models/ds-tiny-Q4_K_M.gguf");
  a.n_prompt = std::move(n_prompt);
  a.n_gen = std::move(n_gen);
  a.threads = std::move(threads);
  a.repetitions = repetitions;
  return a;
}

TEST(RunCommand, StreamsCompletionAndTimings) {
  MOESPLIT_REQUIRE_TESTDATA();
  std::ostringstream out, err;
  Status s = RunRun(TinyRun(), out, err);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(out.str().rfind("MoE test: 42 experts!", 0), 0u) << out.str();  // prompt echoed
  EXPECT_GT(out.str().size(), std::string("MoE test: 42 experts!").size());
  EXPECT_NE(err.str().find("prompt eval: 16 tokens"), std::string::npos) << err.str();
  EXPECT_NE(err.str().find("generation: 8 tokens"), std::string::npos) << err.str();
  EXPECT_NE(err.str().find("seed 7"), std::string::npos) << err.str();
  // The kernel tier, chosen at start-up, is logged with the thread count.
  EXPECT_NE(err.str().find("cpu kernels: "), std::string::npos) << err.str();
  EXPECT_NE(err.str().find(", 2 threads\n"), std::string::npos) << err.str();
}

TEST(RunCommand, SameSeedSameTextGreedyIsDeterministic) {
  MOESPLIT_REQUIRE_TESTDATA();
  auto text = [](RunArgs a) {
    std::ostringstream out, err;
    EXPECT_TRUE(RunRun(a, out, err).ok()) << err.str();
    return out.str();
  };
  RunArgs a = TinyRun();
  EXPECT_EQ(text(a), text(a));
  a.sampling.temperature = 0;
  RunArgs b = a;
  b.sampling.seed = 99;  // greedy ignores the seed
  EXPECT_EQ(text(a), text(b));
}

TEST(RunCommand, UserErrors) {
  MOESPLIT_REQUIRE_TESTDATA();
  std::ostringstream out, err;
  RunArgs a = TinyRun();
  a.prompt_file = "/nonexistent/prompt.txt";
  EXPECT_NE(RunRun(a, out, err).message().find("not both"), std::string::npos);
  a.prompt.clear();
  EXPECT_NE(RunRun(a, out, err).message().find("/nonexistent/prompt.txt"), std::string::npos);
  a = TinyRun();
  a.ctx_size = 8;  // the prompt alone has 16 tokens
  EXPECT_NE(RunRun(a, out, err).message().find("--ctx-size"), std::string::npos);
  a = TinyRun();
  a.ctx_size = int64_t{1} << 40;  // a KV cache no machine holds: refused before any work
  const Status huge = RunRun(a, out, err);
  EXPECT_EQ(huge.code(), StatusCode::kResourceExhausted) << huge.ToString();
  EXPECT_NE(huge.message().find("GB of RAM: lower -c / --ctx-size"), std::string::npos)
      << huge.ToString();
  a = TinyRun();
  a.sampling.top_p = 1.5f;
  EXPECT_NE(RunRun(a, out, err).message().find("--top-p"), std::string::npos);
  a = TinyRun();
  a.model = "/nonexistent/model.gguf";
  EXPECT_NE(RunRun(a, out, err).message().find("/nonexistent/model.gguf"), std::string::npos);
}

TEST(BenchCommand, LlamaBenchTable) {
  MOESPLIT_REQUIRE_TESTDATA();
  BenchArgs a = TinyBench({16}, {4}, {1, 2}, 2);
  a.pg = {"8,2"};
  std::ostringstream out, err;
  Status s = RunBench(a, out, err);
  ASSERT_TRUE(s.ok()) << s.ToString();
  const std::string md = out.str();
  for (const char* row : {"pp16 |", "tg4 |", "pp8+tg2 |", "deepseek2 6M Q4_K - Medium"}) {
    EXPECT_NE(md.find(row), std::string::npos) << row << "\n" << md;
  }
  // The tier that ran: in the table and on stderr.
  const std::string best(cpu::IsaTierName(cpu::BestTier(cpu::DetectCpuFeatures())));
  EXPECT_NE(md.find("| CPU        | " + best), std::string::npos) << md;
  EXPECT_NE(err.str().find("cpu kernels: " + best), std::string::npos) << err.str();
  a.output = "json";
  a.threads = {2};
  a.prompt_sizes = {32};
  std::ostringstream jout;
  ASSERT_TRUE(RunBench(a, jout, err).ok());
  const std::string js = jout.str();
  auto j = nlohmann::json::parse(js.substr(0, js.find("\n]\n") + 2));
  ASSERT_EQ(j.size(), 3u);
  EXPECT_EQ(j[0]["samples_ns"].size(), 2u);
  EXPECT_GT(j[0]["avg_ts"].get<double>(), 0.0);
  EXPECT_EQ(j[0]["isa"], best);
  EXPECT_NE(js.find("| prompt tokens |"), std::string::npos);
}

// --sweep as separate words or one quoted string: the same configurations, one table with the
// numa column, and the chart file.
TEST(BenchCommand, SweepQuotedOrSeparateWords) {
  MOESPLIT_REQUIRE_TESTDATA();
  BenchArgs a = TinyBench({8}, {2}, {}, 1);
  a.sweep_chart = moesplit::testing::ScratchDir() + "/sweep-test.svg";
  for (const std::vector<std::string>& sweep :
       {std::vector<std::string>{"threads=1,2", "numa=single"},
        std::vector<std::string>{"threads=1,2 numa=single"}}) {
    a.sweep = sweep;
    std::ostringstream out, err;
    Status s = RunBench(a, out, err);
    ASSERT_TRUE(s.ok()) << s.ToString();
    const std::string md = out.str();
    EXPECT_NE(md.find("numa"), std::string::npos) << md;
    int rows = 0;
    for (size_t at = md.find("| single 0"); at != std::string::npos;
         at = md.find("| single 0", at + 1)) {
      ++rows;
    }
    EXPECT_EQ(rows, 4) << md;  // (pp8, tg2) x threads 1, 2
    std::ifstream chart(a.sweep_chart);
    EXPECT_TRUE(chart.good());
  }
  a.sweep = {"threads=1,2 colour=red"};
  std::ostringstream out, err;
  EXPECT_NE(RunBench(a, out, err).message().find("colour"), std::string::npos);
}

// --verbose: a probe line per configuration on stderr and one phase table per test after the
// llama-bench table (stdout for markdown, stderr beside JSON).
TEST(BenchCommand, VerboseProfilesEveryTest) {
  MOESPLIT_REQUIRE_TESTDATA();
  BenchArgs a = TinyBench({8}, {3}, {2}, 2);
  a.verbose = true;
  std::ostringstream out, err;
  Status s = RunBench(a, out, err);
  ASSERT_TRUE(s.ok()) << s.ToString();
  const std::string md = out.str();
  EXPECT_NE(err.str().find("bench: read bandwidth probe, 2 threads on cpus"), std::string::npos)
      << err.str();
  // The yardstick is the fastest read pattern, and the line names it.
  EXPECT_NE(err.str().find(", the fastest of 3 read patterns; median of 5 passes"),
            std::string::npos)
      << err.str();
  EXPECT_TRUE(err.str().find("(probe, the fastest") != std::string::npos ||
              err.str().find("(probe+prefetch, the fastest") != std::string::npos ||
              err.str().find("(probe+prefetchnta, the fastest") != std::string::npos)
      << err.str();
  // Timed runs only: 2 x 8 prompt tokens in 2 evaluations, 2 x 3 decode tokens in 6.
  EXPECT_NE(md.find("pp8, 2 threads: 16 tokens in 2 evaluations"), std::string::npos) << md;
  EXPECT_NE(md.find("tg3, 2 threads: 6 tokens in 6 evaluations"), std::string::npos) << md;
  for (const char* row : {"| attention projections", "| experts (routed + shared)", "| output head",
                          "| total", "read bandwidth probe, same threads"}) {
    EXPECT_NE(md.find(row), std::string::npos) << row << "\n" << md;
  }
  EXPECT_LT(md.find("tg3 |"), md.find("pp8, 2 threads:")) << md;  // after the table
  a.output = "json";
  std::ostringstream jout, jerr;
  ASSERT_TRUE(RunBench(a, jout, jerr).ok());
  EXPECT_TRUE(nlohmann::json::accept(jout.str())) << jout.str();
  EXPECT_NE(jerr.str().find("tg3, 2 threads: 6 tokens"), std::string::npos) << jerr.str();
}

// -d as llama-bench's: every test again after that many tokens in the context ("tg3 @ d16"),
// for parallel sequences too; --verbose profiles only the timed tokens, not the depth.
TEST(BenchCommand, DepthRepeatsEveryTest) {
  MOESPLIT_REQUIRE_TESTDATA();
  BenchArgs a = TinyBench({8}, {3}, {2}, 2);
  a.n_depth = {0, 16};
  a.n_parallel = {1, 2};
  a.verbose = true;
  std::ostringstream out, err;
  Status s = RunBench(a, out, err);
  ASSERT_TRUE(s.ok()) << s.ToString();
  const std::string md = out.str();
  for (const char* row :
       {"pp8 |", "tg3 |", "tg3 x2 |", "pp8 @ d16 |", "tg3 @ d16 |", "tg3 @ d16 x2 |"}) {
    EXPECT_NE(md.find(row), std::string::npos) << row << "\n" << md;
  }
  EXPECT_LT(md.find("tg3 x2 |"), md.find("pp8 @ d16 |")) << md;  // depth by depth
  EXPECT_NE(md.find("pp8 @ d16, 2 threads: 16 tokens in 2 evaluations"), std::string::npos) << md;
  EXPECT_NE(md.find("tg3 @ d16, 2 threads: 6 tokens in 6 evaluations"), std::string::npos) << md;
  EXPECT_NE(md.find("tg3 @ d16 x2, 2 threads: 12 tokens in 6 evaluations"), std::string::npos)
      << md;
  a.n_depth = {-1};
  EXPECT_NE(RunBench(a, out, err).message().find("-d values must be >= 0"), std::string::npos);
}

TEST(BenchCommand, UserErrors) {
  MOESPLIT_REQUIRE_TESTDATA();
  BenchArgs a = TinyBench({512}, {128}, {}, 5);
  std::ostringstream out, err;
  a.repetitions = 0;
  EXPECT_NE(RunBench(a, out, err).message().find("-r"), std::string::npos);
  a.repetitions = 1;
  a.pg = {"512"};
  EXPECT_NE(RunBench(a, out, err).message().find("-pg"), std::string::npos);
  a.pg.clear();
  a.output = "xml";
  EXPECT_NE(RunBench(a, out, err).message().find("-o"), std::string::npos);
  a.output = "md";
  a.n_parallel = {0};
  EXPECT_NE(RunBench(a, out, err).message().find("--npl"), std::string::npos);
}

// --npl: the tg tests again with N sequences decoding together; their t/s counts every
// sequence's tokens, so it is the aggregate a server gets from N streams.
TEST(BenchCommand, ParallelSequencesCountEveryToken) {
  MOESPLIT_REQUIRE_TESTDATA();
  BenchArgs a = TinyBench({0}, {6}, {2}, 2);
  a.n_parallel = {1, 3};
  a.output = "json";
  std::ostringstream out, err;
  ASSERT_TRUE(RunBench(a, out, err).ok());
  const std::string js = out.str();
  auto j = nlohmann::json::parse(js.substr(0, js.find("\n]\n") + 2));
  ASSERT_EQ(j.size(), 2u);
  EXPECT_EQ(j[0]["n_parallel"], 1);
  EXPECT_EQ(j[1]["n_parallel"], 3);
  // t/s = 6 tokens x 3 sequences / time, per sample.
  const double ns = j[1]["samples_ns"][0].get<double>();
  EXPECT_NEAR(j[1]["samples_ts"][0].get<double>(), 18 * 1e9 / ns, 1e-6 * 18 * 1e9 / ns);
}

TEST(KernelTier, MaxIsaCapsTheBenchTierAndBadValuesAreErrors) {
  MOESPLIT_REQUIRE_TESTDATA();
  BenchArgs a = TinyBench({4}, {0}, {1}, 1);
  std::ostringstream out, err;
  ::setenv("MOESPLIT_MAX_ISA", "scalar", 1);
  const Status capped = RunBench(a, out, err);
  ::setenv("MOESPLIT_MAX_ISA", "avx9000", 1);
  const Status bad = RunBench(a, out, err);
  RunArgs r = TinyRun();
  const Status bad_run = RunRun(r, out, err);
  ::unsetenv("MOESPLIT_MAX_ISA");
  ASSERT_TRUE(capped.ok()) << capped.ToString();
  EXPECT_NE(out.str().find("| CPU        | scalar     |"), std::string::npos) << out.str();
  EXPECT_EQ(bad.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(bad.message().find("MOESPLIT_MAX_ISA"), std::string::npos) << bad.ToString();
  EXPECT_EQ(bad_run.code(), StatusCode::kInvalidArgument);
}

// MOESPLIT_DECODE_READ: a bad value stops bench and run at start-up naming the variable; either
// mode runs, and the hardware one is said at the VNNI tier (the tier whose kernels it changes).
TEST(KernelTier, DecodeReadVariableChoosesTheModeAndBadValuesAreErrors) {
  MOESPLIT_REQUIRE_TESTDATA();
  BenchArgs a = TinyBench({0}, {2}, {1}, 1);
  std::ostringstream out, bad_err, hw_err, pre_err;
  ::setenv("MOESPLIT_DECODE_READ", "fastest", 1);
  const Status bad = RunBench(a, out, bad_err);
  RunArgs r = TinyRun();
  const Status bad_run = RunRun(r, out, bad_err);
  ::setenv("MOESPLIT_DECODE_READ", "hardware", 1);
  const Status hw = RunBench(a, out, hw_err);
  ::setenv("MOESPLIT_DECODE_READ", "prefetched", 1);
  const Status pre = RunBench(a, out, pre_err);
  ::unsetenv("MOESPLIT_DECODE_READ");
  EXPECT_EQ(bad.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(bad.message().find("MOESPLIT_DECODE_READ=\"fastest\""), std::string::npos)
      << bad.ToString();
  EXPECT_EQ(bad_run.code(), StatusCode::kInvalidArgument);
  ASSERT_TRUE(hw.ok()) << hw.ToString();
  ASSERT_TRUE(pre.ok()) << pre.ToString();
  const bool vnni = cpu::BestTier(cpu::DetectCpuFeatures()) == cpu::IsaTier::kAvx512Vnni;
  EXPECT_EQ(hw_err.str().find("MOESPLIT_DECODE_READ=hardware") != std::string::npos, vnni)
      << hw_err.str();
  EXPECT_EQ(pre_err.str().find("decode reads"), std::string::npos) << pre_err.str();
}

TEST(KernelTier, Descriptions) {
  EXPECT_EQ(TierDescription(cpu::IsaTier::kAvx512Vnni), "avx512vnni (AVX-512 VNNI)");
  EXPECT_EQ(TierDescription(cpu::IsaTier::kScalar), "scalar (portable C++)");
  std::ostringstream err;
  const GgmlType fallback[] = {GgmlType::kQ4_1};
  LogKernels(err, cpu::IsaTier::kAvx2, "1,2", fallback, cpu::CpuFeatures{.avx2 = true});
  EXPECT_EQ(err.str(),
            "cpu kernels: avx2 (AVX2 + FMA), 1,2 threads\n"
            "cpu kernels: no fast kernel for q4_1 weights at avx2: reference matmul (slow)\n");
  // A CPU with AMX hears when it goes unused (MOESPLIT_MAX_ISA below amx).
  std::ostringstream amx;
  LogKernels(amx, cpu::IsaTier::kAvx512Vnni, "2", {},
             cpu::CpuFeatures{.avx512vnni = true, .amx_int8 = true, .amx_bf16 = true});
  EXPECT_EQ(amx.str(),
            "cpu kernels: avx512vnni (AVX-512 VNNI), 2 threads\n"
            "cpu kernels: this CPU has AMX (INT8, BF16), not used at this tier\n");
  std::ostringstream at_amx;  // at the AMX tier there is nothing to say
  LogKernels(at_amx, cpu::IsaTier::kAmx, "2", {},
             cpu::CpuFeatures{.avx512vnni = true, .amx_int8 = true, .amx_bf16 = true});
  EXPECT_EQ(at_amx.str(), "cpu kernels: amx (AMX INT8 + AVX-512 VNNI), 2 threads\n");
  // The hardware decode read: said at the VNNI tier (where its kernels run), with whether it is
  // the CPU's default; nothing at avx2 or in the prefetched mode.
  const cpu::CpuFeatures zen4{.avx512vnni = true, .amd = true, .family = 0x19};
  std::ostringstream hw;
  LogKernels(hw, cpu::IsaTier::kAvx512Vnni, "2", {}, zen4, gemv::DecodeRead::kHardware);
  EXPECT_EQ(hw.str(),
            "cpu kernels: avx512vnni (AVX-512 VNNI), 2 threads\n"
            "cpu kernels: decode reads Q4_K / Q6_K experts as one stream per core with no "
            "software prefetch, Q4_0 / Q4_1 / Q5_0 / Q5_1 / Q8_0 / IQ4_NL / MXFP4 as one "
            "prefetched stream (MOESPLIT_DECODE_READ=hardware, this CPU's default)\n");
  std::ostringstream forced;
  LogKernels(forced, cpu::IsaTier::kAvx512Vnni, "2", {}, cpu::CpuFeatures{.avx512vnni = true},
             gemv::DecodeRead::kHardware);
  EXPECT_NE(forced.str().find("(MOESPLIT_DECODE_READ=hardware)\n"), std::string::npos)
      << forced.str();
  for (auto [tier, read] : {std::pair{cpu::IsaTier::kAvx2, gemv::DecodeRead::kHardware},
                            std::pair{cpu::IsaTier::kAvx512Vnni, gemv::DecodeRead::kPrefetched}}) {
    std::ostringstream quiet;
    LogKernels(quiet, tier, "2", {}, zen4, read);
    EXPECT_EQ(quiet.str().find("decode reads"), std::string::npos) << quiet.str();
  }
}

}  // namespace
}  // namespace moesplit::app
