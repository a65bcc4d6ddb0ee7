// relay/upstream_pool: a bounded set of keep-alive connections to the model server, one pool per
// worker thread so the request path takes no lock. Stale idle connections are detected before
// reuse; callers wait (bounded) when every connection is in use. For an https:// upstream each
// new connection does its TLS handshake here (under the connect timeout), offering the worker's
// last session so that pooled connections resume rather than repeat the full handshake.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "net/beast.hpp"
#include "net/name_resolver.hpp"
#include "net/tls_client.hpp"
#include "net/tls_stream.hpp"
#include "relay/drained_read.hpp"

namespace tokenmeter::relay {

// The connection to the upstream: TCP, or TLS over TCP for an https:// upstream. Beast's HTTP
// algorithms see one stream type either way; which one is chosen per connection at run time, so
// the sessions (already one per client stream type) are not instantiated twice more.
class upstream_stream {
  public:
    // TLS when `tls` is given (the context must outlive the stream).
    upstream_stream(asio::io_context& ioc, ssl::context* tls) {
        if (tls != nullptr) {
            tls_.emplace(ioc, *tls);
        } else {
            plain_.emplace(ioc);
        }
    }

    using executor_type = tcp_stream::executor_type;
    executor_type get_executor() noexcept { return lowest().get_executor(); }
    tcp_stream& lowest() noexcept { return tls_ ? tls_->next_layer() : *plain_; }
    net::tls_stream* tls() noexcept { return tls_ ? &*tls_ : nullptr; }
    socket_type& socket() noexcept { return lowest().socket(); }
    void expires_after(std::chrono::steady_clock::duration d) { lowest().expires_after(d); }
    void expires_never() { lowest().expires_never(); }
    void cancel() { lowest().cancel(); }

    template <class MutableBuffers, class Handler>
    void async_read_some(const MutableBuffers& buffers, Handler&& handler) {
        if (tls_) {
            tls_->async_read_some(
                buffers, truncation_as_eof<std::decay_t<Handler>>{std::forward<Handler>(handler)});
        } else {
            plain_->async_read_some(buffers, std::forward<Handler>(handler));
        }
    }
    template <class ConstBuffers, class Handler>
    void async_write_some(const ConstBuffers& buffers, Handler&& handler) {
        if (tls_) {
            tls_->async_write_some(buffers, std::forward<Handler>(handler));
        } else {
            plain_->async_write_some(buffers, std::forward<Handler>(handler));
        }
    }

  private:
    // A server that closes without close_notify ends the stream as a TCP close does: HTTP's own
    // framing (Content-Length, the last chunk) says whether the body was whole, and a body that
    // ends at the close is read to the close, as over TCP.
    template <class Handler>
    struct truncation_as_eof {
        Handler handler;
        void operator()(error_code ec, std::size_t bytes) {
            if (ec == ssl::error::stream_truncated) {
                ec = asio::error::eof;
            }
            std::move(handler)(ec, bytes);
        }
    };

    std::optional<tcp_stream> plain_;
    std::optional<net::tls_stream> tls_;
};

struct upstream_connection {
    upstream_connection(asio::io_context& ioc, ssl::context* tls) : stream(ioc, tls) {}
    upstream_stream stream;
    beast::flat_buffer buffer;
    std::chrono::steady_clock::time_point idle_since{};
    std::uint64_t requests = 0;
    bool hangup_watched = false;  // registered with the pool's hangup_watch
};
using upstream_ptr = std::unique_ptr<upstream_connection>;

struct upstream_pool_settings {
    std::string host;
    std::string port;
    std::uint32_t max_connections = 64;  // 0: no cap (bounded by open files)
    std::uint32_t max_idle = 16;         // 0: no cap (each is closed after idle_keepalive)
    std::chrono::milliseconds connect_timeout{5000};
    std::chrono::milliseconds idle_keepalive{60000};
    std::chrono::milliseconds acquire_timeout{5000};
    // https:// upstreams: the verifying client context (null: plain TCP) and the name sent as
    // SNI and checked in the certificate.
    std::shared_ptr<ssl::context> tls;
    std::string tls_server_name;
    // Called after each successful upstream handshake (resumed: an earlier session was reused).
    std::function<void(bool resumed)> on_tls_handshake;
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
    // (error, connection, reused, detail): on error the connection is null, and detail may say
    // more than the error code (a certificate verdict: "certificate has expired").
    using acquire_handler = std::function<void(error_code, upstream_ptr, bool, std::string)>;

