// observe/finished_sink: the interface through which a metered request's end reaches the OTLP
// exporter, apart from the observer so that its implementation reaches neither the meter's
// exchange nor the tokenizer.
#pragma once

#include "core/trace_context.hpp"
#include "meter/billing.hpp"
#include "meter/summary.hpp"

namespace tokenmeter::observe {

// Where a metered request's end goes for the OTLP export (otel.endpoint): called once per
// request, after the metrics, on the thread that ends it. It must only hand the request on
// (a bounded queue), never block or throw.
class finished_sink {
  public:
    virtual ~finished_sink() = default;
    virtual void finished(const meter::request_summary& summary, const meter::billed_counts& counts,
                          const core::trace_context& trace) noexcept = 0;
};

}  // namespace tokenmeter::observe
