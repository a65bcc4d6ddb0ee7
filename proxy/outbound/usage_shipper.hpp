// outbound/usage_shipper: ships spooled usage records to an HTTP or HTTPS sink as CloudEvents
// batches, on a thread of its own with a small blocking client that keeps its connection alive
// between batches. The cursor file moves only after a 2xx, so every record stays in the spool
// until the sink has acknowledged it; failures are retried with exponential backoff and jitter,
// forever (the backlog gauges are the alert, not a drop). The bearer token is sent, never
// logged.
#pragma once

#include <array>
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>

#include "net/endpoint.hpp"

namespace boost::asio::ssl {
class context;
}  // namespace boost::asio::ssl

namespace tokenmeter::outbound {

// Where and how usage records are posted (usage.sink in the config).
struct shipper_options {
    std::string url;               // as configured, for log lines
    net::upstream_address target;  // parsed from url; scheme "https": TLS with verification
    std::uint32_t batch_size = 100;
    std::chrono::milliseconds backoff_initial{200};
    std::chrono::milliseconds backoff_max{30'000};
    std::chrono::milliseconds request_timeout{10'000};
    std::string source = "tokenmeter";  // CloudEvents "source"
    std::string ca_file;                // https: PEM CAs instead of the system bundle
    std::string ca_file_key = "usage.sink.ca_file";
    std::string token;       // "Authorization: Bearer <token>"; "" = no header
    std::string token_file;  // when set: re-read before every batch (a rotated secret)
};

// Why a batch was not acknowledged: the reason label of tokenmeter_usage_ship_errors_total.
enum class ship_failure : std::uint8_t {
    connect,       // name resolution or TCP connect failed
    tls,           // handshake failed: certificate, host name, protocol
    timeout,       // no answer within request_timeout
    unauthorized,  // 401 or 403: the token was refused
    status,        // any other non-2xx answer
    protocol,      // the connection broke or the answer was not HTTP/1.1 within bounds
};
inline constexpr std::size_t ship_failure_count = 6;
std::string_view to_string(ship_failure f);

class usage_shipper {
  public:
    // Throws std::runtime_error naming the key when https's CA file does not load.
    usage_shipper(std::filesystem::path dir, shipper_options sink);
    ~usage_shipper();
    usage_shipper(const usage_shipper&) = delete;
    usage_shipper& operator=(const usage_shipper&) = delete;

    void start();
    void stop();
    // New records are on disk: look now instead of at the next poll.
    void wake();
    // SIGHUP: load the CA file again for the next connection. "" when it loaded (or there is no
    // TLS), else the error naming the key; the CAs in use stay.
    std::string reload_tls();

    [[nodiscard]] std::uint64_t acknowledged() const noexcept { return acknowledged_.load(); }
    [[nodiscard]] std::uint64_t errors(ship_failure f) const noexcept {
        return errors_[static_cast<std::size_t>(f)].load();
    }
    // End time (unix ms) of the oldest record not yet acknowledged; 0 when caught up.
    [[nodiscard]] std::int64_t oldest_unacknowledged_ms() const noexcept { return oldest_.load(); }

  private:
    struct connection;
    struct outcome {
        int status = 0;  // 0: no answer
        ship_failure failure = ship_failure::protocol;
        std::string error;   // for the log; never holds the token
        bool stale = false;  // a kept-alive connection the sink had closed: retry at once
    };

    void run();
    outcome post(const std::string& body);
    outcome post_once(const std::string& body);
    bool connect(outcome& out);
    void refresh_token();
    void sleep_for(std::chrono::milliseconds d);

    std::filesystem::path dir_;
    shipper_options sink_;
    const net::upstream_address& target_ = sink_.target;
    std::mutex mutex_;
    std::condition_variable wake_;
    bool woken_ = false;
    bool stopping_ = false;
    std::shared_ptr<boost::asio::ssl::context> tls_context_;  // under mutex_; null for http
    std::unique_ptr<connection> connection_;                  // the shipper thread's only
    bool token_warned_ = false;
    std::atomic<std::uint64_t> acknowledged_{0};
    std::array<std::atomic<std::uint64_t>, ship_failure_count> errors_{};
    std::atomic<std::int64_t> oldest_{0};
    std::thread thread_;
};

}  // namespace tokenmeter::outbound
