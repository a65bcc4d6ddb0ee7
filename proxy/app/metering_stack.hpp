// app/metering_stack: everything behind the observer the sessions see, built in order from the
// settings: tokenizers, the metrics registry, tenants and provisioned throughput, the usage
// spool and shipper, the shared limits, the status board and task time, the metering observer
// and the guard around it. Members are declared in construction order; each outlives the ones
// declared after it (sessions a worker still owns at shutdown use them as they are destroyed).
#pragma once

#include <memory>
#include <optional>

#include "app/app.hpp"
#include "app/otel_export.hpp"
#include "app/shared_limits.hpp"
#include "app/usage_parts.hpp"
#include "config/config.hpp"
#include "core/job_thread.hpp"
#include "core/time.hpp"
#include "metrics/billing.hpp"
#include "metrics/process.hpp"
#include "metrics/registry.hpp"
#include "metrics/status_board.hpp"
#include "metrics/tasks.hpp"
#include "observe/guarded_observer.hpp"
#include "observe/metering_observer.hpp"
#include "observe/task_meter.hpp"
#include "tokenizer/catalog.hpp"
#include "usage/price.hpp"
#include "usage/record.hpp"
#include "usage/tenant.hpp"
#include "usage/throughput.hpp"

namespace tokenmeter::app {

struct metering_stack {
    // Ends waiting for the finishing thread at most; past it an end runs on its I/O thread.
    static constexpr std::size_t max_finishing_queued = 4096;
    // And at most this many bytes of prompts and bodies held by the ends waiting.
    static constexpr std::size_t max_finishing_bytes = std::size_t{64} * 1024 * 1024;
    // The finishing thread yields the cores to the I/O threads (its work can wait; theirs not).
    static constexpr int finishing_nice = 10;

    // Throws start_up_error (or std::runtime_error for the spool) with a message for the operator.
    metering_stack(const config::settings& settings, const core::clock& clock,
                   const metering_wrap& wrap);
    metering_stack(const metering_stack&) = delete;
    metering_stack& operator=(const metering_stack&) = delete;
    // Runs the ends still queued on the finishing thread while everything they use is up.
    ~metering_stack() {
        planner.stop();
        finisher.stop();
    }

    std::shared_ptr<const tokenizer::catalog> tokenizers;
    metrics::registry registry;
    metrics::process_metrics process_metrics;
    metrics::edge_metrics edge_metrics;
    usage::tenant_resolver tenants;
    usage::provisioned_throughput throughput;
    usage::id_generator ids;
    metrics::billing_metrics billing_metrics;
    usage_parts usage;
    shared_limit_parts shared_limits;
    const usage::price_table prices;
    std::optional<metrics::status_board> status;
    // Task time: only with allowed task names; sessions end on sweeps (request ends, scrapes),
    // and those still open at shutdown end with the process, unobserved.
    std::optional<metrics::task_metrics> task_metrics;
    std::optional<observe::task_meter> tasks;
    // The OTLP exporter (otel): fed at each request's end, stopped after the finishing thread so
    // the ends it ran are exported too.
    otel_parts otel;
    // The finishing thread: request ends too large for an I/O thread (observe/metering_observer).
    // Stopped before the parts above it (~metering_stack, and app::run after the workers), so
    // every end it was given is written; an end after that runs in place.
    core::job_thread finisher{max_finishing_queued, max_finishing_bytes, finishing_nice,
                              "tm-finisher"};
    // The planning thread: requests with a large metered body are read (parsed, and rewritten
    // for usage injection) here instead of on their worker (relay::proxy_context::planner).
    // A thread of its own, so that a long request's planning never waits behind other
    // requests' counting on the finishing thread. Stopped with it.
    core::job_thread planner{max_finishing_queued, max_finishing_bytes, finishing_nice,
                             "tm-planner"};
    std::unique_ptr<observe::metering_observer> metering;
    std::unique_ptr<observe::observer> wrapped;  // the test binary's wrap, if any
    // What the sessions see: metering only through the guard, so nothing it throws reaches a
    // stream.
    std::unique_ptr<observe::guarded_observer> observer;
};

}  // namespace tokenmeter::app
