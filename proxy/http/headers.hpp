// http/headers: request classification and the header rules of a forwarding intermediary
// (RFC 9110 §7.6.1 hop-by-hop fields, RFC 9112 §6.3 message framing).
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "config/config.hpp"
#include "http/beast.hpp"
#include "protocol/types.hpp"

namespace tokenmeter::http {

// Which metered API a request targets; none for everything that passes through untouched.
protocol::api_kind classify(bhttp::verb method, std::string_view target);

// Copies every field except hop-by-hop ones (the fixed set plus those named in Connection)
// and Content-Length/Transfer-Encoding, whose framing the proxy sets itself.
void copy_end_to_end_fields(const bhttp::fields& from, bhttp::fields& to);

// A reason to refuse a request whose length is ambiguous (request smuggling), or nullopt.
std::optional<std::string> framing_problem(const bhttp::request_header<>& head);

std::string upstream_host_header(const config::upstream_target& upstream);

}  // namespace tokenmeter::http
