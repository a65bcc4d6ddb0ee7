// relay/headers: request classification and the header rules of a forwarding intermediary
// (RFC 9110 §7.6.1 hop-by-hop fields, RFC 9112 §6.3 message framing).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "net/beast_http.hpp"
#include "protocol/types.hpp"
#include "relay/session_settings.hpp"

namespace tokenmeter::relay {

// Which metered API a request targets; none for everything that passes through untouched.
protocol::api_kind classify(bhttp::verb method, std::string_view target);

// The field names a message's Connection fields list (RFC 9110 §7.6.1): hop-by-hop as well.
// Empty, without allocating, when there is no Connection field.
std::vector<std::string> connection_options(const bhttp::fields& fields);

// Whether a field stops at this hop: the fixed hop-by-hop set, those named in Connection
// (`connection_named`, from connection_options), and Content-Length/Transfer-Encoding, whose
// framing the proxy sets itself.
bool is_hop_by_hop(const bhttp::fields::value_type& field,
                   const std::vector<std::string>& connection_named);

// A WebSocket opening handshake (RFC 6455 §4.1): an HTTP/1.1 GET without a body whose Upgrade
// names websocket and whose Connection names upgrade. Any other Upgrade is dropped as a
// hop-by-hop field.
bool asks_for_websocket(const bhttp::request_header<>& head, std::size_t body_bytes);

// The upstream's 101 switched to WebSocket: its Upgrade names websocket (RFC 6455 §4.2.2).
bool switched_to_websocket(const bhttp::response_header<>& head);

// Copies every field that is not hop-by-hop (is_hop_by_hop), in order.
void copy_end_to_end_fields(const bhttp::fields& from, bhttp::fields& to);

// The same fields written as text, "name: value\r\n" each, in order: a head the proxy writes
// itself (the response head for the client) is built without a second field set.
void append_end_to_end_fields(const bhttp::fields& from, std::string& out);

// "name: value\r\n"; a number in decimal.
void append_field(std::string& out, std::string_view name, std::string_view value);
void append_field(std::string& out, std::string_view name, std::uint64_t value);

// "HTTP/1.1 200 OK\r\n": the version (11 or 10), the three-digit code and the reason phrase.
void append_status_line(unsigned version, unsigned code, std::string_view reason, std::string& out);

// Why a request head must be refused before its body is read, or nullopt.
struct head_problem {
    bhttp::status status;
    std::string_view code;
    std::string message;
};

// A request whose length is ambiguous (request smuggling: 400) or whose transfer coding the
// proxy cannot forward (RFC 9112 §6.1: 501).
std::optional<head_problem> framing_problem(const bhttp::request_header<>& head);

// RFC 9112 §3.2: an HTTP/1.1 request has exactly one Host, an HTTP/1.0 one at most; versions
// other than 1.0 and 1.1 are refused (505).
// Also refuses a Host value that is not a URI authority (a space, a path, user info...).
std::optional<head_problem> host_or_version_problem(const bhttp::request_header<>& head);

// A metered request whose tenant could be billed for a credential other than the one the
// upstream receives (400): a Connection field naming a field that decides the tenant (the proxy
// would drop it on the way), that field twice, an Authorization that is not RFC 9110 credentials,
// or an Authorization and an x-api-key that carry different keys. Nothing is checked with
// tenant_source::none.
std::optional<head_problem> credential_problem(const bhttp::request_header<>& head,
                                               usage::tenant_source tenant_from,
                                               std::string_view tenant_header);

// Erases the fields after the first `header_fields` (a chunked body's trailer section, which
// Beast appends to the header).
void drop_trailer_fields(bhttp::fields& fields, std::size_t header_fields);

// "host[:port]" for the Host field (port left out when it is 80).
std::string upstream_host_header(const net::upstream_address& upstream);

}  // namespace tokenmeter::relay
