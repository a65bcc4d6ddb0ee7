// proc_stats: what /proc says about another process: CPU time used and resident memory.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <optional>

namespace tokenmeter::load {

// CPU time of every thread of the process, in seconds (clock-tick resolution).
struct cpu_times {
    double user = 0;    // utime
    double system = 0;  // stime
    [[nodiscard]] double total() const noexcept { return user + system; }
};
std::optional<cpu_times> process_cpu_seconds(pid_t pid);

// VmRSS in KiB.
std::optional<std::uint64_t> process_rss_kib(pid_t pid);

}  // namespace tokenmeter::load
