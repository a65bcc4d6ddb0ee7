#include "config/reload.hpp"

namespace tokenmeter::config {

reload_diff diff_for_reload(const settings& running, const settings& next) {
    reload_diff diff;
    auto check = [&diff](bool changed, const char* key, bool reloadable) {
        if (changed) {
            (reloadable ? diff.applied : diff.needs_restart).emplace_back(key);
        }
    };
    check(running.log.level != next.log.level, "log.level", true);
    check(running.tenant.api_key_names != next.tenant.api_key_names, "tenants.api_key_names", true);
    check(running.slo != next.slo, "slo", true);

    check(running.listen != next.listen, "listen", false);
    check(running.admin != next.admin, "admin", false);
    check(running.upstream != next.upstream, "upstream", false);
    check(running.threads != next.threads, "threads", false);
    check(running.preserve_host != next.preserve_host, "preserve_host", false);
    check(running.timeout != next.timeout, "timeouts", false);
    check(running.limit != next.limit, "limits", false);
    check(running.pool != next.pool, "upstream_pool", false);
    check(running.ready != next.ready, "readiness", false);
    check(running.metric != next.metric, "metrics", false);
    check(running.log.format != next.log.format, "log.format", false);
    check(running.log.access_log != next.log.access_log, "log.access_log", false);
    tenants running_tenants = running.tenant;
    running_tenants.api_key_names = next.tenant.api_key_names;
    check(running_tenants != next.tenant, "tenants", false);
    check(running.usage_records != next.usage_records, "usage", false);
    check(running.tokens != next.tokens, "reference_tokenizer/tokenizer_dir/models", false);
    check(running.usage_injection != next.usage_injection, "usage_injection", false);
    check(running.routes != next.routes, "routes", false);
    return diff;
}

settings apply_reloadable(const settings& running, const settings& next) {
    settings out = running;
    out.log.level = next.log.level;
    out.tenant.api_key_names = next.tenant.api_key_names;
    out.slo = next.slo;
    return out;
}

}  // namespace tokenmeter::config
