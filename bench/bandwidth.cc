#include "bench/bandwidth.h"

#include "core/base/status.h"
#include "numa/bandwidth_probe.h"

namespace moesplit::bench {

ReadBandwidth MeasureReadBandwidth(int n_threads, const ReadBandwidthOptions& options) {
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
  ReadBandwidth result;
  result.threads = r->threads;
  result.bytes_per_pass = r->bytes_per_pass;
  result.gbps = r->gbps;
  result.min_gbps = r->min_gbps;
  result.max_gbps = r->max_gbps;
  result.checksum = r->checksum;
  result.pattern = numa::ReadKernelName(r->kernel);
  return result;
}

}  // namespace moesplit::bench
