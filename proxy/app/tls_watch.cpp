#include "app/tls_watch.hpp"

#include <spdlog/spdlog.h>

#include <ctime>
#include <utility>

namespace tokenmeter::app {
namespace {

net::client_auth client_auth_from(config::tls_client_auth a) {
    switch (a) {
        case config::tls_client_auth::optional:
            return net::client_auth::optional;
        case config::tls_client_auth::require:
            return net::client_auth::require;
        case config::tls_client_auth::none:
            break;
    }
    return net::client_auth::none;
}

void warn_if_expired(const std::string& listener, std::int64_t not_after) {
    if (not_after != 0 && not_after < static_cast<std::int64_t>(std::time(nullptr))) {
        spdlog::warn(
            "{} TLS: the certificate expired (notAfter {} Unix time); clients that "
            "verify it will refuse the handshake",
            listener, not_after);
    }
}

}  // namespace

net::tls_server_options tls_options_from(const config::tls_settings& tls, std::string prefix) {
    net::tls_server_options o;
    o.cert_file = tls.cert_file;
    o.key_file = tls.key_file;
    o.client_ca_file = tls.client_ca_file;
    o.clients = client_auth_from(tls.client_auth);
    o.min_version = tls.min_version == config::tls_min_version::v1_3 ? net::tls_version::v1_3
                                                                     : net::tls_version::v1_2;
    o.key_prefix = std::move(prefix);
    return o;
}

tls_watch::tls_watch(asio::io_context& ioc, const config::tls_settings& settings,
                     prometheus::Registry& registry, std::string listener)
    : server_(tls_options_from(settings, listener == "admin" ? "admin_tls" : "tls")),
      metrics_(registry, listener),
      listener_(std::move(listener)),
      interval_(settings.watch_interval),
      timer_(ioc.get_executor()) {
    metrics_.certificate_not_after(server_.not_after_unix());
    spdlog::info("{} TLS: certificate {} (notAfter {} Unix time), client certificates {}",
                 listener_, settings.cert_file, server_.not_after_unix(),
                 config::to_string(settings.client_auth));
    warn_if_expired(listener_, server_.not_after_unix());
}

void tls_watch::start() {
    arm();
}

void tls_watch::stop() {
    stopped_ = true;
    timer_.cancel();
}

void tls_watch::arm() {
    if (stopped_ || interval_.count() <= 0) {
        return;
    }
    timer_.expires_after(interval_);
    timer_.async_wait([this](error_code ec) {
        if (ec || stopped_) {
            return;
        }
        try {
            if (auto error = server_.reload_if_changed()) {
                report(*error, "the files changed");
            }
        } catch (const std::exception& e) {
            report(e.what(), "the files changed");
        }
        arm();
    });
}

void tls_watch::reload(const char* why) {
    try {
        report(server_.reload(), why);
    } catch (const std::exception& e) {
        report(e.what(), why);
    }
}

void tls_watch::report(const std::string& error, const char* why) {
    metrics_.reload(error.empty());
    if (!error.empty()) {
        spdlog::error("{} TLS: reload after {} failed, the certificate in use stays: {}", listener_,
                      why, error);
        return;
    }
    metrics_.certificate_not_after(server_.not_after_unix());
    spdlog::info("{} TLS: certificate reloaded after {} (notAfter {} Unix time)", listener_, why,
                 server_.not_after_unix());
    warn_if_expired(listener_, server_.not_after_unix());
}

}  // namespace tokenmeter::app
