#include "metrics/billing.hpp"

#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/gauge.h>
#include <prometheus/registry.h>

namespace tokenmeter::metrics {

billing_metrics::billing_metrics(registry& base, const billing_options& options)
    : tenants_(options.tenant_allowlist, options.max_tenants), tenants_on_(options.tenants_on) {
    using prometheus::BuildCounter;
    using prometheus::BuildGauge;
    auto& reg = *base.prometheus_registry();
    tokens_ = &BuildCounter()
                   .Name("tokenmeter_tenant_tokens_total")
                   .Help(
                       "Tokens billed by tenant, model and type (input, output), as in the "
                       "usage records (meter/billing's rule)")
                   .Register(reg);
    reasoning_tokens_ = &BuildCounter()
                             .Name("tokenmeter_tenant_reasoning_tokens_total")
                             .Help(
                                 "Billed reasoning tokens by tenant and model, as in the usage "
                                 "records (part of tokenmeter_tenant_tokens_total{type=\"output\"})")
                             .Register(reg);
    cached_input_tokens_ =
        &BuildCounter()
             .Name("tokenmeter_tenant_cached_input_tokens_total")
             .Help(
                 "Reported cached input tokens by tenant and model (part of "
                 "tokenmeter_tenant_tokens_total{type=\"input\"})")
             .Register(reg);
    cache_write_tokens_ =
        &BuildCounter()
             .Name("tokenmeter_tenant_cache_write_tokens_total")
             .Help(
                 "Reported input tokens written to the prompt cache by tenant and model (part of "
                 "tokenmeter_tenant_tokens_total{type=\"input\"})")
             .Register(reg);
    requests_ = &BuildCounter()
                     .Name("tokenmeter_tenant_requests_total")
                     .Help("Metered requests by tenant, model and outcome")
                     .Register(reg);
    rate_limited_ = &BuildCounter()
                         .Name("tokenmeter_tenant_rate_limited_total")
                         .Help(
                             "Requests refused with 429 because the tenant's provisioned "
                             "throughput bucket was in debt")
                         .Register(reg);
    cost_ = &BuildCounter()
                 .Name("tokenmeter_cost_total")
                 .Help(
                     "Cost of the tokens by model, tenant and currency, from the prices in the "
                     "config (models without a price have no series)")
                 .Register(reg);
    auto& provisioned = BuildGauge()
                            .Name("tokenmeter_tenant_provisioned_tokens_per_second")
                            .Help("Provisioned input + output tokens per second, from config")
                            .Register(reg);
    for (const auto& [name, rate] : options.provisioned_rates) {
        if (rate > 0) {
            provisioned.Add({{"tenant", tenant_label(name, true)}}).Set(rate);
        }
    }
    spool_records_ = &BuildGauge()
                          .Name("tokenmeter_usage_spool_records")
                          .Help(
                              "Usage records not yet acknowledged by the sink (without a sink: "
                              "spool entries not yet fsynced)")
                          .Register(reg);
    spool_oldest_age_ = &BuildGauge()
                             .Name("tokenmeter_usage_spool_oldest_age_seconds")
                             .Help(
                                 "Age of the oldest record counted in "
                                 "tokenmeter_usage_spool_records (0 when there is none)")
                             .Register(reg);
    ship_errors_ = &BuildCounter()
                        .Name("tokenmeter_usage_ship_errors_total")
                        .Help("Batches the sink did not acknowledge with 2xx, by reason (retried)")
                        .Register(reg);
    spool_errors_ = &BuildCounter()
                         .Name("tokenmeter_usage_spool_errors_total")
                         .Help("Failed spool writes or fsyncs (entries are kept and retried)")
                         .Register(reg);
    spool_quarantined_ =
        &BuildCounter()
             .Name("tokenmeter_usage_spool_quarantined_lines_total")
             .Help("Spool lines that are not usage entries, set aside in quarantine.jsonl")
             .Register(reg);
}

std::string billing_metrics::tenant_label(std::string_view tenant, bool served) {
    return tenants_.label_for(tenant, served);
}

void billing_metrics::record(const tenant_usage& u) {
    std::string model(u.model_label);
    if (u.cost_picos && !u.currency.empty()) {
        // Without a tenant source every request is "anonymous", as in the usage records.
        cost_->Add({{"model", model},
                    {"tenant",
                     tenants_on_ ? tenant_label(u.tenant, u.served) : std::string("anonymous")},
                    {"currency", std::string(u.currency)}})
            .Increment(static_cast<double>(*u.cost_picos) / 1e12);
    }
    if (!tenants_on_) {
        return;
    }
    std::string tenant = tenant_label(u.tenant, u.served);
    requests_->Add({{"tenant", tenant}, {"model", model}, {"outcome", std::string(u.outcome)}})
        .Increment();
    auto add = [&](prometheus::Family<prometheus::Counter>* family, const char* type,
                   std::uint64_t n) {
        if (n == 0) {
            return;
        }
        prometheus::Labels labels{{"tenant", tenant}, {"model", model}};
        if (type != nullptr) {
            labels.emplace("type", type);
        }
        family->Add(labels).Increment(static_cast<double>(n));
    };
    add(tokens_, "input", u.input_tokens);
    add(tokens_, "output", u.output_tokens);
    add(reasoning_tokens_, nullptr, u.reasoning_tokens);
    add(cached_input_tokens_, nullptr, u.cached_input_tokens);
    add(cache_write_tokens_, nullptr, u.cache_write_tokens);
}

void billing_metrics::rate_limited(std::string_view tenant) {
    rate_limited_->Add({{"tenant", tenant_label(tenant)}}).Increment();
}

void billing_metrics::set_spool(std::uint64_t records_pending, double oldest_age_seconds) {
    spool_records_->Add({}).Set(static_cast<double>(records_pending));
    spool_oldest_age_->Add({}).Set(oldest_age_seconds);
}

void billing_metrics::add_ship_errors(std::string_view reason, std::uint64_t n) {
    ship_errors_->Add({{"reason", std::string(reason)}}).Increment(static_cast<double>(n));
}

void billing_metrics::add_spool_errors(std::uint64_t n) {
    spool_errors_->Add({}).Increment(static_cast<double>(n));
}

void billing_metrics::add_spool_quarantined(std::uint64_t n) {
    spool_quarantined_->Add({}).Increment(static_cast<double>(n));
}

}  // namespace tokenmeter::metrics
