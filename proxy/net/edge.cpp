#include "net/edge.hpp"

#include <spdlog/spdlog.h>

#include <cerrno>

#include "metrics/process.hpp"
#include "metrics/tls.hpp"

namespace tokenmeter::net {

bool log_limiter::allow(std::uint64_t& suppressed) noexcept {
    const std::int64_t now = std::chrono::duration_cast<std::chrono::nanoseconds>(
                                 std::chrono::steady_clock::now().time_since_epoch())
                                 .count();
    std::int64_t next = next_ns_.load(std::memory_order_relaxed);
    if (now >= next &&
        next_ns_.compare_exchange_strong(next, now + interval_ns_, std::memory_order_relaxed)) {
        suppressed = suppressed_.exchange(0, std::memory_order_relaxed);
        return true;
    }
    suppressed_.fetch_add(1, std::memory_order_relaxed);
    return false;
}

void edge_counters::internal_error(const char* what) noexcept {
    try {
        if (metrics_ != nullptr) {
            metrics_->internal_error();
        }
        std::uint64_t suppressed = 0;
        if (internal_log_.allow(suppressed)) {
            spdlog::error(
                "a client connection failed inside the proxy and was closed: {} ({} more since the "
                "last report)",
                what, suppressed);
        }
    } catch (...) {
        // Counting must not add a failure of its own.
    }
}

bool edge_counters::accept_error(std::string_view listener, int error_value,
                                 std::string_view message) noexcept {
    const bool fds = error_value == EMFILE || error_value == ENFILE;
    const bool memory = error_value == ENOBUFS || error_value == ENOMEM;
    try {
        if (metrics_ != nullptr) {
            metrics_->accept_error(fds      ? "too_many_open_files"
                                   : memory ? "out_of_memory"
                                            : "other");
        }
        std::uint64_t suppressed = 0;
        if (accept_log_.allow(suppressed)) {
            spdlog::warn("{} listener: accept failed: {}{} ({} more since the last report)",
                         listener, message,
                         fds ? "; backing off (raise the open-files limit, or lower "
                               "limits.max_client_connections)"
                             : "",
                         suppressed);
        }
    } catch (...) {
    }
    return fds || memory;
}

void edge_counters::connection_refused() noexcept {
    try {
        if (metrics_ != nullptr) {
            metrics_->connection_refused();
        }
        std::uint64_t suppressed = 0;
        if (refused_log_.allow(suppressed)) {
            spdlog::warn(
                "limits.max_client_connections reached: new connections get 503 ({} more since "
                "the last report)",
                suppressed);
        }
    } catch (...) {
    }
}

void tls_handshake_counters::done(bool resumed) noexcept {
    try {
        if (metrics_ != nullptr) {
            metrics_->handshake(resumed);
        }
    } catch (...) {
        // Counting must not add a failure of its own.
    }
}

void tls_handshake_counters::failed(std::string_view reason, const std::string& detail) noexcept {
    try {
        if (metrics_ != nullptr) {
            metrics_->handshake_error(reason);
        }
        // A client's mistake, not the proxy's: debug, and never more than a line a second.
        std::uint64_t suppressed = 0;
        if (spdlog::should_log(spdlog::level::debug) && log_.allow(suppressed)) {
            spdlog::debug(
                "{} listener: TLS handshake failed ({}): {} ({} more since the last report)",
                listener_, reason, detail, suppressed);
        }
    } catch (...) {
        // Counting must not add a failure of its own.
    }
}

}  // namespace tokenmeter::net
