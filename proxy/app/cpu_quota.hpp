// app/cpu_quota: how many worker threads `threads: 0` means. A sidecar with a 250m CPU limit on a
// 128-core node must not start 128 event loops: the default is the smallest of the container's
// CPU quota (cgroup v2 cpu.max, or v1 cpu.cfs_quota_us / cpu.cfs_period_us) rounded up, the CPUs
// the process may run on (its affinity mask), the hardware threads, and max_default_threads;
// at least 1. Each worker holds its own buffers and allocator heap after a burst, so a sidecar
// without a CPU limit on a large GPU node is held to a size its memory limit was set for.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace tokenmeter::app {

// The quota in CPUs from a cgroup v2 `cpu.max` text ("max 100000" or "25000 100000"); nothing
// when unlimited or unreadable.
std::optional<double> parse_cpu_max(std::string_view text);
// The quota in CPUs from cgroup v1 cfs_quota_us and cfs_period_us texts ("-1" = unlimited).
std::optional<double> parse_cfs_quota(std::string_view quota_us, std::string_view period_us);

// The smallest quota on the path from this process's cgroup up to the root, read under `root`
// (normally "/": /proc/self/cgroup and /sys/fs/cgroup; tests pass a fake tree). Nothing when no
// level sets a quota.
std::optional<double> cgroup_cpu_quota(const std::string& root = "/");

struct thread_choice {
    std::uint32_t threads = 1;
    std::string reason;  // for the start-up log: "cgroup CPU quota 0.25" or "8 hardware threads"
};

// The most workers `threads: 0` starts; a `threads` setting may name more.
constexpr std::uint32_t max_default_threads = 8;

// The CPUs in this process's affinity mask; 0 when it cannot be read.
unsigned affinity_cpus();

// `threads: 0` → the smallest of ceil(quota), allowed_cpus (0 = unknown), the hardware threads
// (0 = unknown → 1) and max_default_threads; at least 1. The reason names every bound that
// applied.
thread_choice default_threads(std::optional<double> quota, unsigned hardware_threads,
                              unsigned allowed_cpus = 0);

}  // namespace tokenmeter::app
