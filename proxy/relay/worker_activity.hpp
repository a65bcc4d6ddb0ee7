// relay/worker_activity: the requests of the thread it is read on, counted by that thread's
// relay (each worker thread runs its own connections): what the worker's idle trim reads to
// tell a worker that has been idle for a while from one that is serving.
#pragma once

#include <cstdint>

namespace tokenmeter::relay {

struct worker_activity {
    std::int64_t in_flight = 0;  // requests begun and not yet ended
    std::uint64_t started = 0;   // requests begun since the thread started

    static worker_activity& for_thread() noexcept {
        thread_local worker_activity activity;
        return activity;
    }
};

}  // namespace tokenmeter::relay
