// admin/admin: the admin listener: /metrics (Prometheus or OpenMetrics text, or protobuf, as
// the scraper asks; gzip when it takes it), /healthz (alive), /readyz (the upstream accepts
// connections and the proxy is not draining), /drain (start draining: /readyz fails from now
// on; answers once no request is in flight, or when its wait is over), /undrain (POST: ready
// again), and the status page: / and /status (HTML; its CSS, JS and icon under /status/),
// /status.json. Plain HTTP, or TLS with admin_tls (the same session code over either stream).
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "metrics/registry.hpp"
#include "metrics/status_board.hpp"
#include "net/beast.hpp"
#include "net/listener.hpp"

namespace tokenmeter::net {
class tls_server;
}  // namespace tokenmeter::net

namespace tokenmeter::admin {

struct admin_state {
    metrics::registry& metrics;
    // Set by /drain as by SIGTERM, cleared by /undrain; read by /readyz.
    std::atomic<bool>& draining;
    const std::atomic<bool>& upstream_ready;
    // Set when usage.readyz_fail_on_spool_error: /readyz fails while the usage spool cannot write.
    const std::atomic<bool>* spool_failing = nullptr;
    // Runs before each /metrics exposition (process_* figures are read then).
    std::function<void()> before_scrape{};
    // Requests between head and end; /drain answers when it is 0. Null: /drain answers at once.
    const std::atomic<std::int64_t>* requests_in_flight = nullptr;
    // The status page's data (metrics.status_page). Null: the page and /status.json answer 404.
    metrics::status_board* status = nullptr;
    // Set once a signal has started the shutdown: /undrain cannot take that back.
    const std::atomic<bool>* exiting = nullptr;
    // admin_auth: the bearer token /drain and /undrain require. "": none required.
    std::string drain_token{};
};

// Whether a request may start or end a drain. A browser names the page that sent a request in
// Origin or Referer; kubelet's preStop, curl and scripts send neither, so either header means a
// page on some site is making the call (a simple GET needs no CORS preflight) and it is refused.
enum class drain_verdict : std::uint8_t { allowed, cross_site, unauthorized };
drain_verdict judge_drain_request(bool has_origin_or_referer, std::string_view authorization,
                                  std::string_view token);
// authorization is "Bearer <token>" (scheme case-insensitive). The comparison takes the same
// time wherever the first difference is, so timing tells nothing about the token.
bool bearer_token_matches(std::string_view authorization, std::string_view token);

// The headers of every status page response: the page runs only its own script and style and
// fetches only from this origin; nothing is cached or sniffed.
inline constexpr std::string_view status_page_csp =
    "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; "
    "img-src 'self'; base-uri 'none'; frame-ancestors 'none'";

// "30s", "500ms", "2m", "45" (seconds): the wait= of /drain. nullopt: not a duration.
std::optional<std::chrono::milliseconds> parse_drain_wait(std::string_view text);

// TLS on the admin listener. server null: plain HTTP. Both outlive the listener.
struct admin_tls {
    const net::tls_server* server = nullptr;  // the context each new connection handshakes with
    net::tls_handshake_counters* handshakes = nullptr;  // listener="admin" in the TLS metrics
};

class admin_listener {
  public:
    // Throws std::runtime_error naming the address when it cannot listen.
    admin_listener(asio::io_context& ioc, const tcp::endpoint& endpoint, admin_state& state,
                   net::edge_counters& edge, admin_tls tls = {});
    void start();
    void stop();
    [[nodiscard]] tcp::endpoint local_endpoint() const { return listener_.local_endpoint(); }

  private:
    void serve(socket_type socket);

    admin_state& state_;
    admin_tls tls_;
    net::listener listener_;
};

}  // namespace tokenmeter::admin
