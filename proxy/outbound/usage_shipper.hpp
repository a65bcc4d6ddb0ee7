// outbound/usage_shipper: ships spooled usage records to an HTTP or HTTPS sink as CloudEvents
// batches, on a thread of its own through outbound/http_post, whose connection stays alive
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
#include "outbound/http_post.hpp"

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
using ship_failure = post_failure;
inline constexpr std::size_t ship_failure_count = post_failure_count;

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
    std::string reload_tls() { return poster_.reload_tls(); }

    [[nodiscard]] std::uint64_t acknowledged() const noexcept { return acknowledged_.load(); }
    [[nodiscard]] std::uint64_t errors(ship_failure f) const noexcept {
        return errors_[static_cast<std::size_t>(f)].load();
    }
    // End time (unix ms) of the oldest record not yet acknowledged; 0 when caught up.
    [[nodiscard]] std::int64_t oldest_unacknowledged_ms() const noexcept { return oldest_.load(); }

  private:
    void run();
    post_result post(const std::string& body);
    void refresh_token();
    void sleep_for(std::chrono::milliseconds d);

    std::filesystem::path dir_;
    shipper_options sink_;
    std::mutex mutex_;
    std::condition_variable wake_;
    bool woken_ = false;
    bool stopping_ = false;
    http_poster poster_;
    bool token_warned_ = false;
    std::atomic<std::uint64_t> acknowledged_{0};
    std::array<std::atomic<std::uint64_t>, ship_failure_count> errors_{};
    std::atomic<std::int64_t> oldest_{0};
    std::thread thread_;
};

}  // namespace tokenmeter::outbound
