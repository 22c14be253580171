#include "numa/affinity.h"

#include <sched.h>

#include <cerrno>
#include <cstring>
#include <string>

namespace moesplit::numa {

namespace {
// "0-3,8" for {0,1,2,3,8} (ascending input). topology.h's FormatCpuList does the same; a local
// copy keeps pinning free of the hwloc-based topology code.
std::string Ranges(const std::vector<int>& ids) {
  std::string s;
  for (size_t i = 0; i < ids.size();) {
    size_t j = i;
    while (j + 1 < ids.size() && ids[j + 1] == ids[j] + 1) ++j;
    if (!s.empty()) s += ",";
    s += std::to_string(ids[i]);
    if (j > i) {
      s += '-';
      s += std::to_string(ids[j]);
    }
    i = j + 1;
  }
  return s;
}
}  // namespace

Status PinCurrentThread(const std::vector<int>& cpus) {
  if (cpus.empty()) return InvalidArgumentError("cannot pin a thread to an empty CPU list");
  cpu_set_t set;
  CPU_ZERO(&set);
  for (int c : cpus) {
    if (c < 0 || c >= CPU_SETSIZE) {
      return FailedPreconditionError("cannot pin to cpu ", c, ": outside 0..", CPU_SETSIZE - 1);
    }
    CPU_SET(c, &set);
  }
  // pid 0 = the calling thread (Linux affinity is per thread).
  if (sched_setaffinity(0, sizeof(set), &set) != 0) {
    const int err = errno;
    return FailedPreconditionError("cannot pin to cpu(s) ", Ranges(cpus), ": ",
                                   std::strerror(err), " (this process may run on ",
                                   Ranges(AllowedCpus()), ")");
  }
  return Status::Ok();
}

std::vector<int> AllowedCpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  std::vector<int> out;
  if (sched_getaffinity(0, sizeof(set), &set) != 0) return out;
  for (int c = 0; c < CPU_SETSIZE; ++c) {
    if (CPU_ISSET(c, &set)) out.push_back(c);
  }
  return out;
}

}  // namespace moesplit::numa
