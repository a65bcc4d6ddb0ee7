// http/headers: request classification and the header rules of a forwarding intermediary
// (RFC 9110 §7.6.1 hop-by-hop fields, RFC 9112 §6.3 message framing).
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "http/session_settings.hpp"
#include "http/beast.hpp"
#include "protocol/types.hpp"

namespace tokenmeter::http {

// Which metered API a request targets; none for everything that passes through untouched.
protocol::api_kind classify(bhttp::verb method, std::string_view target);

// Copies every field except hop-by-hop ones (the fixed set plus those named in Connection)
// and Content-Length/Transfer-Encoding, whose framing the proxy sets itself.
void copy_end_to_end_fields(const bhttp::fields& from, bhttp::fields& to);

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

// Erases the fields after the first `header_fields` (a chunked body's trailer section, which
// Beast appends to the header).
void drop_trailer_fields(bhttp::fields& fields, std::size_t header_fields);

// The head of a message (start line, fields, the empty line) as the bytes Beast's serializer
// writes for it, appended to `out`: one buffer for the socket instead of Beast's buffer sequence
// of the start line and each field, whose iteration by the socket operation cost more than the
// whole of the rest of the write (tens of thousands of instructions per request).
void append_head(const bhttp::request_header<>& head, std::string& out);
void append_head(const bhttp::response_header<>& head, std::string& out);

// "host[:port]" for the Host field (port left out when it is 80).
std::string upstream_host_header(const upstream_address& upstream);

}  // namespace tokenmeter::http
