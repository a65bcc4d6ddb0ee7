// relay/proxy_context: what every proxy session shares with the rest of the process.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <unordered_map>
#include <utility>

#include "core/job_thread.hpp"
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
    // WebSocket tunnels open, and upgrades on their way to one (websocket_limits::max_tunnels).
    std::atomic<std::int64_t> tunnels{0};
    net::edge_counters edge{};
    // Where a request with a large metered body is planned instead of its worker thread (the
    // process's finishing thread); null: on the worker.
    core::job_thread* planner = nullptr;
};

// A connection a drain can close while it waits for its next request.
class idle_closable {
  public:
    virtual ~idle_closable() = default;
    virtual void close_if_idle() = 0;
    // The end of a drain: a WebSocket tunnel is closed with 1001 (Going Away) to both sides.
    virtual void close_tunnel() {}
};

// Sessions of one worker thread, so a drain can close the idle ones. Touched only on that thread.
class session_registry {
  public:
    void add(const std::shared_ptr<idle_closable>& session);
    void remove(idle_closable* session);
    // Closes every session that is between requests; busy ones close after their response.
    void close_idle();
    // Closes every connection's WebSocket tunnel (idle_closable::close_tunnel).
    void close_tunnels();

  private:
    std::unordered_map<idle_closable*, std::weak_ptr<idle_closable>> sessions_;
};

// One place of websocket_limits::max_tunnels, held from the moment an upgrade is let through
// until its tunnel ends (or the upstream refused it): moved along, given back on destruction.
class tunnel_slot {
  public:
    tunnel_slot() = default;
    // A slot when fewer than `cap` are taken (0: no cap), else an empty one.
    static tunnel_slot take(std::atomic<std::int64_t>& taken, std::uint32_t cap) noexcept {
        const std::int64_t before = taken.fetch_add(1, std::memory_order_relaxed);
        if (cap != 0 && before >= static_cast<std::int64_t>(cap)) {
            taken.fetch_sub(1, std::memory_order_relaxed);
            return {};
        }
        return tunnel_slot(&taken);
    }
    tunnel_slot(tunnel_slot&& other) noexcept : taken_(std::exchange(other.taken_, nullptr)) {}
    tunnel_slot& operator=(tunnel_slot&& other) noexcept {
        if (this != &other) {
            release();
            taken_ = std::exchange(other.taken_, nullptr);
        }
        return *this;
    }
    tunnel_slot(const tunnel_slot&) = delete;
    tunnel_slot& operator=(const tunnel_slot&) = delete;
    ~tunnel_slot() { release(); }
    [[nodiscard]] explicit operator bool() const noexcept { return taken_ != nullptr; }

  private:
    explicit tunnel_slot(std::atomic<std::int64_t>* taken) noexcept : taken_(taken) {}
    void release() noexcept {
        if (taken_ != nullptr) {
            taken_->fetch_sub(1, std::memory_order_relaxed);
            taken_ = nullptr;
        }
    }
    std::atomic<std::int64_t>* taken_ = nullptr;
};

}  // namespace tokenmeter::relay
