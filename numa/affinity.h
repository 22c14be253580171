// Pinning threads to CPUs, and saying so when the OS does not allow it (containers, cgroup
// cpusets, taskset): pinning that fails degrades to an unpinned thread plus a warning that
// lists what was not honoured — never a crash.
#pragma once

#include <string>
#include <vector>

#include "core/base/status.h"

namespace moesplit::numa {

// Pins the calling thread to `cpus` (OS ids). FailedPrecondition naming the cpus and errno text
// when the kernel refuses (e.g. a CPU outside the process's allowed set).
Status PinCurrentThread(const std::vector<int>& cpus);

// The CPUs this process may run on (sched_getaffinity), ascending OS ids.
std::vector<int> AllowedCpus();

}  // namespace moesplit::numa
