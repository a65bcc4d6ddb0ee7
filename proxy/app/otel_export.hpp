// app/otel_export: the OTLP exporter from the `otel` section. Export is on only when the file
// has the section and an endpoint is known (otel.endpoint, else OTEL_EXPORTER_OTLP_ENDPOINT);
// OTEL_EXPORTER_OTLP_HEADERS and otel.headers_file add headers.
#pragma once

#include <memory>

#include "config/config.hpp"
#include "metrics/otel.hpp"
#include "outbound/otlp_exporter.hpp"

namespace prometheus {
class Registry;
}  // namespace prometheus

namespace tokenmeter::app {

// The exporter stops (one last export) when it is destroyed, before the counters it uses.
struct otel_parts {
    std::unique_ptr<metrics::otel_metrics> counters;
    std::unique_ptr<outbound::otlp_exporter> exporter;  // null: nothing is exported
};

// Throws start_up_error naming the key or variable at fault (a malformed endpoint or header,
// an unreadable headers file, a CA file that does not load). Started when on.
otel_parts open_otel(const config::settings& settings, prometheus::Registry& registry);

}  // namespace tokenmeter::app
