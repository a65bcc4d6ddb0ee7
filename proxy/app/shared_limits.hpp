// app/shared_limits: builds the fleet-wide tenant limit from tenants.shared_limits.redis: the
// Redis password (from its file or environment variable, never logged), the Redis store and its
// thread, the metrics, and the limiter the metering observer admits through. Nothing when no
// URL is configured: tenants are then limited per process.
#pragma once

#include <memory>

#include "config/config.hpp"
#include "metrics/shared_limit.hpp"
#include "observe/shared_limit.hpp"
#include "outbound/redis_store.hpp"
#include "usage/throughput.hpp"

namespace prometheus {
class Registry;
}  // namespace prometheus

namespace tokenmeter::app {

struct shared_limit_parts {
    shared_limit_parts() = default;
    shared_limit_parts(shared_limit_parts&&) noexcept = default;
    shared_limit_parts& operator=(shared_limit_parts&&) noexcept = default;
    shared_limit_parts(const shared_limit_parts&) = delete;
    shared_limit_parts& operator=(const shared_limit_parts&) = delete;
    // The store's last callbacks reach the limiter: the thread ends while both still exist.
    ~shared_limit_parts() { stop(); }

    std::unique_ptr<outbound::redis_store> store;
    std::unique_ptr<metrics::shared_limit_metrics> metrics;
    std::unique_ptr<observe::shared_limiter> limiter;

    // Ends the Redis thread (its pending calls fail); before the limiter goes.
    void stop() {  // NOLINT(readability-make-member-function-const): stops what it owns
        if (store) {
            store->stop();
        }
    }
};

// Throws start_up_error when the password cannot be read.
shared_limit_parts open_shared_limits(const config::settings& settings,
                                      usage::provisioned_throughput& local,
                                      prometheus::Registry& registry);

}  // namespace tokenmeter::app
