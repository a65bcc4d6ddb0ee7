// relay/session_settings: what a proxy session needs to know, as relay's own plain data; app/
// fills it from the config once at start-up.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "net/endpoint.hpp"
#include "protocol/routes.hpp"
#include "usage/tenant.hpp"

namespace tokenmeter::relay {

// What happens to the client's X-Forwarded-For on the way upstream.
enum class forwarded_for_policy : std::uint8_t {
    keep,    // passed on as the client sent it (or absent)
    append,  // the client's address appended (", " separated), or set when absent
    drop,    // removed: the upstream sees no client-supplied address
};

// What a metered request whose JSON body the proxy cannot read gets.
enum class unparsable_body_policy : std::uint8_t {
    refuse,   // 400 before it is forwarded: nothing is served that the meter did not read
    forward,  // forwarded as it is, metered without its body (no model, no prompt)
};

// WebSocket tunnels (relay/tunnel).
struct websocket_limits {
    std::chrono::milliseconds idle_timeout{300'000};        // no bytes either way: closed with 1001
    std::uint32_t max_tunnels = 1024;                       // per process; 0: no cap
    std::uint64_t max_message_bytes = 16ull * 1024 * 1024;  // a frame, or a fragmented message
};

struct session_settings {
    net::upstream_address upstream;
    bool preserve_host = false;  // false: Host sent upstream is the upstream's host:port
    forwarded_for_policy forwarded_for = forwarded_for_policy::keep;
    // Read each client's address even when forwarded_for does not need it (the access log).
    bool client_address = false;
    // Which API each POST speaks, and whether usage may be injected (built once by app/).
    protocol::route_table routes{{}, true};
    std::chrono::milliseconds request_header{30'000};
    std::chrono::milliseconds client_idle{60'000};
    std::chrono::milliseconds client_write{60'000};
    std::chrono::milliseconds upstream_idle{300'000};
    std::uint64_t max_request_header_bytes = 64ull * 1024;
    std::uint64_t max_request_body_bytes = 32ull * 1024 * 1024;
    // Which request fields name a metered request's tenant: the edge refuses a request whose
    // billed credential is not exactly the one the upstream receives (headers.hpp).
    usage::tenant_source tenant_from = usage::tenant_source::none;
    std::string tenant_header = "x-tenant-id";  // with tenant_source::header
    unparsable_body_policy unparsable_body = unparsable_body_policy::refuse;
    // The share of the traces the proxy starts (no valid traceparent) that are sampled.
    double trace_sampling_ratio = 1.0;
    websocket_limits websocket;
};

}  // namespace tokenmeter::relay
