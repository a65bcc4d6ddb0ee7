// bench_runner: what each proxy costs, measured from outside in one run. Rounds go straight to
// the simulator and through every proxy under test (tokenmeter, and nginx or haproxy beside it),
// in rotating order so machine noise hits all alike; per target: latency added per chunk, CPU
// per forwarded chunk, peak RSS and RSS per open stream, errors and chunks delivered.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "loopback_url.hpp"

namespace tokenmeter::load {

// One proxy under test. Its CPU and memory are the sum over `pids` (nginx: master and worker);
// without pids there are no CPU or memory figures for it.
struct bench_target {
    std::string name;
    loopback_url url;
    std::vector<pid_t> pids;
};

struct bench_options {
    loopback_url direct;
    std::vector<bench_target> targets;
    std::string baseline;  // a target name: the report adds each target's ratios to it
    std::string path = "/v1/chat/completions";
    std::string ca_file;  // trusted by https:// targets (see load_options::ca_file)
    std::string model = "bench-model";
    std::size_t concurrency = 64;
    std::uint64_t requests = 1000;  // per round
    std::uint32_t output_tokens = 100;
    std::uint32_t time_to_first_token_ms = 10;
    std::uint32_t inter_token_latency_ms = 5;
    std::optional<std::uint32_t> tokens_per_chunk;
    unsigned rounds = 3;
    // The memory phase holds `hold_streams` streams open at once (0: `concurrency`) through each
    // target before it has served anything: long and slow so they overlap.
    std::size_t hold_streams = 0;
    std::uint32_t hold_output_tokens = 200;
    std::uint32_t hold_inter_token_latency_ms = 20;
    double round_duration_limit_seconds = 120;
    bool json = false;
};

// "NAME=URL[,PID[+PID...]]" → a target; the error names what is wrong.
struct target_parse {
    std::optional<bench_target> target;
    std::string error;
};
target_parse parse_bench_target(const std::string& text);

// Returns the process exit code: 0 when every request succeeded.
int run_bench(const bench_options& options, std::ostream& out, std::ostream& log);

}  // namespace tokenmeter::load
