// app/module_options: one function per module option struct; each reads only plain settings.
#include "app/module_options.hpp"

#include "app/config_checks.hpp"

namespace tokenmeter::app {

namespace {

metrics::slo_target slo_target_of(const config::slo_target& t) {
    metrics::slo_target out;
    if (const auto preset = metrics::slo_preset(config::to_string(t.preset))) {
        out = *preset;
    }
    if (t.ttft) {
        out.ttft = t.ttft;
    }
    if (t.tpot) {
        out.tpot = t.tpot;
    }
    out.objective = t.objective;
    if (t.availability) {
        out.availability = t.availability;
    }
    return out;
}

// The configured lists, each left-out list at its default.
metrics::histogram_buckets buckets_of(const config::histogram_buckets& configured) {
    metrics::histogram_buckets b = metrics::default_buckets();
    const auto take = [](const std::optional<std::vector<double>>& from, std::vector<double>& to) {
        if (from) {
            to = *from;
        }
    };
    take(configured.time_to_first_token, b.time_to_first_token);
    take(configured.inter_token_latency, b.inter_token_latency);
    take(configured.time_per_output_token, b.time_per_output_token);
    take(configured.output_tokens_per_second, b.output_tokens_per_second);
    take(configured.decode_tokens_per_second, b.decode_tokens_per_second);
    take(configured.request_duration, b.request_duration);
    return b;
}

}  // namespace

metrics::registry_options registry_options(const config::settings& s) {
    metrics::registry_options o;
    o.model_allowlist = s.metrics.models.allowlist;
    o.max_models = s.metrics.models.max_models;
    o.buckets = buckets_of(s.metrics.buckets);
    o.prompt_classes = s.metrics.prompt_classes;
    o.native_histograms = s.metrics.native_histograms;
    o.fine_inter_token_latency = s.metrics.status_page;
    return o;
}

metrics::slo_options slo_options(const config::settings& s) {
    metrics::slo_options o;
    o.objective = s.slo.objective;
    if (s.slo.default_target) {
        o.default_target = slo_target_of(*s.slo.default_target);
    }
    for (const auto& [name, target] : s.slo.models) {
        o.models.emplace(name, slo_target_of(target));
    }
    return o;
}

usage::price_table price_table(const config::settings& s) {
    usage::price_table table;
    for (const auto& [model, p] : s.prices) {
        usage::price entry;
        entry.input = p.input.value_or(0);
        entry.output = p.output.value_or(0);
        entry.cached_input = p.cached_input.value_or(entry.input);
        entry.cache_write = p.cache_write.value_or(entry.input);
        entry.cache_write_1h = p.cache_write_1h.value_or(entry.cache_write);
        entry.reasoning = p.reasoning.value_or(entry.output);
        entry.currency = p.currency;
        table.emplace(model, std::move(entry));
    }
    return table;
}

std::optional<observe::task_options> task_options(const config::settings& s) {
    const config::tasks_settings& t = s.tasks;
    if (t.allowed.empty()) {
        return std::nullopt;
    }
    observe::task_options o;
    o.header = t.header;
    o.allowed = t.allowed;
    o.session_header = t.session_header;
    o.sessions.idle_expiry = t.session_idle_expiry;
    o.sessions.max_sessions = t.max_sessions;
    return o;
}

metrics::billing_options billing_options(const config::settings& s) {
    const config::tenants_settings& t = s.tenants;
    metrics::billing_options o;
    o.tenant_allowlist = t.metrics_allowlist;
    o.max_tenants = t.max_tenants;
    o.tenants_on = t.source != config::tenant_source::none || !t.limits.empty();
    for (const auto& [name, limit] : t.limits) {
        o.provisioned_rates[name] = limit.provisioned_tokens_per_second;
    }
    return o;
}

metrics::status_options status_options(const config::settings& s) {
    metrics::status_options o;
    const auto on_off = [](bool on) { return std::string(on ? "on" : "off"); };
    const auto endpoint = [](const config::endpoint& e) {
        return e.host + ":" + std::to_string(e.port);
    };
    std::string models;
    for (const auto& [name, model] : s.models) {
        models += (models.empty() ? "" : ", ") + name + " (" + model.tokenizer + ")";
    }
    std::string slo_models;
    for (const auto& [name, target] : s.slo.models) {
        slo_models += (slo_models.empty() ? "" : ", ") + name;
    }
    const char* tenant_source = s.tenants.source == config::tenant_source::header    ? "header"
                                : s.tenants.source == config::tenant_source::api_key ? "api_key"
                                                                                     : "none";
    o.summary = {
        {"listen", endpoint(s.listen)},
        {"admin", endpoint(s.admin)},
        {"upstream", s.upstream.scheme + "://" + s.upstream.host + ":" +
                         std::to_string(s.upstream.port) + s.upstream.base_path},
        {"threads", s.threads == 0 ? std::string("one per core") : std::to_string(s.threads)},
        {"models", models.empty() ? std::string("(none configured)") : models},
        {"reference_tokenizer", s.reference_tokenizer},
        {"usage_injection", on_off(s.usage_injection)},
        {"usage_records", s.usage.spool_dir.empty() ? std::string("off") : "on"},
        {"usage_sink", on_off(!s.usage.sink.url.empty())},
        {"tenants_source", tenant_source},
        {"tenant_limits", std::to_string(s.tenants.limits.size())},
        {"shared_limits", on_off(!s.tenants.shared_limits.redis.url.empty())},
        {"slo_default", on_off(s.slo.default_target.has_value())},
        {"slo_models", slo_models.empty() ? std::string("(none)") : slo_models},
        {"native_histograms", on_off(s.metrics.native_histograms)},
        {"max_models", std::to_string(s.metrics.models.max_models)},
    };
    return o;
}

usage::tenant_options tenant_options(const config::settings& s) {
    const config::tenants_settings& t = s.tenants;
    usage::tenant_options o;
    switch (t.source) {
        case config::tenant_source::header:
            o.source = usage::tenant_source::header;
            break;
        case config::tenant_source::api_key:
            o.source = usage::tenant_source::api_key;
            break;
        case config::tenant_source::none:
            o.source = usage::tenant_source::none;
            break;
    }
    o.header = t.header;
    o.api_key_secret_env = t.api_key_secret_env;
    o.api_key_secret_file = t.api_key_secret_file;
    o.api_key_names = t.api_key_names;
    return o;
}

usage::throughput_options throughput_options(const config::settings& s) {
    usage::throughput_options o;
    for (const auto& [name, limit] : s.tenants.limits) {
        o.rates[name] = limit.provisioned_tokens_per_second;
    }
    o.enforce = s.tenants.enforce_provisioned;
    o.burst = s.tenants.provisioned_burst;
    return o;
}

meter::input_counting input_counting(const config::settings& s) {
    switch (s.count_input_tokens) {
        case config::count_input_tokens_mode::always:
            return meter::input_counting::always;
        case config::count_input_tokens_mode::never:
            return meter::input_counting::never;
        case config::count_input_tokens_mode::when_unreported:
            break;
    }
    return meter::input_counting::when_unreported;
}

std::vector<config::config_error> metrics_config_errors(const config::settings& s) {
    std::vector<config::config_error> errors;
    for (const auto& miss :
         metrics::slo_targets_off_buckets(buckets_of(s.metrics.buckets), slo_options(s))) {
        const std::string entry = miss.model ? "slo.models." + *miss.model : "slo.default";
        errors.push_back(
            {entry + "." + std::string(miss.target),
             "the target " + config::detail::format_number(miss.seconds) +
                 " s is not a boundary of metrics.buckets." + std::string(miss.list) +
                 "; add it, so that quantiles and the SLO counts agree at the target"});
    }
    return errors;
}

std::vector<config::config_error> module_errors(const config::settings& s) {
    std::vector<config::config_error> errors = module_config_errors(s);
    std::vector<config::config_error> more = metrics_config_errors(s);
    errors.insert(errors.end(), more.begin(), more.end());
    return errors;
}

}  // namespace tokenmeter::app
