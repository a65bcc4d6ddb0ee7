// usage/throughput: provisioned tokens per second per tenant, as a token bucket over input plus
// output tokens. Admission happens before a request is forwarded, when its output is unknown:
// an admitted request reserves what it may use (its prompt estimate and output limit) at once,
// so concurrent requests see each other's reservations, and settles to its real count at the
// end. A new request is admitted only while the bucket is not negative, so a burst overruns the
// bucket by at most one request's reservation. An admitted stream is never cut.
// One lock, taken twice per request (admit, settle), never per token. Time comes in as data.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <unordered_map>

#include "core/time.hpp"

namespace tokenmeter::usage {

struct admission {
    bool admitted = true;
    double retry_after_seconds = 0;  // until the bucket is back at zero
    std::uint64_t reserved = 0;      // tokens taken from the bucket now (settle them at the end)
};

// Provisioned rates and enforcement (app translates the tenants: section into it).
struct throughput_options {
    std::map<std::string, double> rates;     // tenant -> input + output tokens per second; 0: none
    bool enforce = false;                    // refuse a new request while its bucket is in debt
    std::chrono::milliseconds burst{1'000};  // bucket size = rate x burst
};

class provisioned_throughput {
  public:
    explicit provisioned_throughput(const throughput_options& options);

    // Whether a new request of `tenant` may start now; when it may, `reservation` tokens are
    // taken from its bucket at once (admission::reserved). Always admitted, with nothing
    // reserved, when enforcement is off or the tenant has no provisioned rate.
    admission admit(const std::string& tenant, std::uint64_t reservation, core::time_point now);
    // Whether admit() decides anything for `tenant` (enforcement on and a provisioned rate).
    [[nodiscard]] bool limits(const std::string& tenant) const {
        return enforce_ && rates_.contains(tenant);
    }
    // Charges the tokens a finished request used.
    void charge(const std::string& tenant, std::uint64_t tokens, core::time_point now);
    // Charges (tokens > 0) or gives back (tokens < 0, an estimate charged in advance that
    // turned out too high) tokens; the level never rises above the bucket size.
    void adjust(const std::string& tenant, double tokens, core::time_point now);
    [[nodiscard]] bool enforced() const noexcept { return enforce_; }
    [[nodiscard]] double burst_seconds() const noexcept { return burst_seconds_; }

    [[nodiscard]] const std::map<std::string, double>& rates() const noexcept { return rates_; }
    // The bucket level (tokens) after refilling to `now`; for tests and debugging.
    double level(const std::string& tenant, core::time_point now);

  private:
    struct bucket {
        double level = 0;
        core::time_point updated{};
        bool started = false;
    };
    bucket* find(const std::string& tenant, core::time_point now);

    bool enforce_;
    double burst_seconds_;
    std::map<std::string, double> rates_;
    std::mutex mutex_;
    std::unordered_map<std::string, bucket> buckets_;
};

}  // namespace tokenmeter::usage
