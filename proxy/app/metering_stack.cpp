#include "app/metering_stack.hpp"

#include <array>
#include <chrono>
#include <string_view>
#include <vector>

#include "app/allocator.hpp"
#include "app/log_format.hpp"
#include "app/module_options.hpp"
#include "app/start_up.hpp"
#include "app/tokenizers.hpp"
#include "metrics/tokenizer_info.hpp"
#include "observe/guarded_observer.hpp"
#include "protocol/dialect.hpp"
#include "relay/local_failure.hpp"

namespace tokenmeter::app {
namespace {

// Building the tables frees megabytes (decompressed blobs, a parsed tokenizer.json) that the
// allocator would otherwise keep resident.
std::shared_ptr<const tokenizer::catalog> load_released(const config::settings& settings) {
    const prompt_release release;
    return load_tokenizers_or_explain(settings);
}

std::int64_t unix_ms_now() {
    return std::chrono::duration_cast<std::chrono::milliseconds>(
               std::chrono::system_clock::now().time_since_epoch())
        .count();
}

// The counter families whose labels are a fixed, small set: every series at 0 from start-up.
void start_fixed_series_at_zero(metrics::registry& registry) {
    registry.start_at_zero(metrics::registry::fixed_labels::upstream_error_reason,
                           relay::upstream_error_reasons);
    std::array<std::string_view, observe::metering_phase_count> phases{};
    for (std::size_t i = 0; i < phases.size(); ++i) {
        phases[i] = observe::to_string(static_cast<observe::metering_phase>(i));
    }
    registry.start_at_zero(metrics::registry::fixed_labels::metering_failure_phase, phases);
    std::vector<protocol::api_kind> apis;
    for (const protocol::dialect* d : protocol::dialect_table()) {
        apis.push_back(d->api);
    }
    registry.start_parse_errors_at_zero(apis);
}

}  // namespace

metering_stack::metering_stack(const config::settings& settings, const core::clock& clock,
                               const metering_wrap& wrap)
    : tokenizers(load_released(settings)),
      registry(registry_options(settings), slo_options(settings)),
      process_metrics(*registry.prometheus_registry()),
      edge_metrics(*registry.prometheus_registry()),
      tenants(tenant_options(settings), tenant_secret_or_throw(tenant_options(settings))),
      throughput(throughput_options(settings)),
      billing_metrics(registry, billing_options(settings)),
      usage(open_usage(settings.usage)),
      shared_limits(open_shared_limits(settings, throughput, *registry.prometheus_registry())),
      prices(price_table(settings)) {
    metrics::register_tokenizer_info(*registry.prometheus_registry(), tokenizers->entries());
    start_fixed_series_at_zero(registry);
    if (usage.spool) {
        billing_metrics.add_spool_quarantined(usage.quarantined_at_start);
    }
    if (settings.metrics.status_page) {
        status.emplace(registry, &billing_metrics, clock, unix_ms_now, status_options(settings));
    }
    if (const auto options = task_options(settings)) {
        task_metrics.emplace(*registry.prometheus_registry());
        tasks.emplace(*options, *task_metrics,
                      [this](std::string_view model) { return registry.model_label(model); });
    }
    observe::metering_parts parts{&registry,
                                  tokenizers.get(),
                                  &tenants,
                                  &throughput,
                                  &ids,
                                  &billing_metrics,
                                  usage.sink.get(),
                                  {},
                                  shared_limits.limiter.get(),
                                  prices.empty() ? nullptr : &prices};
    otel = open_otel(settings, *registry.prometheus_registry());
    parts.otel = otel.exporter.get();
    parts.tasks = tasks ? &*tasks : nullptr;
    parts.status = status ? &*status : nullptr;
    if (settings.log.access_log) {
        parts.access_log = make_access_writer(settings.log.format);
    }
    parts.finish_off_thread = [this](std::function<void()>& job, std::size_t bytes) {
        return finisher.post(job, bytes);
    };
    metering = std::make_unique<observe::metering_observer>(std::move(parts),
                                                            metering_options_from(settings));
    wrapped = wrap ? wrap(*metering) : nullptr;
    observer = std::make_unique<observe::guarded_observer>(
        wrapped ? *wrapped : static_cast<observe::observer&>(*metering),
        [this](observe::metering_phase phase) {
            registry.metering_failure(observe::to_string(phase));
        });
}

}  // namespace tokenmeter::app
