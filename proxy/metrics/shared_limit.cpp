#include "metrics/shared_limit.hpp"

#include <string>

namespace tokenmeter::metrics {

shared_limit_metrics::shared_limit_metrics(prometheus::Registry& registry)
    : errors_(prometheus::BuildCounter()
                  .Name("tokenmeter_tenant_shared_limit_errors_total")
                  .Help("Shared-limit store calls that failed, by reason (timeout, connection, "
                        "script, reply)")
                  .Register(registry)),
      decisions_(prometheus::BuildCounter()
                     .Name("tokenmeter_tenant_shared_limit_decisions_total")
                     .Help("Tenant admissions under a shared limit, by decision and by the "
                           "bucket that decided (shared, or local while the store failed)")
                     .Register(registry)),
      // Loopback to a cross-zone Redis: 100 us to 100 ms, and the timeout's neighbourhood.
      round_trip_(
          prometheus::BuildHistogram()
              .Name("tokenmeter_tenant_shared_limit_round_trip_seconds")
              .Help("Round trip of one call (admission or settlement) to the "
                    "shared-limit store, answered or not")
              .Register(registry)
              .Add({}, prometheus::Histogram::BucketBoundaries{0.0001, 0.00025, 0.0005, 0.001,
                                                               0.0025, 0.005, 0.01, 0.025, 0.05,
                                                               0.1, 0.25, 0.5, 1.0})),
      in_use_(prometheus::BuildGauge()
                  .Name("tokenmeter_tenant_shared_limit_store_in_use")
                  .Help("1 while admissions are decided by the shared store, 0 while the local "
                        "bucket decides (store unreachable)")
                  .Register(registry)
                  .Add({})),
      unsynced_(prometheus::BuildGauge()
                    .Name("tokenmeter_tenant_shared_limit_unsynced_tokens")
                    .Help("Tokens this replica charged that the shared store has not seen yet "
                          "(charged locally while it failed; sent with the next admission)")
                    .Register(registry)
                    .Add({})) {
    for (const char* reason : {"timeout", "connection", "script", "reply"}) {
        errors_.Add({{"reason", reason}});
    }
    for (const char* decision : {"admitted", "refused"}) {
        for (const char* store : {"shared", "local"}) {
            decisions_.Add({{"decision", decision}, {"store", store}});
        }
    }
}

void shared_limit_metrics::error(std::string_view reason) {
    errors_.Add({{"reason", std::string(reason)}}).Increment();
}

void shared_limit_metrics::round_trip(double seconds) {
    round_trip_.Observe(seconds);
}

void shared_limit_metrics::decision(bool admitted, bool shared) {
    decisions_
        .Add({{"decision", admitted ? "admitted" : "refused"},
              {"store", shared ? "shared" : "local"}})
        .Increment();
}

void shared_limit_metrics::set_in_use(bool in_use) {
    in_use_.Set(in_use ? 1.0 : 0.0);
}

void shared_limit_metrics::set_unsynced_tokens(double tokens) {
    unsynced_.Set(tokens);
}

}  // namespace tokenmeter::metrics
