// bench_runner: the proxy's cost measured from outside in one run: rounds straight to the
// simulator and through the proxy, interleaved so machine noise hits both alike; per-chunk added
// latency, proxy CPU per forwarded chunk, and proxy memory per open stream.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <ostream>
#include <string>

#include "loopback_url.hpp"

namespace tokenmeter::load {

struct bench_options {
    loopback_url proxy;
    loopback_url direct;
    std::optional<pid_t> proxy_pid;  // without it, no CPU or memory figures
    std::string path = "/v1/chat/completions";
    std::string model = "bench-model";
    std::size_t concurrency = 64;
    std::uint64_t requests = 1000;  // per round
    std::uint32_t output_tokens = 100;
    std::uint32_t time_to_first_token_ms = 10;
    std::uint32_t inter_token_latency_ms = 5;
    std::optional<std::uint32_t> tokens_per_chunk;
    unsigned rounds = 3;
    // The memory phase holds `concurrency` streams open at once: long and slow so they overlap.
    std::uint32_t hold_output_tokens = 200;
    std::uint32_t hold_inter_token_latency_ms = 20;
    double round_duration_limit_seconds = 120;
    bool json = false;
};

// Returns the process exit code: 0 when every request succeeded.
int run_bench(const bench_options& options, std::ostream& out, std::ostream& log);

}  // namespace tokenmeter::load
