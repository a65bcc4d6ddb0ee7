// metrics/otel: what the OTLP exporter (otel.endpoint) reports about itself. Items it sent and
// the collector accepted, items it dropped by reason, and the size of its queue. Every series
// exists from the start, so an alert on a rate sees zeros rather than nothing.
#pragma once

#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/gauge.h>
#include <prometheus/registry.h>

#include <array>
#include <cstdint>
#include <string_view>

namespace tokenmeter::metrics {

// The signal label: spans ("traces") or metric data points and request values ("metrics").
enum class otel_signal : std::uint8_t { traces, metrics };
// The reason label of tokenmeter_otel_dropped_total.
enum class otel_drop : std::uint8_t {
    queue_full,         // the export queue was full when the request ended
    rejected,           // the collector answered with a status that is not retried
    retries_exhausted,  // every attempt failed (retryable status, connect, timeout)
};
inline constexpr std::size_t otel_drop_count = 3;
std::string_view to_string(otel_signal s) noexcept;
std::string_view to_string(otel_drop d) noexcept;

class otel_metrics {
  public:
    explicit otel_metrics(prometheus::Registry& registry);

    void exported(otel_signal s, std::uint64_t n);
    void dropped(otel_signal s, otel_drop reason, std::uint64_t n);
    void queue_size(std::size_t n);

  private:
    std::array<prometheus::Counter*, 2> exported_{};
    std::array<std::array<prometheus::Counter*, otel_drop_count>, 2> dropped_{};
    prometheus::Gauge* queue_;
};

}  // namespace tokenmeter::metrics
