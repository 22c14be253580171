// Output of `moesplit bench` in llama-bench's formats (markdown table, CSV, JSON), with the same
// column and field names, so that users can paste both tools' results side by side.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace moesplit::app {

struct BenchModelInfo {
  std::string filename;     // model_filename
  std::string model_type;   // "deepseek2 15.7B Q4_K - Medium" (llama-bench: llama_model_desc)
  uint64_t size_bytes = 0;  // bytes of tensor data
  uint64_t n_params = 0;
  std::string backend = "CPU";
  std::string isa;       // CPU kernel tier that ran ("avx512vnni"): markdown column, json/csv field
  std::string cpu_info;  // CPU model name
  std::string build = "moesplit";
};

// One llama-bench "test": pp<n_prompt>, tg<n_gen> or pp<n>+tg<m>, at one thread count.
struct BenchTest {
  int n_prompt = 0;
  int n_gen = 0;
  int n_depth = 0;  // tokens already in the KV cache before the test (llama-bench -d)
  // tg tests: sequences decoding together (bench --npl, llama-batched-bench's -npl): each step
  // evaluates one token of each; t/s counts all of them (aggregate).
  int n_parallel = 1;
  int n_threads = 1;
  std::string numa;  // placement label ("shard 0,1"); "" = default, and no numa column is shown
  std::vector<uint64_t> samples_ns;  // one per repetition (after the warm-up run)

  // "pp512", "tg128", "pp512+tg128", "... @ d4096", "tg128 x4" (4 parallel sequences)
  std::string Name() const;
  std::vector<double> TokensPerSecond() const;  // (n_prompt + n_gen) * n_parallel * 1e9 / ns
  double AvgTs() const;
  double StdevTs() const;  // sample standard deviation (n - 1), 0 for one sample
  double AvgNs() const;
  double StdevNs() const;
};

enum class BenchFormat { kMarkdown, kCsv, kJson };

// Whole report for `tests` run on one model; identical to llama-bench's layout for the fields
// both tools have ("model", "size", "params", "backend", "threads", "test", "t/s").
std::string FormatBenchReport(const BenchModelInfo& model, const std::vector<BenchTest>& tests,
                              BenchFormat format);

// The table users publish for long prompts: per prompt size, prefill t/s, decode t/s, and the
// time each phase took.
struct PromptSizeRow {
  int prompt_tokens = 0;
  int gen_tokens = 0;
  double prefill_seconds = 0;
  double decode_seconds = 0;
};
std::string FormatPromptSizeTable(const std::vector<PromptSizeRow>& rows);

// v formatted by printf's fmt (one double conversion, e.g. "%.2f"); the tables' number cells.
std::string Printf(const char* fmt, double v);

// "1.23 GiB" / "45.67 MiB" and "15.71 B" / "6.34 M" exactly as llama-bench prints them.
std::string BenchSizeString(uint64_t bytes);
std::string BenchParamsString(uint64_t n_params);

}  // namespace moesplit::app
