// config/rules: validate(): every key's range check from the schema tables, then the rules that
// relate several keys (listen vs admin, pool sizes, tenant secrets, the usage sink, SLO models).
// Rules that need another module's knowledge live in app/ (config_checks, module_options).
#include <algorithm>
#include <string>

#include "config/config.hpp"
#include "config/walk.hpp"

namespace tokenmeter::config {
namespace {

// Binding to a wildcard takes the port on every address, so it collides with any host.
bool is_wildcard(const std::string& host) {
    return host == "0.0.0.0" || host == "::";
}

void check_listeners(schema::checker& c, const settings& s) {
    if (s.listen.port != 0 && s.listen.port == s.admin.port &&
        (s.listen.host == s.admin.host || is_wildcard(s.listen.host) ||
         is_wildcard(s.admin.host))) {
        c.error("admin",
                "must not use the same address and port as listen (" + to_string(s.listen) + ")");
    }
}

void check_pool(schema::checker& c, const upstream_pool_settings& p) {
    if (p.max_connections != 0 && p.max_idle_connections > p.max_connections) {
        c.error("upstream_pool.max_idle_connections",
                "must not exceed upstream_pool.max_connections (" +
                    std::to_string(p.max_connections) + "), got " +
                    std::to_string(p.max_idle_connections));
    }
}

void check_tenants(schema::checker& c, const tenants_settings& t) {
    if (t.source == tenant_source::header && t.header.empty()) {
        c.error("tenants.header", "must name the header that carries the tenant");
    }
    if (t.source == tenant_source::api_key && t.api_key_secret_env.empty() &&
        t.api_key_secret_file.empty()) {
        c.error("tenants.api_key_secret_env",
                "source api_key needs a secret: set api_key_secret_env or api_key_secret_file");
    }
    if (!t.api_key_secret_env.empty() && !t.api_key_secret_file.empty()) {
        c.error("tenants.api_key_secret_file",
                "set either api_key_secret_env or api_key_secret_file, not both");
    }
    const redis_limit_settings& r = t.shared_limits.redis;
    if (!r.url.empty()) {
        std::string error;
        const redis_endpoint endpoint = parse_redis_url(r.url, error);
        if (!error.empty()) {
            c.error("tenants.shared_limits.redis.url", error);
        } else if (!endpoint.tls) {
            for (const auto& [key, value] :
                 {std::pair{"tenants.shared_limits.redis.ca_file", &r.ca_file},
                  std::pair{"tenants.shared_limits.redis.server_name", &r.server_name}}) {
                if (!value->empty()) {
                    c.error(key, "applies to rediss:// only; the url is redis://");
                }
            }
        }
    }
    if (!r.password_env.empty() && !r.password_file.empty()) {
        c.error("tenants.shared_limits.redis.password_file",
                "set either password_env or password_file, not both");
    }
}

void check_sink(schema::checker& c, const usage_settings& u) {
    if (!u.sink.url.empty()) {
        if (u.spool_dir.empty()) {
            c.error("usage.sink.url",
                    "shipping needs usage.spool_dir (records ship from the spool)");
        }
        const auto target = parse_upstream(u.sink.url);
        if (!target) {
            c.error("usage.sink.url",
                    "expected http[s]://host[:port]/path, got " + detail::quote(u.sink.url));
        } else if (target->scheme != "https" && !u.sink.ca_file.empty()) {
            c.error("usage.sink.ca_file", "is only for an https:// usage.sink.url");
        }
    } else if (!u.sink.token_file.empty() || !u.sink.token_env.empty() || !u.sink.ca_file.empty()) {
        c.error("usage.sink.url", "is required when usage.sink has a token or a ca_file");
    }
    if (!u.sink.token_file.empty() && !u.sink.token_env.empty()) {
        c.error("usage.sink.token_file", "set either token_env or token_file, not both");
    }
    if (u.sink.backoff_max < u.sink.backoff_initial) {
        c.error("usage.sink.backoff_max", "must not be shorter than usage.sink.backoff_initial");
    }
}

void check_otel(schema::checker& c, const otel_settings& o) {
    if (o.endpoint.empty()) {
        return;
    }
    const auto target = parse_upstream(o.endpoint);
    if (!target) {
        c.error("otel.endpoint",
                "expected http[s]://host[:port][/path], got " + detail::quote(o.endpoint));
    } else if (target->scheme != "https" && !o.ca_file.empty()) {
        c.error("otel.ca_file", "is only for an https:// otel.endpoint");
    }
}

// Each SLO model must get its own label value, or its requests would count as "other".
void check_slo_models(schema::checker& c, const settings& s) {
    const auto& allow = s.metrics.models.allowlist;
    for (const auto& [name, target] : s.slo.models) {
        if (name.empty()) {
            c.error("slo.models", "a model name must not be empty");
        } else if (!allow.empty() && std::find(allow.begin(), allow.end(), name) == allow.end()) {
            c.error("slo.models." + name,
                    "is not in metrics.models.allowlist, so its requests would be labelled "
                    "\"other\"; add it there");
        }
    }
    if (allow.empty() && s.slo.models.size() > s.metrics.models.max_models) {
        c.error("slo.models", "has " + std::to_string(s.slo.models.size()) +
                                  " models, more than metrics.models.max_models (" +
                                  std::to_string(s.metrics.models.max_models) + ")");
    }
}

// The files themselves are read by app/ at start (each error naming its key); here only the
// combinations that can never work.
void check_tls(schema::checker& c, const std::string& prefix, const tls_settings& t) {
    const bool any = !t.cert_file.empty() || !t.key_file.empty() || !t.client_ca_file.empty() ||
                     t.client_auth != tls_client_auth::none;
    if (!any) {
        return;
    }
    if (t.cert_file.empty()) {
        c.error(prefix + ".cert_file", "is required for TLS (a PEM certificate and its chain)");
    }
    if (t.key_file.empty()) {
        c.error(prefix + ".key_file", "is required for TLS (the PEM private key of cert_file)");
    }
    if (t.client_auth != tls_client_auth::none && t.client_ca_file.empty()) {
        c.error(prefix + ".client_ca_file", "is required when client_auth is " +
                                                std::string(to_string(t.client_auth)) +
                                                " (the CAs client certificates must chain to)");
    }
    if (t.watch_interval.count() < 0) {
        c.error(prefix + ".watch_interval", "must not be negative (0s: only on SIGHUP)");
    }
}

// upstream_tls is used only with an https:// upstream (which --upstream may set after the file
// is read, so a plain upstream with these keys is a start-up warning, not an error).
void check_upstream_tls(schema::checker& c, const settings& s) {
    const upstream_tls_settings& t = s.upstream_tls;
    if (t.cert_file.empty() != t.key_file.empty()) {
        c.error(t.cert_file.empty() ? "upstream_tls.cert_file" : "upstream_tls.key_file",
                "must be set together with upstream_tls." +
                    std::string(t.cert_file.empty() ? "key_file" : "cert_file") +
                    " (a client certificate and its key)");
    }
    if (t.insecure_skip_verify && !t.ca_file.empty()) {
        c.error("upstream_tls.ca_file", "has no effect with upstream_tls.insecure_skip_verify");
    }
}

}  // namespace

std::vector<config_error> validate(const settings& s, const unknown_words& words) {
    schema::checker c(words);
    schema::check_section(c, "", schema::root(), s);
    check_listeners(c, s);
    check_pool(c, s.upstream_pool);
    check_tenants(c, s.tenants);
    check_sink(c, s.usage);
    check_otel(c, s.otel);
    check_tls(c, "tls", s.tls);
    check_upstream_tls(c, s);
    check_tls(c, "admin_tls", s.admin_tls);
    check_slo_models(c, s);
    return c.take();
}

}  // namespace tokenmeter::config
