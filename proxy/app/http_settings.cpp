#include "app/http_settings.hpp"

#include <string>

#include "app/config_checks.hpp"

namespace tokenmeter::app {

http::session_settings session_settings_from(const config::settings& settings) {
    http::session_settings out;
    out.upstream = {settings.upstream.scheme, settings.upstream.host, settings.upstream.port,
                    settings.upstream.base_path};
    out.preserve_host = settings.preserve_host;
    switch (settings.forwarded_for) {
        case config::forwarded_for_mode::keep:
            out.forwarded_for = http::forwarded_for_policy::keep;
            break;
        case config::forwarded_for_mode::append:
            out.forwarded_for = http::forwarded_for_policy::append;
            break;
        case config::forwarded_for_mode::drop:
            out.forwarded_for = http::forwarded_for_policy::drop;
            break;
    }
    out.routes = make_route_table(settings);
    out.request_header = settings.timeouts.request_header;
    out.client_idle = settings.timeouts.client_idle;
    out.client_write = settings.timeouts.client_write;
    out.upstream_idle = settings.timeouts.upstream_idle;
    out.max_request_header_bytes = settings.limits.max_request_header_bytes;
    out.max_request_body_bytes = settings.limits.max_request_body_bytes;
    return out;
}

http::upstream_pool_settings pool_settings_from(const config::settings& settings) {
    return {settings.upstream.host,
            std::to_string(settings.upstream.port),
            settings.upstream_pool.max_connections,
            settings.upstream_pool.max_idle_connections,
            settings.timeouts.upstream_connect,
            settings.upstream_pool.idle_keepalive,
            settings.upstream_pool.acquire_timeout};
}

}  // namespace tokenmeter::app
