#include "app/shared_limits.hpp"

#include <spdlog/spdlog.h>

#include <string>

#include "app/start_up.hpp"
#include "net/tls_client.hpp"

namespace tokenmeter::app {
namespace {

// The password from the file or environment variable the config names; "" when neither is set.
std::string redis_password(const config::redis_limit_settings& r) {
    return configured_secret("tenants.shared_limits.redis.password_env", r.password_env,
                             "tenants.shared_limits.redis.password_file", r.password_file);
}

}  // namespace

shared_limit_parts open_shared_limits(const config::settings& settings,
                                      usage::provisioned_throughput& local,
                                      prometheus::Registry& registry) {
    shared_limit_parts parts;
    const config::redis_limit_settings& r = settings.tenants.shared_limits.redis;
    if (r.url.empty()) {
        return parts;
    }
    std::string error;
    const config::redis_endpoint endpoint = config::parse_redis_url(r.url, error);
    if (!error.empty()) {
        throw start_up_error("tenants.shared_limits.redis.url: " + error);
    }
    outbound::redis_settings store;
    store.host = endpoint.host;
    store.port = endpoint.port;
    if (endpoint.tls) {
        net::tls_client_options tls;
        tls.ca_file = r.ca_file;
        tls.ca_file_key = "tenants.shared_limits.redis.ca_file";
        net::tls_client_load_result loaded = net::load_tls_client_context(tls);
        if (!loaded.context) {
            throw start_up_error(loaded.error);
        }
        store.tls = std::move(loaded.context);
        store.server_name = r.server_name;
    }
    store.username = r.username;
    store.password = redis_password(r);
    store.timeout = r.timeout;
    store.connections = r.connections;
    store.max_reply_bytes = r.max_reply_bytes;
    store.max_reply_elements = r.max_reply_elements;
    parts.store = std::make_unique<outbound::redis_store>(std::move(store));
    parts.metrics = std::make_unique<metrics::shared_limit_metrics>(registry);
    observe::shared_limit_options options;
    options.key_prefix = r.key_prefix;
    options.on_error =
        r.on_error == "deny" ? observe::on_store_error::deny : observe::on_store_error::allow;
    parts.limiter = std::make_unique<observe::shared_limiter>(options, *parts.store, local,
                                                              parts.metrics.get());
    parts.store->start();
    spdlog::info("tenant limits shared through Redis at {}:{} ({}timeout {} ms, on_error {})",
                 endpoint.host, endpoint.port, endpoint.tls ? "TLS, " : "", r.timeout.count(),
                 r.on_error);
    if (!settings.tenants.enforce_provisioned) {
        spdlog::warn(
            "tenants.shared_limits.redis is set but tenants.enforce_provisioned is false: "
            "nothing is limited");
    }
    return parts;
}

}  // namespace tokenmeter::app
