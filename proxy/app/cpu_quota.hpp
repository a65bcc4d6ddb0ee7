// app/cpu_quota: how many worker threads `threads: 0` means. A sidecar with a 250m CPU limit on a
// 128-core node must not start 128 event loops: the default follows the container's CPU quota
// (cgroup v2 cpu.max, or v1 cpu.cfs_quota_us / cpu.cfs_period_us), rounded up, at least 1, and
// never above the hardware threads.
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

// `threads: 0` → ceil(quota), at least 1, at most the hardware threads (0 = unknown → 1).
thread_choice default_threads(std::optional<double> quota, unsigned hardware_threads);

}  // namespace tokenmeter::app
