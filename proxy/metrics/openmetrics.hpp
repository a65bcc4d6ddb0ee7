// metrics/openmetrics: the OpenMetrics 1.0 text exposition of the collected families, for a
// scraper that asks for it (Prometheus does by default). prometheus-cpp writes only the
// Prometheus text format; this writes the same samples as OpenMetrics wants them: a counter's
// family named without its _total (the sample keeps it, so a series is named alike in both
// formats), a UNIT line where the name ends in a base unit, HELP and label values escaped, and
// the closing "# EOF".
#pragma once

#include <prometheus/metric_family.h>

#include <string>
#include <string_view>
#include <vector>

#include "metrics/exemplars.hpp"

namespace tokenmeter::metrics {

inline constexpr std::string_view openmetrics_content_type =
    "application/openmetrics-text; version=1.0.0; charset=utf-8";

// The unit a family's name ends in ("seconds" for tokenmeter_request_duration_seconds), or ""
// when it ends in none of OpenMetrics' base units.
[[nodiscard]] std::string_view openmetrics_unit(std::string_view family_name);

// Every family, in order, then "# EOF\n". A counter whose name does not end in _total is written
// as unknown, so that its series keeps its name. A histogram bucket with an exemplar in
// `exemplars` ends in " # {trace_id=\"…\",span_id=\"…\"} <value> <unix seconds>".
[[nodiscard]] std::string serialize_openmetrics(
    const std::vector<prometheus::MetricFamily>& families,
    const exemplar_store* exemplars = nullptr);

}  // namespace tokenmeter::metrics
