#pragma once

// State shared by the listener and every session: the options and a few counters that
// tests read from GET /sim/stats (for example, to see that the proxy abandoned a stream).

#include <atomic>
#include <cstdint>

#include "sim_options.hpp"

namespace tokenmeter::sim {

struct server_stats {
    std::atomic<std::uint64_t> connections_accepted{0};
    std::atomic<std::uint64_t> connections_active{0};
    std::atomic<std::uint64_t> requests{0};
    std::atomic<std::uint64_t> streams_started{0};
    std::atomic<std::uint64_t> streams_completed{0};
    std::atomic<std::uint64_t> streams_aborted{0};    // the client went away mid-stream
    std::atomic<std::uint64_t> streams_truncated{0};  // x-sim-fail: close-after
};

struct server_state {
    explicit server_state(server_options opts) : options(std::move(opts)) {}

    const server_options options;
    std::atomic<std::uint64_t> next_request_id{1};
    server_stats stats;
};

}  // namespace tokenmeter::sim