    // A host name is resolved by `names` (a worker's io_context cannot run Asio's own resolver,
    // net/name_resolver), which must outlive the pool; an IP literal is not resolved at all.
    upstream_pool(asio::io_context& ioc, upstream_pool_settings settings,
                  net::name_resolver& names);
    upstream_pool(const upstream_pool&) = delete;
    upstream_pool& operator=(const upstream_pool&) = delete;
    upstream_pool(upstream_pool&&) = delete;
    upstream_pool& operator=(upstream_pool&&) = delete;
    ~upstream_pool() = default;

    // Hands over an idle connection (unless allow_reuse is false) or a new one.
    void acquire(bool allow_reuse, acquire_handler handler);
    // Gives a connection back. Reusable only after a complete response with keep-alive.
    void release(upstream_ptr connection, bool reusable);
    void close_idle();

    [[nodiscard]] std::uint32_t open_connections() const noexcept { return open_; }
    [[nodiscard]] std::size_t idle_connections() const noexcept { return idle_.size(); }

    // The pool's sizes as last published (after each change), readable from any thread: the
    // admin listener sums them over the workers at each scrape.
    struct counts {
        std::uint32_t open = 0;     // idle + in use + connecting
        std::uint32_t idle = 0;     // kept for reuse
        std::uint32_t waiting = 0;  // requests waiting for a connection (at max_connections)
    };
    [[nodiscard]] counts published() const noexcept {
        return {published_open_.load(std::memory_order_relaxed),
                published_idle_.load(std::memory_order_relaxed),
                published_waiting_.load(std::memory_order_relaxed)};
    }
    // Peers' closes on this worker's upstream sockets (for drained reads, relay/drained_read).
    hangup_watch& hangups() noexcept { return hangups_; }

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
    void connect_to(const tcp::resolver::results_type& endpoints, acquire_handler handler,
                    upstream_ptr connection);
    void handshake(upstream_ptr connection, acquire_handler handler);
    void fail_connect(acquire_handler& handler, error_code ec, std::string detail = {});
    void serve_waiters();
    upstream_ptr take_idle();
    void publish() noexcept {
        published_open_.store(open_, std::memory_order_relaxed);
        published_idle_.store(static_cast<std::uint32_t>(idle_.size()), std::memory_order_relaxed);
        published_waiting_.store(static_cast<std::uint32_t>(waiters_.size()),
                                 std::memory_order_relaxed);
    }
    // Publishes the sizes when the change it guards is over, on every way out.
    class publish_on_exit {
      public:
        explicit publish_on_exit(upstream_pool& pool) noexcept : pool_(pool) {}
        publish_on_exit(const publish_on_exit&) = delete;
        publish_on_exit& operator=(const publish_on_exit&) = delete;
        publish_on_exit(publish_on_exit&&) = delete;
        publish_on_exit& operator=(publish_on_exit&&) = delete;
        ~publish_on_exit() { pool_.publish(); }

      private:
        upstream_pool& pool_;
    };

    asio::io_context& ioc_;
    upstream_pool_settings settings_;
    net::name_resolver& names_;
    // The upstream's endpoint when its host is an IP literal: no resolution per connection.
    std::optional<tcp::resolver::results_type> literal_;
    // Connections waiting for names_' answer, by the number the answer names.
    struct resolving {
        acquire_handler handler;
        upstream_ptr connection;
    };
    std::unordered_map<std::uint64_t, resolving> resolving_;
    std::uint64_t next_resolution_ = 0;
    std::deque<upstream_ptr> idle_;  // the most recently used at the back
    std::deque<std::shared_ptr<waiter>> waiters_;
    std::uint32_t open_ = 0;  // idle + in use + connecting
    std::atomic<std::uint32_t> published_open_{0};
    std::atomic<std::uint32_t> published_idle_{0};
    std::atomic<std::uint32_t> published_waiting_{0};
    net::tls_session_cache sessions_;  // this worker's last upstream TLS session
    hangup_watch hangups_;
};

}  // namespace tokenmeter::relay

template <>
struct boost::system::is_error_code_enum<tokenmeter::relay::pool_errc> : std::true_type {};
template <>
struct boost::system::is_error_code_enum<tokenmeter::relay::upstream_errc> : std::true_type {};
