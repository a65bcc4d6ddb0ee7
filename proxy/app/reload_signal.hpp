// app/reload_signal: SIGHUP reloads the configuration. The new file is loaded and validated in
// full; when it is broken the running configuration stays and the error names the key. Otherwise
// what can change in place changes (config/reload.hpp), what needs a restart is logged, and no
// connection or stream is touched.
#pragma once

#include <functional>

#include "app/app.hpp"
#include "config/config.hpp"
#include "net/beast.hpp"

namespace tokenmeter::usage {
class tenant_resolver;
}  // namespace tokenmeter::usage
namespace tokenmeter::metrics {
class registry;
class edge_metrics;
}  // namespace tokenmeter::metrics

namespace tokenmeter::app {

class reload_signal {
  public:
    struct targets {
        usage::tenant_resolver* tenants = nullptr;
        metrics::registry* registry = nullptr;
        metrics::edge_metrics* counters = nullptr;
        // Runs on every SIGHUP, with or without a config file (certificates reload).
        std::function<void()> on_hangup;
    };

    reload_signal(asio::io_context& ioc, config::settings running, reloader reload,
                  targets to_update);
    void start();
    void stop();

  private:
    void wait();
    void on_signal();

    asio::signal_set signals_;
    config::settings running_;
    reloader reload_;
    targets targets_;
};

}  // namespace tokenmeter::app
