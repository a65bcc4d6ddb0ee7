#include "app/http_settings.hpp"

#include <spdlog/spdlog.h>

#include <string>

#include "app/config_checks.hpp"
#include "app/module_options.hpp"
#include "app/start_up.hpp"
#include "net/tls_client.hpp"

namespace tokenmeter::app {

relay::session_settings session_settings_from(const config::settings& settings) {
    relay::session_settings out;
    out.upstream = {settings.upstream.scheme, settings.upstream.host, settings.upstream.port,
                    settings.upstream.base_path};
    out.preserve_host = settings.preserve_host;
    switch (settings.forwarded_for) {
        case config::forwarded_for_mode::keep:
            out.forwarded_for = relay::forwarded_for_policy::keep;
            break;
        case config::forwarded_for_mode::append:
            out.forwarded_for = relay::forwarded_for_policy::append;
            break;
        case config::forwarded_for_mode::drop:
            out.forwarded_for = relay::forwarded_for_policy::drop;
            break;
    }
    out.client_address = settings.log.access_log;
    out.trace_sampling_ratio = settings.otel.sampling_ratio;
    out.routes = make_route_table(settings);
    out.request_header = settings.timeouts.request_header;
    out.client_idle = settings.timeouts.client_idle;
    out.client_write = settings.timeouts.client_write;
    out.upstream_idle = settings.timeouts.upstream_idle;
    out.max_request_header_bytes = settings.limits.max_request_header_bytes;
    out.max_request_body_bytes = settings.limits.max_request_body_bytes;
    const usage::tenant_options tenants = tenant_options(settings);
    out.tenant_from = tenants.source;
    out.tenant_header = tenants.header;
    out.unparsable_body = settings.limits.unparsable_body == config::unparsable_body_mode::forward
                              ? relay::unparsable_body_policy::forward
                              : relay::unparsable_body_policy::refuse;
    out.websocket.idle_timeout = settings.websocket.idle_timeout;
    out.websocket.max_tunnels = settings.websocket.max_tunnels;
    out.websocket.max_message_bytes = settings.websocket.max_message_bytes;
    return out;
}

net::tls_client_options upstream_tls_options(const config::upstream_tls_settings& t) {
    net::tls_client_options options;
    options.ca_file = t.ca_file;
    options.ca_file_key = "upstream_tls.ca_file";
    options.cert_file = t.cert_file;
    options.cert_file_key = "upstream_tls.cert_file";
    options.key_file = t.key_file;
    options.key_file_key = "upstream_tls.key_file";
    options.insecure_skip_verify = t.insecure_skip_verify;
    return options;
}

std::shared_ptr<ssl::context> upstream_tls_context(const config::upstream_tls_settings& t,
                                                   bool warn) {
    auto loaded = net::load_tls_client_context(upstream_tls_options(t));
    if (!loaded.context) {
        throw start_up_error(loaded.error);
    }
    if (t.insecure_skip_verify && warn) {
        spdlog::warn(
            "upstream_tls.insecure_skip_verify is on: the upstream's certificate is NOT verified, "
            "so anyone on the path can read and change the traffic (for tests only)");
    }
    net::tls_session_cache::enable(loaded.context->native_handle());
    return std::move(loaded.context);
}

relay::upstream_pool_settings pool_settings_from(const config::settings& settings) {
    relay::upstream_pool_settings out;
    out.host = settings.upstream.host;
    out.port = std::to_string(settings.upstream.port);
    out.max_connections = settings.upstream_pool.max_connections;
    out.max_idle = settings.upstream_pool.max_idle_connections;
    out.connect_timeout = settings.timeouts.upstream_connect;
    out.idle_keepalive = settings.upstream_pool.idle_keepalive;
    out.acquire_timeout = settings.upstream_pool.acquire_timeout;
    if (settings.upstream.scheme != "https") {
        if (settings.upstream_tls != config::upstream_tls_settings{}) {
            spdlog::warn("upstream_tls is set but the upstream is {}://; it is not used",
                         settings.upstream.scheme);
        }
    } else {
        out.tls = upstream_tls_context(settings.upstream_tls);
        out.tls_server_name = settings.upstream_tls.server_name.empty()
                                  ? settings.upstream.host
                                  : settings.upstream_tls.server_name;
    }
    return out;
}

}  // namespace tokenmeter::app
