// app/tls_watch: a TLS listener's certificate (the proxy's `tls`, the admin's `admin_tls`), kept
// current. Loads it at start (a bad file stops the start with an error naming the key), then
// reloads it on SIGHUP and whenever the files change (checked every watch_interval: a Kubernetes
// secret rotation swaps a symlink).
// A reload that fails is logged and counted, and the certificate in use stays. Connections keep
// the context they were accepted with, so no stream is touched.
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include "config/config.hpp"
#include "metrics/tls.hpp"
#include "net/beast.hpp"
#include "net/tls_server.hpp"

namespace tokenmeter::app {

net::tls_server_options tls_options_from(const config::tls_settings& tls, std::string prefix);

class tls_watch {
  public:
    // Throws start_up_error-style std::runtime_error naming the key when the files do not load.
    // listener: "proxy" (keys under tls) or "admin" (keys under admin_tls).
    tls_watch(asio::io_context& ioc, const config::tls_settings& settings,
              prometheus::Registry& registry, std::string listener);
    tls_watch(const tls_watch&) = delete;
    tls_watch& operator=(const tls_watch&) = delete;
    tls_watch(tls_watch&&) = delete;
    tls_watch& operator=(tls_watch&&) = delete;
    ~tls_watch() = default;

    [[nodiscard]] const net::tls_server& server() const noexcept { return server_; }
    [[nodiscard]] metrics::tls_metrics& counters() noexcept { return metrics_; }
    void start();
    void stop();
    // SIGHUP: load the files again whether or not they look changed.
    void reload(const char* why);

  private:
    void arm();
    void report(const std::string& error, const char* why);

    net::tls_server server_;
    metrics::tls_metrics metrics_;
    std::string listener_;
    std::chrono::milliseconds interval_;
    steady_timer timer_;
    bool stopped_ = false;
};

}  // namespace tokenmeter::app
