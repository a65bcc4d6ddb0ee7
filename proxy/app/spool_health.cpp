#include "app/spool_health.hpp"

#include <algorithm>
#include <chrono>

#include "metrics/billing.hpp"
#include "outbound/usage_shipper.hpp"
#include "usage/spool.hpp"

namespace tokenmeter::app {

static_assert(outbound::ship_failure_count == 6,
              "spool_health::ship_errors_seen_ has one per reason");

spool_health::spool_health(asio::io_context& ioc, usage::spool_writer& spool,
                           const outbound::usage_shipper* shipper,
                           metrics::billing_metrics& metrics, std::atomic<bool>& failing,
                           std::uint64_t unacknowledged_at_start)
    : spool_(spool),
      shipper_(shipper),
      metrics_(metrics),
      failing_(failing),
      unacknowledged_at_start_(unacknowledged_at_start),
      timer_(ioc) {}

void spool_health::start() {
    stopped_ = false;
    update();
}

void spool_health::stop() {
    stopped_ = true;
    timer_.cancel();
}

void spool_health::update() {
    auto stats = spool_.stats();
    metrics_.add_spool_errors(stats.errors - spool_errors_seen_);
    spool_errors_seen_ = stats.errors;
    failing_ = stats.failing;
    std::uint64_t pending = 0;
    double oldest_age = 0;
    if (shipper_ != nullptr) {
        std::uint64_t written = unacknowledged_at_start_ + stats.closes_durable;
        std::uint64_t acked = shipper_->acknowledged();
        pending = written > acked ? written - acked : 0;
        for (std::size_t i = 0; i < outbound::ship_failure_count; ++i) {
            const auto reason = static_cast<outbound::ship_failure>(i);
            const std::uint64_t errors = shipper_->errors(reason);
            metrics_.add_ship_errors(outbound::to_string(reason), errors - ship_errors_seen_[i]);
            ship_errors_seen_[i] = errors;
        }
        auto oldest = shipper_->oldest_unacknowledged_ms();
        if (pending > 0 && oldest > 0) {
            auto now_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                              std::chrono::system_clock::now().time_since_epoch())
                              .count();
            oldest_age = std::max<double>(0.0, static_cast<double>(now_ms - oldest) / 1000.0);
        }
    } else {
        pending = stats.appended - stats.durable;
        if (stats.pending_bytes > 0) {
            oldest_age = std::chrono::duration<double>(std::chrono::steady_clock::now() -
                                                       stats.oldest_pending)
                             .count();
        }
    }
    metrics_.set_spool(pending, oldest_age);
    timer_.expires_after(std::chrono::milliseconds(500));
    timer_.async_wait([this](error_code ec) {
        if (!ec && !stopped_) {
            update();
        }
    });
}

}  // namespace tokenmeter::app
