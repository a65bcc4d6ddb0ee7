// bench_report: what one bench run found, and its report as a table or JSON: per target the
// medians across rounds, latency added per chunk against direct (paired by round), CPU per
// forwarded chunk, memory, errors, and the ratios to a baseline target (nginx, say).
#pragma once

#include <cstdint>
#include <limits>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "bench_runner.hpp"

namespace tokenmeter::load {

inline constexpr double no_value = std::numeric_limits<double>::quiet_NaN();

struct round_report {
    std::string target;  // "direct" or a target's name
    unsigned round = 0;
    std::uint64_t ok = 0;
    std::uint64_t failed = 0;
    std::uint64_t content_chunks = 0;
    std::uint64_t unstamped_chunks = 0;
    double wall_seconds = 0;
    double delivery_p50 = no_value;
    double delivery_p90 = no_value;
    double delivery_p99 = no_value;
    // p99 of each stream's first load_result::first_chunks chunks, and of the chunks after them.
    double delivery_first_chunks_p99 = no_value;
    double delivery_later_chunks_p99 = no_value;
    double time_to_first_token_p50 = no_value;
    double time_to_first_token_p99 = no_value;
    double cpu_seconds = no_value;
    double cpu_seconds_per_million_chunks = no_value;
    // The user-space part of it (utime; the rest is the kernel's work for the process).
    double user_seconds_per_million_chunks = no_value;
    std::uint64_t peak_rss_kib = 0;  // 0: not measured
    std::string first_error;
};

struct memory_report {
    std::uint64_t idle_rss_kib = 0;
    std::uint64_t peak_rss_kib = 0;  // highest sample while every stream was open
    std::size_t streams = 0;
    std::size_t samples_all_open = 0;
    std::uint64_t ok = 0;
    std::uint64_t failed = 0;
    std::uint64_t chunks = 0;
    double rss_per_stream_kib = no_value;
    std::string first_error;
};

struct target_results {
    std::string name;
    bool measured = false;  // has PIDs: CPU and memory figures
    std::vector<round_report> rounds;
    std::optional<memory_report> memory;
};

struct bench_results {
    std::vector<round_report> direct;
    std::vector<target_results> targets;
};

// Prints the report; returns 0 when every request succeeded, else 1.
int print_bench(const bench_options& options, const bench_results& results, std::ostream& out);

}  // namespace tokenmeter::load
