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

#include "config/config.hpp"

namespace tokenmeter::http {

class usage_shipper {
  public:
    usage_shipper(std::filesystem::path dir, config::usage_sink sink);
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
    config::usage_sink sink_;
    config::upstream_target target_;
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
