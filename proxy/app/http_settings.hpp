// app/http_settings: the config as relay/ and net/ take it (neither reads the config itself).
#pragma once

#include "config/config.hpp"
#include "net/tls_client.hpp"
#include "relay/session_settings.hpp"
#include "relay/upstream_pool.hpp"

namespace tokenmeter::app {

relay::session_settings session_settings_from(const config::settings& settings);
// The process-wide pool; worker_pool splits the caps between its workers. For an https://
// upstream its TLS context is loaded here (throws start_up_error naming the upstream_tls key of
// a file that does not load; warns when verification is off).
relay::upstream_pool_settings pool_settings_from(const config::settings& settings);
// A client TLS context for an https:// upstream, as the pool's (pool_settings_from loads one).
// The readiness probe on the main thread gets one of its own: OpenSSL objects that a context
// caches during handshakes are not shared between the main thread and the workers.
std::shared_ptr<ssl::context> upstream_tls_context(const config::upstream_tls_settings& t,
                                                   bool warn = true);
// upstream_tls as net/ loads it, errors naming the upstream_tls keys.
net::tls_client_options upstream_tls_options(const config::upstream_tls_settings& t);

}  // namespace tokenmeter::app
