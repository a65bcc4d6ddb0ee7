// relay/response_plan: what the client gets in place of the upstream's response head, decided
// without sockets once the head is parsed: the head as text (status line, end-to-end fields,
// the framing fields the proxy sets), how the body is framed, whether the client connection
// stays open, and whether the usage filter runs. Pure and unit-tested, beside request_plan.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "net/beast_http.hpp"

namespace tokenmeter::relay {

// How the body goes to the client: as it is (Content-Length, or until the connection closes for
// an HTTP/1.0 client), in chunks the relay frames itself, or not at all.
enum class body_framing : std::uint8_t { none, raw, chunked };

// What the relay knows besides the upstream's head.
struct response_context {
    unsigned client_version = 11;  // 10 or 11
    bool client_keep_alive = true;
    bool draining = false;
    // The proxy injected usage into the request (request_plan::usage_injected).
    bool filter_usage = false;
};

// The upstream's response head as parsed, and what its parser found about the body.
struct upstream_head {
    const boost::beast::http::response_header<>& fields;
    bool has_body = false;  // false for HEAD, 1xx, 204, 304
    std::optional<std::uint64_t> content_length;
};

struct response_plan {
    std::string head;  // ends with the empty line
    body_framing framing = body_framing::none;
    // The client connection may carry another request after this response (before a drain is
    // considered): false when the client asked to close or the body ends at the close.
    bool keep_alive = true;
    // An SSE response to a request with injected usage: the extra usage chunk is taken out.
    bool filter_usage = false;
    // The body is content-coded (not identity): the meter cannot read it.
    bool coded_body = false;
};

[[nodiscard]] response_plan plan_response(const upstream_head& upstream,
                                          const response_context& context);

// The upstream accepted a WebSocket upgrade (101 with Upgrade: websocket): what the client gets
// before the connection becomes a tunnel.
struct switch_plan {
    // The status line, the end-to-end fields (Sec-WebSocket-Accept, -Protocol, -Extensions...)
    // in the order they came, then Upgrade as the upstream said it and "Connection: Upgrade".
    std::string head;
    // The RSV bits the agreed extensions let frames set (ws::frame_limits).
    std::uint8_t reserved_bits = 0;
};

[[nodiscard]] switch_plan plan_switch(const boost::beast::http::response_header<>& upstream);

}  // namespace tokenmeter::relay
