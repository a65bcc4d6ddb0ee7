// relay/proxy_context: what every proxy session shares with the rest of the process.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <unordered_map>

#include "core/time.hpp"
#include "net/edge.hpp"
#include "observe/observer.hpp"
#include "relay/session_settings.hpp"

namespace tokenmeter::relay {

struct proxy_context {
    const session_settings& settings;
    observe::observer& observer;
    const core::clock& clock;
    std::atomic<bool> draining{false};
    std::atomic<std::int64_t> requests_in_flight{0};
    std::atomic<std::int64_t> client_connections{0};
    net::edge_counters edge{};
};

// A connection a drain can close while it waits for its next request.
class idle_closable {
  public:
    virtual ~idle_closable() = default;
    virtual void close_if_idle() = 0;
};

// Sessions of one worker thread, so a drain can close the idle ones. Touched only on that thread.
class session_registry {
  public:
    void add(const std::shared_ptr<idle_closable>& session);
    void remove(idle_closable* session);
    // Closes every session that is between requests; busy ones close after their response.
    void close_idle();

  private:
    std::unordered_map<idle_closable*, std::weak_ptr<idle_closable>> sessions_;
};

}  // namespace tokenmeter::relay
