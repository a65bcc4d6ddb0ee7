// proc_stats: what /proc says about another process: CPU time used and resident memory.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <optional>

namespace tokenmeter::load {

// utime + stime of every thread of the process, in seconds (clock-tick resolution).
std::optional<double> process_cpu_seconds(pid_t pid);

// VmRSS in KiB.
std::optional<std::uint64_t> process_rss_kib(pid_t pid);

}  // namespace tokenmeter::load
