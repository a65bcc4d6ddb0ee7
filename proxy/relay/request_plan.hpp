// relay/request_plan: what to do with a request once its head and body are read, decided without
// sockets: which API it speaks (route), what it says about its response (model, stream),
// whether usage is injected into its body, and the request the upstream gets. Pure and
// unit-tested; the session only carries the plan out.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include "core/trace_context.hpp"
#include "net/beast_http.hpp"
#include "protocol/types.hpp"
#include "relay/session_settings.hpp"

namespace tokenmeter::relay {

// The request the upstream gets: its head as text (the request line, the fields, the empty line)
// and its body, sent in one gathered write.
struct upstream_request {
    std::string head;
    std::string body;
};

struct request_plan {
    protocol::api_kind api = protocol::api_kind::none;
    protocol::request_info info;
    // The proxy added stream_options.include_usage (and continuous_usage_stats) to the body;
    // the response then goes through protocol::usage_filter.
    bool usage_injected = false;
    bool continuous_usage = false;
    bool keep_alive = true;  // the client's
    unsigned version = 11;   // the client's
    bool head = false;       // a HEAD request: the response has no body
    // A WebSocket upgrade (headers.hpp, asks_for_websocket): Upgrade and "Connection: Upgrade"
    // go to the upstream, and a 101 answer turns the connection into a tunnel.
    bool upgrade = false;
    // The API of the upgrade's tunnel (protocol/realtime, tunnel_api_for_path): its messages are
    // metered unless it is none. Such an upgrade goes on without Sec-WebSocket-Extensions, so
    // that no message comes compressed (permessage-deflate) where the meter must read it.
    protocol::api_kind tunnel_api = protocol::api_kind::none;
    // A metered request whose body the proxy cannot read, under unparsable_body_policy::refuse:
    // it is answered 400 and not forwarded (`upstream` is left empty).
    bool unparsable_body = false;
    // Likewise a metered request whose API names its model in the body and whose body names
    // none: served under a model the meter cannot know (a server's default), so not priced.
    bool model_missing = false;
    // The request's trace: the client's traceparent continued, or a new trace. The upstream's
    // head carries it as traceparent with the proxy's span as its parent.
    core::trace_context trace;
    upstream_request upstream;
};

// Where a request came from, for the forwarding headers.
struct client_origin {
    bool tls = false;          // the client connected over TLS: X-Forwarded-Proto: https
    std::string_view address;  // the client's IP address ("" when unknown)
};

// `request` is the client's request as read; its target is replaced by `forward_target` (the
// normalized origin-form target), trailer fields past the first `header_fields` are dropped, and
// its body is moved into the plan's upstream request. Its header fields stay for the caller.
// The client's traceparent is always replaced by the proxy's (W3C Trace Context): the same trace
// and flags when it was valid, else a new trace, whose tracestate is then dropped too. `random`
// makes the new ids (the worker thread's own source when null).
request_plan plan_request(bhttp::request<bhttp::string_body>& request,
                          std::string_view forward_target, std::size_t header_fields,
                          const session_settings& settings, const client_origin& origin = {},
                          core::trace_random* random = nullptr);

// Whether plan_request would read a body of more than `bytes`: a metered POST (its body is
// parsed, and may be rewritten) with a body that large.
[[nodiscard]] bool plans_a_large_body(const bhttp::request<bhttp::string_body>& request,
                                      std::string_view forward_target,
                                      const session_settings& settings, std::size_t bytes);

}  // namespace tokenmeter::relay
