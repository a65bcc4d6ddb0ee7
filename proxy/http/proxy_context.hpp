// http/proxy_context: what every proxy session shares with the rest of the process.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <unordered_map>

#include "config/config.hpp"
#include "core/time.hpp"
#include "http/edge.hpp"
#include "meter/exchange.hpp"
#include "metrics/registry.hpp"
#include "protocol/routes.hpp"
#include "tokenizer/catalog.hpp"

namespace tokenmeter::usage {
class spool_writer;
class tenant_resolver;
class provisioned_throughput;
class id_generator;
}  // namespace tokenmeter::usage
namespace tokenmeter::metrics {
class billing_metrics;
}  // namespace tokenmeter::metrics

namespace tokenmeter::http {

class proxy_session;

// Usage records and tenants (issue 5). Null members: that part is off.
struct billing_context {
    usage::spool_writer* spool = nullptr;
    usage::tenant_resolver* tenants = nullptr;
    usage::provisioned_throughput* throughput = nullptr;
    usage::id_generator* ids = nullptr;
    metrics::billing_metrics* metrics = nullptr;
    bool hold_until_durable = true;
    core::duration checkpoint_interval = std::chrono::seconds(1);
};

struct proxy_context {
    const config::settings& settings;
    metrics::registry& metrics;
    const core::clock& clock;
    const protocol::route_table& routes;  // built once from settings.routes by app/
    std::atomic<bool> draining{false};
    std::atomic<std::int64_t> requests_in_flight{0};
    std::atomic<std::int64_t> client_connections{0};
    meter::exchange_limits exchange_limits{};
    billing_context billing{};
    const tokenizer::catalog* tokenizers = nullptr;  // null: no re-tokenization
    meter::input_counting input_counting = meter::input_counting::when_unreported;
    edge_counters edge{};
};

// Sessions of one worker thread, so a drain can close the idle ones. Touched only on that thread.
class session_registry {
  public:
    void add(const std::shared_ptr<proxy_session>& session);
    void remove(proxy_session* session);
    // Closes every session that is between requests; busy ones close after their response.
    void close_idle();

  private:
    std::unordered_map<proxy_session*, std::weak_ptr<proxy_session>> sessions_;
};

}  // namespace tokenmeter::http
