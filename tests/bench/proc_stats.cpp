#include "proc_stats.hpp"

#include <unistd.h>

#include <fstream>
#include <iterator>
#include <sstream>
#include <string>

namespace tokenmeter::load {

std::optional<cpu_times> process_cpu_seconds(pid_t pid) {
    std::ifstream file("/proc/" + std::to_string(pid) + "/stat");
    if (!file) {
        return std::nullopt;
    }
    std::string text((std::istreambuf_iterator<char>(file)), std::istreambuf_iterator<char>());
    // comm (field 2) may itself contain spaces and parentheses; fields resume after the last ')'.
    std::size_t close = text.rfind(')');
    if (close == std::string::npos) {
        return std::nullopt;
    }
    std::istringstream fields(text.substr(close + 1));
    // After comm: state(3) ppid pgrp session tty_nr tpgid flags minflt cminflt majflt cmajflt
    // utime(14) stime(15).
    std::string skipped;
    for (int field = 3; field <= 13; ++field) {
        fields >> skipped;
    }
    unsigned long long utime = 0;
    unsigned long long stime = 0;
    if (!(fields >> utime >> stime)) {
        return std::nullopt;
    }
    long ticks_per_second = sysconf(_SC_CLK_TCK);
    if (ticks_per_second <= 0) {
        return std::nullopt;
    }
    const auto ticks = static_cast<double>(ticks_per_second);
    return cpu_times{static_cast<double>(utime) / ticks, static_cast<double>(stime) / ticks};
}

std::optional<std::uint64_t> process_rss_kib(pid_t pid) {
    std::ifstream file("/proc/" + std::to_string(pid) + "/status");
    std::string line;
    while (std::getline(file, line)) {
        if (line.starts_with("VmRSS:")) {
            std::istringstream value(line.substr(6));
            std::uint64_t kib = 0;
            if (value >> kib) {
                return kib;
            }
            return std::nullopt;
        }
    }
    return std::nullopt;
}

}  // namespace tokenmeter::load
