// observe/task_sessions: adds up the requests of one multi-request task (a session: the same
// session id, task and model) into one observation: first request received → last token of the
// last request, the requests and their tokens. A session ends `idle_expiry` after its last
// request ended with none in flight; it is found ended by a sweep (at each request end and on
// each scrape), never by a timer. Bounded: at most `max_sessions` at once, the least recently
// active evicted beyond that. Session ids are kept only as a keyed hash (HMAC-SHA256 with a key
// drawn at start, 128 bits): never the id itself. Thread-safe: one mutex, taken once when a
// session's request begins and once when it ends; nothing per chunk. No I/O, no clock.
#pragma once

#include <array>
#include <cstdint>
#include <list>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "core/time.hpp"

namespace tokenmeter::observe {

struct task_session_options {
    core::duration idle_expiry = std::chrono::minutes(5);
    std::size_t max_sessions = 10'000;
};

// Which session a request belongs to: the hashed id, the task label and the model name.
struct session_key {
    std::array<std::uint64_t, 2> id_digest{};
    std::string task;
    std::string model;
    bool operator==(const session_key&) const = default;
};

// What one request adds to its session.
struct session_request {
    core::time_point start{};  // request head received
    core::time_point done{};   // its last token (or the end of its response, without any)
    std::uint64_t input_tokens = 0;
    std::uint64_t output_tokens = 0;
};

// A session that ended: what tokenmeter_task_session_* observe.
struct finished_session {
    std::string task;
    std::string model;
    double duration_seconds = 0;  // first request start → last request done
    std::uint64_t requests = 0;
    std::uint64_t input_tokens = 0;
    std::uint64_t output_tokens = 0;
};

// What a call changed, for the caller to record outside the lock.
struct session_events {
    std::vector<finished_session> ended;
    std::uint64_t evicted = 0;  // sessions dropped unobserved to make room
    std::size_t active = 0;     // sessions held after the call
};

class task_sessions {
  public:
    // Longest session id kept; a longer one, or one with bytes outside visible ASCII, is refused.
    static constexpr std::size_t max_id_length = 256;

    explicit task_sessions(task_session_options options);

    // The key of a request's session; nullopt when the id is empty, too long or not visible
    // ASCII (the caller counts it; the request is then not part of any session).
    [[nodiscard]] std::optional<session_key> key_for(std::string_view id, std::string_view task,
                                                     std::string_view model) const;

    // A request of the session starts (received at `at`): the session exists and is active until
    // the request ends. May evict the least recently active session when full.
    session_events begin(const session_key& key, core::time_point at);
    // The request ends at `now`; `counted`: it was forwarded (a refused request adds nothing).
    // Sweeps out sessions idle for longer than idle_expiry.
    session_events end(const session_key& key, const std::optional<session_request>& counted,
                       core::time_point now);
    // Ends every session idle for idle_expiry at `now` (called on each scrape).
    session_events sweep(core::time_point now);

    [[nodiscard]] std::size_t size() const;

  private:
    struct key_hash {
        std::size_t operator()(const session_key& k) const noexcept;
    };
    struct entry {
        session_key key;
        core::time_point first_start{};
        core::time_point last_done{};
        core::time_point last_activity{};  // latest request start or end: idle counts from here
        std::uint32_t in_flight = 0;
        std::uint64_t requests = 0;
        std::uint64_t input_tokens = 0;
        std::uint64_t output_tokens = 0;
    };
    using lru_list = std::list<entry>;  // least recently active first

    lru_list::iterator find_or_add(const session_key& key, core::time_point at,
                                   session_events& events);
    void touch(lru_list::iterator it, core::time_point at);
    void sweep_locked(core::time_point now, session_events& events);

    task_session_options options_;
    std::array<unsigned char, 32> hash_key_{};
    mutable std::mutex mutex_;
    lru_list sessions_;
    std::unordered_map<session_key, lru_list::iterator, key_hash> index_;
};

}  // namespace tokenmeter::observe
