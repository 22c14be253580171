#include "bench/bandwidth.h"

#include <utility>

#include "core/base/status.h"

namespace moesplit::bench {

numa::ReadResult MeasureReadBandwidth(int n_threads, const ReadBandwidthOptions& options) {
  StatusOr<numa::ReadOptions> o = numa::FirstCoresReadOptions(n_threads);
  MOESPLIT_CHECK(o.ok(), "bandwidth probe: ", o.status().ToString());
  o->bytes = options.bytes;
  o->passes = options.passes;
  if (options.kernel == ReadKernel::kSumReduction) {
    o->kernels = {numa::ReadKernel::kStream};
  } else {
    o->kernels = numa::KernelLikeReads();
    o->kernels.push_back(numa::ReadKernel::kStream);
  }
  StatusOr<numa::ReadResult> r = numa::MeasureRead(*o);
  MOESPLIT_CHECK(r.ok(), "bandwidth probe: ", r.status().ToString());
  return *std::move(r);
}

}  // namespace moesplit::bench
