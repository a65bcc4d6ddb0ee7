// net/edge: what goes wrong at the edge, counted and logged without flooding: at most one log
// line per second per kind, carrying how many were suppressed since the last one.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>

namespace tokenmeter::metrics {
class edge_metrics;
class tls_metrics;
}  // namespace tokenmeter::metrics

namespace tokenmeter::net {

// Thread-safe; lock-free. allow() says whether to log now and how many calls it swallowed.
class log_limiter {
  public:
    explicit log_limiter(std::chrono::milliseconds interval = std::chrono::seconds(1))
        : interval_ns_(std::chrono::duration_cast<std::chrono::nanoseconds>(interval).count()) {}
    bool allow(std::uint64_t& suppressed) noexcept;

  private:
    std::int64_t interval_ns_;
    std::atomic<std::int64_t> next_ns_{0};
    std::atomic<std::uint64_t> suppressed_{0};
};

// One TLS listener's handshakes: counted by the listener's tls_metrics (when attached), failures
// logged at debug, at most one line a second. Thread-safe.
class tls_handshake_counters {
  public:
    explicit tls_handshake_counters(std::string_view listener) : listener_(listener) {}
    void attach(metrics::tls_metrics* metrics) noexcept { metrics_ = metrics; }
    // A handshake completed, or failed for `reason` (net/tls_stream's classification; `detail`
    // is OpenSSL's words, logged at debug).
    void done(bool resumed) noexcept;
    void failed(std::string_view reason, const std::string& detail) noexcept;

  private:
    std::string_view listener_;  // a literal: "proxy", "admin"
    metrics::tls_metrics* metrics_ = nullptr;
    log_limiter log_;
};

class edge_counters {
  public:
    void attach(metrics::edge_metrics* metrics) noexcept { metrics_ = metrics; }
    void attach_tls(metrics::tls_metrics* metrics) noexcept { tls_.attach(metrics); }

    // A connection ended because handling it threw.
    void internal_error(const char* what) noexcept;
    // accept() failed on a listener; returns true for descriptor or memory exhaustion, after
    // which the caller backs off.
    bool accept_error(std::string_view listener, int error_value,
                      std::string_view message) noexcept;
    void connection_refused() noexcept;
    // A client's TLS handshake on the proxy listener (the admin listener counts its own).
    void tls_handshake_done(bool resumed) noexcept { tls_.done(resumed); }
    void tls_handshake_failed(std::string_view reason, const std::string& detail) noexcept {
        tls_.failed(reason, detail);
    }

  private:
    metrics::edge_metrics* metrics_ = nullptr;
    tls_handshake_counters tls_{"proxy"};
    log_limiter internal_log_;
    log_limiter accept_log_;
    log_limiter refused_log_;
};

}  // namespace tokenmeter::net
