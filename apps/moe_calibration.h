// The two kernel figures of a machine profile, measured on the engine's own MoE path
// (moe::ExpertEngine::Forward) rather than on a bare kernel, because that is what `moesplit
// bench` runs: dispatch, activation quantization, SiLU, the down projection and the combine are
// all in the time. The layer is DeepSeek-V2-Lite's (D 2048, F 1408, 64 experts, top-6; gate/up
// Q4_K, down Q8_0 as in its Q4_K_M files, whose F = 1408 is not a multiple of 256): 6.31 MB per
// expert in the file, 404 MB per layer. Every calibration stores its weights as the engine does
// after loading (gemv::LoadLayout: q4_K_r16 / q8_0_r16 on AVX-512 VNNI), because that is the
// path a run takes: on the 2-core Zen 5 box the file layout's decode read 0.62-0.69 of the probe
// and the repacked one 0.87-1.01 (bench_moe_layer moe/v2lite/q4_K-q8_0, 1-2 threads); the
// planner's decode prediction for ds-v2-lite Q4_K_M went from 0.84-0.86 of `moesplit bench`'s
// figure to 0.98-1.06 (docs/PERFORMANCE.md, "The planner's kernel figures on the engine's
// layouts").
//
//   decode   one token, 6 distinct experts per layer, over `copies` copies of the layer bound to
//            the node (1 GiB: 2 copies, 25x a 32 MiB L3) so every expert comes from DRAM;
//            6 x 6.31 MB = 37.9 MB of weights per token-layer -> weight GB/s (1e9).
//   prefill  512 tokens, top-6 with Zipf(1) expert popularity (48 tokens per expert on average),
//            one pinned thread: 512 x 6 x 3 x 2048 x 1408 = 26.6 G multiply-adds per layer ->
//            GMAC/s per core; also at 171 and 64 tokens (16 and 6 per expert: fewer tokens per
//            expert reuse each weight row less, and V3's 256 experts see 16 at 512 tokens). On this
//            repository's Zen 4/5 development box that is ~105, half the bare Q4_K x Q8_K GEMM's
//            ~208: the planner predicts prefill from this one.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "apps/topo_measure.h"
#include "core/base/dtype.h"
#include "core/base/status.h"
#include "numa/topology.h"

namespace moesplit::app {

// Decode weight GB/s of `threads` workers of a NodePool pinned to the node's first cores.
// --quick (options.quick): 8 experts, one copy (a smoke test).
StatusOr<double> MeasureMoeDecodeGbps(const numa::NumaNode& node, int threads,
                                      const MeasureOptions& options,
                                      std::vector<std::string>* warnings);

// Decode of the non-expert weights: one token through qmatmul::MatMul over options.bytes of
// 2816 x 2048 q4_K matrices bound to the node (what attention, shared experts and the head
// read per token), `threads` pinned workers: weight GB/s. --quick: 4 matrices.
StatusOr<double> MeasureDenseDecodeGbps(const numa::NumaNode& node, int threads,
                                        const MeasureOptions& options,
                                        std::vector<std::string>* warnings);

// Prefill of `tokens` tokens (512: 48 per expert; 171: 16, V3's 512-token batch; 64: 6):
// multiply-adds per second on the node's first core, weights on the node, 1e9. --quick: 8
// experts (the tokens per expert grow 8x).
StatusOr<double> MeasureMoePrefillGmacs(const numa::NumaNode& node, int64_t tokens,
                                        const MeasureOptions& options,
                                        std::vector<std::string>* warnings);

// A dense projection through qmatmul::MatMul (activation quantization included): 512 tokens x
// a 2816 x 2048 matrix of `type` (q4_K, q6_K, q8_0, ...; 2048 is a multiple of every block), one
// thread on the node's first core, 1e9 multiply-adds / s. The rate of attention projections, shared
// experts and dense FFNs in prefill (every token through one matrix: better reuse than an expert's
// few dozen tokens). --quick: 256 rows, 64 tokens.
StatusOr<double> MeasureDenseGmacs(const numa::NumaNode& node, GgmlType type,
                                   const MeasureOptions& options,
                                   std::vector<std::string>* warnings);

// A dense SwiGLU FFN through moe::ExpertEngine::ForwardDense (the path of DeepSeek's leading
// dense layers): 512 tokens, D 2048 -> F 11264 -> D, q4_K, one thread, 1e9 multiply-adds / s.
// --quick: F 1024, 64 tokens.
StatusOr<double> MeasureFfnGmacs(const numa::NumaNode& node, const MeasureOptions& options,
                                 std::vector<std::string>* warnings);

// Routed-expert decode on one core (numa::KernelProfile::expert_decode_gbps_per_core): one
// token through moe::ExpertEngine::Forward, top-8 of a layer of DeepSeek-V3 experts (gate / up
// 2048 x 7168, down 7168 x 2048), every matrix of `type` stored as the engine stores it
// (gemv::LoadLayout: the 16-row layouts where the tier has them), options.bytes of experts on
// the node (16-256 of them: 8 x 11.3 MB = 91 MB of IQ2_XXS per token-layer, from DRAM), one
// pinned thread: GB/s of the file's bytes. What one core's kernel turns out when the memory is
// not its limit. --quick: F 256, 8 experts.
StatusOr<double> MeasureExpertDecodeGbps(const numa::NumaNode& node, GgmlType type,
                                         const MeasureOptions& options,
                                         std::vector<std::string>* warnings);
// Whether the tier has kernels for `type`'s experts and a quantizer makes their weights.
bool CanMeasureExpertDecode(cpu::IsaTier tier, GgmlType type);

}  // namespace moesplit::app
