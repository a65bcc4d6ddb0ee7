#include "metrics/otel.hpp"

#include <string>

namespace tokenmeter::metrics {

std::string_view to_string(otel_signal s) noexcept {
    return s == otel_signal::traces ? "traces" : "metrics";
}

std::string_view to_string(otel_drop d) noexcept {
    switch (d) {
        case otel_drop::queue_full:
            return "queue_full";
        case otel_drop::rejected:
            return "rejected";
        case otel_drop::retries_exhausted:
            break;
    }
    return "retries_exhausted";
}

otel_metrics::otel_metrics(prometheus::Registry& registry) {
    auto& exported = prometheus::BuildCounter()
                         .Name("tokenmeter_otel_exported_total")
                         .Help(
                             "Spans (signal=traces) and metric data points (signal=metrics) "
                             "the OTLP collector accepted.")
                         .Register(registry);
    auto& dropped =
        prometheus::BuildCounter()
            .Name("tokenmeter_otel_dropped_total")
            .Help(
                "Spans (signal=traces) and metric values (signal=metrics) the OTLP exporter "
                "dropped, by reason: queue_full, rejected (a status not retried), "
                "retries_exhausted.")
            .Register(registry);
    for (const otel_signal s : {otel_signal::traces, otel_signal::metrics}) {
        const std::string signal(to_string(s));
        exported_[static_cast<std::size_t>(s)] = &exported.Add({{"signal", signal}});
        for (std::size_t r = 0; r < otel_drop_count; ++r) {
            dropped_[static_cast<std::size_t>(s)][r] =
                &dropped.Add({{"signal", signal},
                              {"reason", std::string(to_string(static_cast<otel_drop>(r)))}});
        }
    }
    queue_ = &prometheus::BuildGauge()
                  .Name("tokenmeter_otel_queue_requests")
                  .Help("Finished requests waiting in the OTLP exporter's queue.")
                  .Register(registry)
                  .Add({});
}

void otel_metrics::exported(otel_signal s, std::uint64_t n) {
    exported_[static_cast<std::size_t>(s)]->Increment(static_cast<double>(n));
}

void otel_metrics::dropped(otel_signal s, otel_drop reason, std::uint64_t n) {
    dropped_[static_cast<std::size_t>(s)][static_cast<std::size_t>(reason)]->Increment(
        static_cast<double>(n));
}

void otel_metrics::queue_size(std::size_t n) {
    queue_->Set(static_cast<double>(n));
}

}  // namespace tokenmeter::metrics
