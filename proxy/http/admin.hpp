// http/admin: the admin listener: /metrics (Prometheus text), /healthz (alive), /readyz (the
// upstream accepts connections and the proxy is not draining).
#pragma once

#include <atomic>
#include <memory>

#include "http/beast.hpp"
#include "metrics/registry.hpp"

namespace tokenmeter::http {

struct admin_state {
    metrics::registry& metrics;
    const std::atomic<bool>& draining;
    const std::atomic<bool>& upstream_ready;
    // Set when usage.readyz_fail_on_spool_error: /readyz fails while the usage spool cannot write.
    const std::atomic<bool>* spool_failing = nullptr;
};

class admin_listener {
  public:
    admin_listener(asio::io_context& ioc, const tcp::endpoint& endpoint, admin_state& state);
    void start();
    void stop();
    [[nodiscard]] tcp::endpoint local_endpoint() const { return acceptor_.local_endpoint(); }

  private:
    void do_accept();

    asio::io_context& ioc_;
    tcp::acceptor acceptor_;
    admin_state& state_;
};

}  // namespace tokenmeter::http
