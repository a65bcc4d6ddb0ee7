// http/upstream_pool: a bounded set of keep-alive connections to the model server, one pool per
// worker thread so the request path takes no lock. Stale idle connections are detected before
// reuse; callers wait (bounded) when every connection is in use.
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "http/beast.hpp"

namespace tokenmeter::http {

struct upstream_connection {
    explicit upstream_connection(asio::io_context& ioc) : stream(ioc) {}
    tcp_stream stream;
    beast::flat_buffer buffer;
    std::chrono::steady_clock::time_point idle_since{};
    std::uint64_t requests = 0;
};
using upstream_ptr = std::unique_ptr<upstream_connection>;

struct upstream_pool_settings {
    std::string host;
    std::string port;
    std::uint32_t max_connections = 64;  // 0: no cap (bounded by open files)
    std::uint32_t max_idle = 16;
    std::chrono::milliseconds connect_timeout{5000};
    std::chrono::milliseconds idle_keepalive{60000};
    std::chrono::milliseconds acquire_timeout{5000};
};

// Errors the pool reports besides socket errors.
enum class pool_errc { exhausted = 1, shutting_down };
const boost::system::error_category& pool_category() noexcept;
inline error_code make_error_code(pool_errc e) noexcept {
    return {static_cast<int>(e), pool_category()};
}

// What the proxy refuses in an upstream response (beside Beast's parse errors).
enum class upstream_errc { switched_protocols = 1, too_many_interim };
const boost::system::error_category& upstream_category() noexcept;
inline error_code make_error_code(upstream_errc e) noexcept {
    return {static_cast<int>(e), upstream_category()};
}

class upstream_pool {
  public:
    // (error, connection, reused): on error the connection is null.
    using acquire_handler = std::function<void(error_code, upstream_ptr, bool)>;

    upstream_pool(asio::io_context& ioc, upstream_pool_settings settings);
    upstream_pool(const upstream_pool&) = delete;
    upstream_pool& operator=(const upstream_pool&) = delete;

    // Hands over an idle connection (unless allow_reuse is false) or a new one.
    void acquire(bool allow_reuse, acquire_handler handler);
    // Gives a connection back. Reusable only after a complete response with keep-alive.
    void release(upstream_ptr connection, bool reusable);
    void close_idle();

    [[nodiscard]] std::uint32_t open_connections() const noexcept { return open_; }
    [[nodiscard]] std::size_t idle_connections() const noexcept { return idle_.size(); }

  private:
    struct waiter {
        bool allow_reuse;
        acquire_handler handler;
        std::shared_ptr<steady_timer> timer;
    };

    [[nodiscard]] bool at_cap() const noexcept {
        return settings_.max_connections != 0 && open_ >= settings_.max_connections;
    }
    void connect(acquire_handler handler);
    void serve_waiters();
    upstream_ptr take_idle();

    asio::io_context& ioc_;
    upstream_pool_settings settings_;
    resolver resolver_;
    std::vector<upstream_ptr> idle_;
    std::deque<std::shared_ptr<waiter>> waiters_;
    std::uint32_t open_ = 0;  // idle + in use + connecting
};

}  // namespace tokenmeter::http

template <>
struct boost::system::is_error_code_enum<tokenmeter::http::pool_errc> : std::true_type {};
template <>
struct boost::system::is_error_code_enum<tokenmeter::http::upstream_errc> : std::true_type {};
