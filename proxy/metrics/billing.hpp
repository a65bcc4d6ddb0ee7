// metrics/billing: per-tenant token and request counters (label-bounded like models), the
// provisioned-throughput gauge and rate-limit counter, and the usage spool's health. Nothing is
// exposed for a part that is off: no tenant series without a tenant source or limits, no spool
// series until the spool reports.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "metrics/registry.hpp"

namespace tokenmeter::metrics {

struct tenant_usage {
    std::string_view tenant;
    std::string_view model_label;  // already bounded by registry::model_label
    std::string_view outcome;
    std::uint64_t input_tokens = 0;
    std::uint64_t output_tokens = 0;
    std::uint64_t reasoning_tokens = 0;
    std::uint64_t cached_input_tokens = 0;
    std::uint64_t cache_write_tokens = 0;
    std::optional<std::int64_t> cost_picos;  // set with a currency when the model has a price
    std::string_view currency;
    // The upstream answered the request with 2xx: a new tenant may take a label slot.
    bool served = false;
};

// How tenant labels are bounded, and whether tenant series exist at all.
struct billing_options {
    std::vector<std::string> tenant_allowlist;  // when non-empty: only these, others "other"
    std::uint32_t max_tenants = 100;            // without allowlist: first N, then "other"
    bool tenants_on = false;  // a tenant source or provisioned limits are configured
    std::map<std::string, double> provisioned_rates;  // tenant -> tokens per second (gauge)
};

class billing_metrics {
  public:
    billing_metrics(registry& base, const billing_options& options);

    // The bounded tenant label; a new tenant takes one of the slots only when `served` (its
    // request was answered 2xx) or it is configured (limits, the allowlist). Until then "other".
    std::string tenant_label(std::string_view tenant, bool served = false);
    void record(const tenant_usage& usage);
    void rate_limited(std::string_view tenant);

    // Spool and shipper health, set by a periodic updater.
    void set_spool(std::uint64_t records_pending, double oldest_age_seconds);
    // reason: connect, tls, timeout, unauthorized, status or protocol (outbound::ship_failure).
    void add_ship_errors(std::string_view reason, std::uint64_t n);
    void add_spool_errors(std::uint64_t n);
    // Spool lines that are not usage entries, set aside in the quarantine at start-up.
    void add_spool_quarantined(std::uint64_t n);

  private:
    model_labels tenants_;
    bool tenants_on_;  // a tenant source or a limit is configured; otherwise no tenant series
    prometheus::Family<prometheus::Counter>* tokens_;
    prometheus::Family<prometheus::Counter>* reasoning_tokens_;
    prometheus::Family<prometheus::Counter>* cached_input_tokens_;
    prometheus::Family<prometheus::Counter>* cache_write_tokens_;
    prometheus::Family<prometheus::Counter>* requests_;
    prometheus::Family<prometheus::Counter>* rate_limited_;
    prometheus::Family<prometheus::Counter>* cost_;
    // Series created on first use: the spool and shipper report only when they are configured.
    prometheus::Family<prometheus::Gauge>* spool_records_;
    prometheus::Family<prometheus::Gauge>* spool_oldest_age_;
    prometheus::Family<prometheus::Counter>* ship_errors_;
    prometheus::Family<prometheus::Counter>* spool_errors_;
    prometheus::Family<prometheus::Counter>* spool_quarantined_;
};

}  // namespace tokenmeter::metrics
