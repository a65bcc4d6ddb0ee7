// outbound/redis_connection: one connection of the Redis store's pool, on the store's thread.
// Resolves, connects (TLS for rediss://, the certificate checked against the host name),
// authenticates, and sends a probe whose answer shows the replies are in step with the commands;
// then pipelines calls and matches replies in order. What the server sends is read by the
// bounded RESP reader; a reply nobody asked for, a reply past a bound, or bytes that are not
// RESP close the connection, and every call pending on it answers `connection`. A closed
// connection comes back after a backoff (exponential, full jitter) that starts over only once a
// connection has answered a call in time. Internal to outbound/redis_*.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "net/beast.hpp"
#include "observe/shared_limit.hpp"
#include "outbound/redis_protocol.hpp"
#include "outbound/redis_store.hpp"

namespace tokenmeter::outbound {

class redis_connection;

// One call from the moment a worker asked until its callback ran: answered, timed out or failed.
struct pending_call {
    using clock_type = std::chrono::steady_clock;

    pending_call(asio::io_context& ioc, observe::shared_call c,
                 std::function<void(const observe::store_reply&)> d, clock_type::time_point at);

    void finish(observe::store_reply reply) noexcept;
    void fail(observe::store_failure failure) noexcept;

    observe::shared_call call;
    std::function<void(const observe::store_reply&)> done;
    clock_type::time_point started;
    steady_timer timer;
    bool finished = false;
    bool sent_script = false;  // the EVAL fallback after NOSCRIPT was used
    std::string tag;           // what the script's reply must carry back (script_command)
    // Where it was sent: a call that times out closes that connection.
    std::weak_ptr<redis_connection> connection;
    std::uint64_t link_id = 0;
};

class redis_connection : public std::enable_shared_from_this<redis_connection> {
  public:
    redis_connection(asio::io_context& ioc, const redis_settings& settings, const std::string& sha,
                     std::uint64_t seed);
    ~redis_connection();
    redis_connection(const redis_connection&) = delete;
    redis_connection& operator=(const redis_connection&) = delete;

    // In step with the server and taking calls.
    [[nodiscard]] bool ready() const noexcept;
    [[nodiscard]] std::size_t in_flight() const noexcept { return waiting_.size(); }

    void connect();
    // Pipelines the call; fails it `connection` when not ready or the pipeline is full.
    void send(const std::shared_ptr<pending_call>& call);
    // A call sent on link `link_id` got no answer in time: that link is closed.
    void timed_out(std::uint64_t link_id);
    // The store stops: the link closes, pending calls fail `connection`, nothing reconnects.
    void close();

  private:
    struct link;
    enum class phase : std::uint8_t { down, connecting, probing, ready };
    // Why a link closed: a broken promise of the server's (a reply nobody asked for, past a
    // bound, not RESP) never starts the backoff over; anything else does once a call was
    // answered on the link.
    enum class close_kind : std::uint8_t { fault, violation };
    struct waiting {
        std::shared_ptr<pending_call> call;  // null: the AUTH or the probe
        enum class what : std::uint8_t { auth, probe, call } kind = what::call;
    };

    void on_resolved(const std::shared_ptr<link>& l, const error_code& ec,
                     const asio::ip::basic_resolver_results<tcp>& endpoints);
    void on_connected(const std::shared_ptr<link>& l, const error_code& ec);
    void start_session(const std::shared_ptr<link>& l);
    void read(const std::shared_ptr<link>& l);
    void on_read(const std::shared_ptr<link>& l, const error_code& ec, std::size_t n);
    void on_reply(const std::shared_ptr<link>& l, const resp::value& reply);
    void on_call_reply(const std::shared_ptr<link>& l, const std::shared_ptr<pending_call>& call,
                       const resp::value& reply);
    void write(const std::shared_ptr<link>& l, std::string_view bytes);
    void flush(const std::shared_ptr<link>& l);
    void drop(std::string_view why, close_kind kind);
    void reconnect_later();
    void log_down(std::string_view why);
    [[nodiscard]] std::string where() const;

    asio::io_context& ioc_;
    const redis_settings& settings_;
    const std::string& sha_;
    resolver resolver_;
    steady_timer deadline_;  // the connect phase, until the probe's answer
    steady_timer retry_;     // the backoff before the next attempt
    reconnect_backoff backoff_;
    std::mt19937_64 random_;  // probe tokens
    std::shared_ptr<link> link_;
    std::uint64_t next_link_id_ = 1;
    std::deque<waiting> waiting_;  // sent on link_, answered in this order
    std::string probe_token_;
    std::uint64_t tags_sent_ = 0;  // the bucket calls sent: each call's tag is its number
    phase phase_ = phase::down;
    bool answered_ = false;  // a call was answered in time on link_
    bool closing_ = false;
    bool down_logged_ = false;
};

}  // namespace tokenmeter::outbound
