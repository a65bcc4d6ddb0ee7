// http/usage_shipper: ships spooled usage records to an HTTP sink as CloudEvents batches, on a
// thread of its own with a small blocking client. The cursor file moves only after a 2xx, so
// every record stays in the spool until the sink has acknowledged it; failures are retried
// with exponential backoff and jitter, forever (the backlog gauges are the alert, not a drop).
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <filesystem>
#include <mutex>
#include <string>
#include <thread>

#include "http/session_settings.hpp"

namespace tokenmeter::http {

// Where and how usage records are posted (usage.sink in the config).
struct shipper_options {
    std::string url;        // as configured, for log lines
    upstream_address target;  // parsed from url
    std::uint32_t batch_size = 100;
    std::chrono::milliseconds backoff_initial{200};
    std::chrono::milliseconds backoff_max{30'000};
    std::chrono::milliseconds request_timeout{10'000};
    std::string source = "tokenmeter";  // CloudEvents "source"
};

class usage_shipper {
  public:
    usage_shipper(std::filesystem::path dir, shipper_options sink);
    ~usage_shipper();
    usage_shipper(const usage_shipper&) = delete;
    usage_shipper& operator=(const usage_shipper&) = delete;

    void start();
    void stop();
    // New records are on disk: look now instead of at the next poll.
    void wake();

    [[nodiscard]] std::uint64_t acknowledged() const noexcept { return acknowledged_.load(); }
    [[nodiscard]] std::uint64_t errors() const noexcept { return errors_.load(); }
    // End time (unix ms) of the oldest record not yet acknowledged; 0 when caught up.
    [[nodiscard]] std::int64_t oldest_unacknowledged_ms() const noexcept { return oldest_.load(); }

  private:
    void run();
    // POSTs body; returns the status code, or 0 with `error` set when no answer arrived.
    int post(const std::string& body, std::string& error);
    void sleep_for(std::chrono::milliseconds d);

    std::filesystem::path dir_;
    shipper_options sink_;
    const upstream_address& target_ = sink_.target;
    std::mutex mutex_;
    std::condition_variable wake_;
    bool woken_ = false;
    bool stopping_ = false;
    std::atomic<std::uint64_t> acknowledged_{0};
    std::atomic<std::uint64_t> errors_{0};
    std::atomic<std::int64_t> oldest_{0};
    std::thread thread_;
};

}  // namespace tokenmeter::http
