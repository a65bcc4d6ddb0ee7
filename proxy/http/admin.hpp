// http/admin: the admin listener: /metrics (Prometheus text), /healthz (alive), /readyz (the
// upstream accepts connections and the proxy is not draining).
#pragma once

#include <atomic>
#include <functional>
#include <memory>

#include "http/beast.hpp"
#include "http/listener.hpp"
#include "metrics/registry.hpp"

namespace tokenmeter::http {

struct admin_state {
    metrics::registry& metrics;
    const std::atomic<bool>& draining;
    const std::atomic<bool>& upstream_ready;
    // Set when usage.readyz_fail_on_spool_error: /readyz fails while the usage spool cannot write.
    const std::atomic<bool>* spool_failing = nullptr;
    // Runs before each /metrics exposition (process_* figures are read then).
    std::function<void()> before_scrape{};
};

class admin_listener {
  public:
    // Throws std::runtime_error naming the address when it cannot listen.
    admin_listener(asio::io_context& ioc, const tcp::endpoint& endpoint, admin_state& state,
                   edge_counters& edge);
    void start();
    void stop();
    [[nodiscard]] tcp::endpoint local_endpoint() const { return listener_.local_endpoint(); }

  private:
    admin_state& state_;
    listener listener_;
};

}  // namespace tokenmeter::http
