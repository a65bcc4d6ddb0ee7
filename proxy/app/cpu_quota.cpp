// app/cpu_quota: reads the cgroup CPU quota (v2 and v1) to size the worker pool.
#include "app/cpu_quota.hpp"

#include <sched.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <fstream>
#include <sstream>
#include <vector>

#include "core/text.hpp"

namespace tokenmeter::app {
namespace {

std::optional<std::int64_t> to_int(std::string_view s) {
    s = core::trim(s);
    std::int64_t v = 0;
    const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
    if (ec != std::errc{} || end != s.data() + s.size()) {
        return std::nullopt;
    }
    return v;
}

std::optional<double> ratio(std::int64_t quota, std::int64_t period) {
    if (quota <= 0 || period <= 0) {
        return std::nullopt;
    }
    return static_cast<double>(quota) / static_cast<double>(period);
}

std::optional<std::string> slurp(const std::string& path) {
    std::ifstream in(path);
    if (!in) {
        return std::nullopt;
    }
    std::ostringstream out;
    out << in.rdbuf();
    return out.str();
}

void keep_smaller(std::optional<double>& best, std::optional<double> q) {
    if (q && (!best || *q < *best)) {
        best = q;
    }
}

// "/a/b/c" → {"/a/b/c", "/a/b", "/a", ""}: from the process's own cgroup up to the root.
std::vector<std::string> up_to_root(std::string path) {
    std::vector<std::string> levels;
    while (!path.empty() && path.back() == '/') {
        path.pop_back();
    }
    for (;;) {
        levels.push_back(path);
        const auto slash = path.rfind('/');
        if (path.empty() || slash == std::string::npos) {
            break;
        }
        path.resize(slash);
    }
    return levels;
}

}  // namespace

std::optional<double> parse_cpu_max(std::string_view text) {
    text = core::trim(text);
    const auto space = text.find(' ');
    if (space == std::string_view::npos) {
        return std::nullopt;
    }
    const std::string_view quota = text.substr(0, space);
    if (quota == "max") {
        return std::nullopt;
    }
    const auto q = to_int(quota);
    const auto p = to_int(text.substr(space + 1));
    if (!q || !p) {
        return std::nullopt;
    }
    return ratio(*q, *p);
}

std::optional<double> parse_cfs_quota(std::string_view quota_us, std::string_view period_us) {
    const auto q = to_int(quota_us);
    const auto p = to_int(period_us);
    if (!q || !p) {
        return std::nullopt;
    }
    return ratio(*q, *p);
}

std::optional<double> cgroup_cpu_quota(const std::string& root) {
    const std::string base = root.empty() || root.back() != '/' ? root + "/" : root;
    const auto membership = slurp(base + "proc/self/cgroup");
    std::optional<double> best;
    if (!membership) {
        return best;
    }
    std::istringstream lines(*membership);
    std::string line;
    while (std::getline(lines, line)) {
        // "hierarchy-id:controllers:path"; v2 is "0::/path", v1 lists "cpu,cpuacct" or "cpu".
        const auto first = line.find(':');
        const auto second = first == std::string::npos ? first : line.find(':', first + 1);
        if (second == std::string::npos) {
            continue;
        }
        const std::string controllers = line.substr(first + 1, second - first - 1);
        const std::string path = line.substr(second + 1);
        if (line.compare(0, first, "0") == 0 && controllers.empty()) {
            for (const std::string& level : up_to_root(path)) {
                if (const auto text =
                        slurp((base + "sys/fs/cgroup").append(level).append("/cpu.max"))) {
                    keep_smaller(best, parse_cpu_max(*text));
                }
            }
            continue;
        }
        std::istringstream names(controllers);
        std::string name;
        bool cpu = false;
        while (std::getline(names, name, ',')) {
            cpu = cpu || name == "cpu";
        }
        if (!cpu) {
            continue;
        }
        // The v1 mount is "cpu,cpuacct" on most distributions, "cpu" on some.
        for (const char* mount : {"sys/fs/cgroup/cpu,cpuacct", "sys/fs/cgroup/cpu"}) {
            for (const std::string& level : up_to_root(path)) {
                const std::string dir = (base + mount).append(level);
                const auto quota = slurp(dir + "/cpu.cfs_quota_us");
                const auto period = slurp(dir + "/cpu.cfs_period_us");
                if (quota && period) {
                    keep_smaller(best, parse_cfs_quota(*quota, *period));
                }
            }
        }
    }
    return best;
}

unsigned affinity_cpus() {
    cpu_set_t set;
    CPU_ZERO(&set);
    if (::sched_getaffinity(0, sizeof set, &set) != 0) {
        return 0;
    }
    return static_cast<unsigned>(CPU_COUNT(&set));
}

thread_choice default_threads(std::optional<double> quota, unsigned hardware_threads,
                              unsigned allowed_cpus) {
    const std::uint32_t hardware = std::max(1u, hardware_threads);
    std::uint32_t threads = hardware;
    std::ostringstream reason;
    reason << hardware << " hardware threads";
    if (allowed_cpus > 0 && allowed_cpus < threads) {
        threads = allowed_cpus;
        reason << ", " << allowed_cpus << " in the affinity mask";
    }
    if (quota) {
        const auto rounded = static_cast<std::uint32_t>(std::max(1.0, std::ceil(*quota - 1e-9)));
        reason << ", cgroup CPU quota " << *quota;
        threads = std::min(threads, rounded);
    }
    if (threads > max_default_threads) {
        threads = max_default_threads;
        reason << ", at most " << max_default_threads << " by default";
    }
    return {threads, reason.str()};
}

}  // namespace tokenmeter::app
