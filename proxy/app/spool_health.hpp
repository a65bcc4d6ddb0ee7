// app/spool_health: the usage spool's and shipper's state, twice a second, into the billing
// gauges and counters, and into the flag /readyz reads (usage.readyz_fail_on_spool_error).
#pragma once

#include <array>
#include <atomic>
#include <cstdint>

#include "net/beast.hpp"

namespace tokenmeter::usage {
class spool_writer;
}  // namespace tokenmeter::usage
namespace tokenmeter::metrics {
class billing_metrics;
}  // namespace tokenmeter::metrics
namespace tokenmeter::outbound {
class usage_shipper;
}  // namespace tokenmeter::outbound

namespace tokenmeter::app {

class spool_health {
  public:
    // shipper may be null (no sink); unacknowledged_at_start: records the sink had not
    // acknowledged when the process started.
    spool_health(asio::io_context& ioc, usage::spool_writer& spool,
                 const outbound::usage_shipper* shipper, metrics::billing_metrics& metrics,
                 std::atomic<bool>& failing, std::uint64_t unacknowledged_at_start);
    spool_health(const spool_health&) = delete;
    spool_health& operator=(const spool_health&) = delete;
    spool_health(spool_health&&) = delete;
    spool_health& operator=(spool_health&&) = delete;
    ~spool_health() = default;

    void start();
    void stop();

  private:
    void update();

    usage::spool_writer& spool_;
    const outbound::usage_shipper* shipper_;
    metrics::billing_metrics& metrics_;
    std::atomic<bool>& failing_;
    std::uint64_t unacknowledged_at_start_;
    std::uint64_t spool_errors_seen_ = 0;
    std::array<std::uint64_t, 6> ship_errors_seen_{};  // per outbound::ship_failure
    asio::steady_timer timer_;
    bool stopped_ = false;
};

}  // namespace tokenmeter::app
