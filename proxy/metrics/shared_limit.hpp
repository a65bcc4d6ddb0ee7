// metrics/shared_limit: the series of the fleet-wide tenant limit (tenants.shared_limits): store
// errors by reason, the admission round trip, whether the shared store is in use, and how many
// tokens this replica charged that the store has not seen yet (the divergence while it is down).
#pragma once

#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>

#include <string_view>

namespace tokenmeter::metrics {

class shared_limit_metrics {
  public:
    explicit shared_limit_metrics(prometheus::Registry& registry);

    // reason: timeout, connection, script, reply.
    void error(std::string_view reason);
    void round_trip(double seconds);
    // decision: admitted or refused; store: shared, or local (the fallback bucket).
    void decision(bool admitted, bool shared);
    void set_in_use(bool in_use);
    void set_unsynced_tokens(double tokens);

  private:
    prometheus::Family<prometheus::Counter>& errors_;
    prometheus::Family<prometheus::Counter>& decisions_;
    prometheus::Histogram& round_trip_;
    prometheus::Gauge& in_use_;
    prometheus::Gauge& unsynced_;
};

}  // namespace tokenmeter::metrics
