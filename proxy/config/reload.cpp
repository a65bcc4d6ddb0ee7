#include "config/reload.hpp"

#include <tuple>

namespace tokenmeter::config {

reload_diff diff_for_reload(const settings& running, const settings& next) {
    reload_diff diff;
    auto check = [&diff](bool changed, const char* key, bool reloadable) {
        if (changed) {
            (reloadable ? diff.applied : diff.needs_restart).emplace_back(key);
        }
    };
    check(running.log.level != next.log.level, "log.level", true);
    check(running.tenants.api_key_names != next.tenants.api_key_names, "tenants.api_key_names",
          true);
    check(running.slo != next.slo, "slo", true);

    check(running.listen != next.listen, "listen", false);
    check(running.admin != next.admin, "admin", false);
    check(running.upstream != next.upstream, "upstream", false);
    check(running.upstream_tls != next.upstream_tls, "upstream_tls", false);
    check(running.threads != next.threads, "threads", false);
    check(running.preserve_host != next.preserve_host, "preserve_host", false);
    // SIGHUP reads the certificate files again, but other paths or policies need a restart.
    check(running.tls != next.tls, "tls", false);
    check(running.admin_tls != next.admin_tls, "admin_tls", false);
    check(running.admin_auth != next.admin_auth, "admin_auth", false);
    check(running.timeouts != next.timeouts, "timeouts", false);
    check(running.limits != next.limits, "limits", false);
    check(running.upstream_pool != next.upstream_pool, "upstream_pool", false);
    check(running.websocket != next.websocket, "websocket", false);
    check(running.readiness != next.readiness, "readiness", false);
    check(running.metrics != next.metrics, "metrics", false);
    check(running.log.format != next.log.format, "log.format", false);
    check(running.log.access_log != next.log.access_log, "log.access_log", false);
    check(running.otel != next.otel, "otel", false);
    tenants_settings running_tenants = running.tenants;
    running_tenants.api_key_names = next.tenants.api_key_names;
    check(running_tenants != next.tenants, "tenants", false);
    check(running.usage != next.usage, "usage", false);
    check(running.billing != next.billing, "billing", false);
    const auto tokenization = [](const settings& s) {
        return std::tie(s.reference_tokenizer, s.reference_explicit, s.reference_special_tokens,
                        s.tokenizer_dir, s.count_input_tokens, s.models);
    };
    check(tokenization(running) != tokenization(next), "reference_tokenizer/tokenizer_dir/models",
          false);
    check(running.prices != next.prices, "prices", false);
    check(running.tasks != next.tasks, "tasks", false);
    check(running.usage_injection != next.usage_injection, "usage_injection", false);
    check(running.routes != next.routes, "routes", false);
    return diff;
}

settings apply_reloadable(const settings& running, const settings& next) {
    settings out = running;
    out.log.level = next.log.level;
    out.tenants.api_key_names = next.tenants.api_key_names;
    out.slo = next.slo;
    return out;
}

}  // namespace tokenmeter::config
