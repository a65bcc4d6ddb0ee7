#include "relay/headers.hpp"

#include <algorithm>
#include <array>
#include <charconv>
#include <cstdint>
#include <iterator>
#include <vector>

#include "core/text.hpp"
#include "protocol/dialects.hpp"
#include "usage/tenant.hpp"

namespace tokenmeter::relay {
namespace {

// Content-Length is not hop-by-hop, but the proxy re-frames every message, so it sets its own.
// Beast's parser names every one of them by its enum, whatever the case it came in.
constexpr std::array<bhttp::field, 8> hop_by_hop = {
    bhttp::field::connection, bhttp::field::keep_alive,    bhttp::field::proxy_connection,
    bhttp::field::te,         bhttp::field::trailer,       bhttp::field::transfer_encoding,
    bhttp::field::upgrade,    bhttp::field::content_length};

// Calls f(token) for each non-empty comma-separated token of every instance of a field, in
// order, until f returns false.
template <typename F>
void each_token(const bhttp::fields& fields, bhttp::field name, F&& f) {
    auto range = fields.equal_range(name);
    for (auto it = range.first; it != range.second; ++it) {
        std::string_view value = it->value();
        while (!value.empty()) {
            auto comma = value.find(',');
            auto token = core::trim(value.substr(0, comma), core::http_whitespace);
            if (!token.empty() && !f(token)) {
                return;
            }
            if (comma == std::string_view::npos) {
                break;
            }
            value.remove_prefix(comma + 1);
        }
    }
}

// Comma-separated tokens of every instance of a field.
std::vector<std::string> field_tokens(const bhttp::fields& fields, bhttp::field name) {
    std::vector<std::string> tokens;
    each_token(fields, name, [&tokens](std::string_view token) {
        tokens.emplace_back(token);
        return true;
    });
    return tokens;
}

// RFC 3986 host [":" port] without user info: reg-name, IPv4 or a bracketed IP literal. An
// empty value is allowed (a target without an authority).
bool is_authority(std::string_view value) {
    return std::ranges::all_of(value, [](char c) {
        return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
               std::string_view("-._~%!$&'()*+,;=:[]").find(c) != std::string_view::npos;
    });
}

}  // namespace

protocol::api_kind classify(bhttp::verb method, std::string_view target) {
    if (method != bhttp::verb::post) {
        return protocol::api_kind::none;
    }
    return protocol::api_for_path(target);
}

namespace {

bool names_token(const bhttp::fields& fields, bhttp::field name, std::string_view wanted) {
    bool found = false;
    each_token(fields, name, [&](std::string_view token) {
        found = beast::iequals(beast::string_view(token.data(), token.size()),
                               beast::string_view(wanted.data(), wanted.size()));
        return !found;
    });
    return found;
}

}  // namespace

bool asks_for_websocket(const bhttp::request_header<>& head, std::size_t body_bytes) {
    return head.method() == bhttp::verb::get && head.version() == 11 && body_bytes == 0 &&
           names_token(head, bhttp::field::upgrade, "websocket") &&
           names_token(head, bhttp::field::connection, "upgrade");
}

bool switched_to_websocket(const bhttp::response_header<>& head) {
    return head.result_int() == 101 && names_token(head, bhttp::field::upgrade, "websocket");
}

std::vector<std::string> connection_options(const bhttp::fields& fields) {
    if (fields.find(bhttp::field::connection) == fields.end()) {
        return {};  // the common case: no vector, no allocation
    }
    return field_tokens(fields, bhttp::field::connection);
}

bool is_hop_by_hop(const bhttp::fields::value_type& field,
                   const std::vector<std::string>& connection_named) {
    const bhttp::field known = field.name();
    if (known != bhttp::field::unknown &&
        std::find(hop_by_hop.begin(), hop_by_hop.end(), known) != hop_by_hop.end()) {
        return true;
    }
    const std::string_view name = field.name_string();
    return std::any_of(connection_named.begin(), connection_named.end(),
                       [name](const std::string& token) { return beast::iequals(name, token); });
}

namespace {

// Calls f(field) for every field of `from` that is not hop-by-hop, in order.
template <typename F>
void each_end_to_end_field(const bhttp::fields& from, F&& f) {
    const auto named = connection_options(from);
    for (const auto& field : from) {
        if (!is_hop_by_hop(field, named)) {
            f(field);
        }
    }
}

}  // namespace

void copy_end_to_end_fields(const bhttp::fields& from, bhttp::fields& to) {
    each_end_to_end_field(from, [&to](const bhttp::fields::value_type& field) {
        // With its enum: Beast need not look the name up again.
        to.insert(field.name(), field.name_string(), field.value());
    });
}

void append_field(std::string& out, std::string_view name, std::string_view value) {
    out.append(name);
    out.append(": ");
    out.append(value);
    out.append("\r\n");
}

void append_field(std::string& out, std::string_view name, std::uint64_t value) {
    std::array<char, 20> digits{};  // the most a 64-bit value takes
    const auto written = std::to_chars(digits.data(), digits.data() + digits.size(), value);
    append_field(
        out, name,
        std::string_view(digits.data(), static_cast<std::size_t>(written.ptr - digits.data())));
}

void append_end_to_end_fields(const bhttp::fields& from, std::string& out) {
    each_end_to_end_field(from, [&out](const bhttp::fields::value_type& field) {
        append_field(out, field.name_string(), field.value());
    });
}

std::optional<head_problem> framing_problem(const bhttp::request_header<>& head) {
    auto ambiguous = [](std::string message) {
        return head_problem{bhttp::status::bad_request, "ambiguous_framing", std::move(message)};
    };
    auto lengths = head.equal_range(bhttp::field::content_length);
    bool has_length = lengths.first != lengths.second;
    bool has_transfer_encoding = head.find(bhttp::field::transfer_encoding) != head.end();
    if (has_length && has_transfer_encoding) {
        return ambiguous("both Content-Length and Transfer-Encoding are present");
    }
    if (has_transfer_encoding) {
        auto codings = field_tokens(head, bhttp::field::transfer_encoding);
        if (codings.empty() || !beast::iequals(codings.back(), "chunked")) {
            // RFC 9112 §6.3: a request whose last transfer coding is not chunked has no
            // knowable length.
            return ambiguous("Transfer-Encoding without chunked as the final coding");
        }
        for (std::size_t i = 0; i + 1 < codings.size(); ++i) {
            if (beast::iequals(codings[i], "chunked")) {
                // RFC 9112 §6.1: chunked is applied once, and last.
                return ambiguous("Transfer-Encoding applies chunked more than once");
            }
        }
        if (codings.size() > 1) {
            // The proxy forwards with its own framing and decodes no other coding: forwarding
            // the body without it would change it, so the request is not implemented (RFC 9112
            // §6.1).
            return head_problem{
                bhttp::status::not_implemented, "unsupported_transfer_coding",
                "transfer coding '" + codings.front() + "' is not supported; only chunked"};
        }
    }
    // Every Content-Length value the same (compared in place: most requests have one).
    std::string_view first_length;
    bool differ = false;
    each_token(head, bhttp::field::content_length, [&](std::string_view value) {
        if (first_length.empty()) {
            first_length = value;
        } else if (value != first_length) {
            differ = true;
        }
        return !differ;
    });
    if (differ) {
        return ambiguous("differing Content-Length values");
    }
    return std::nullopt;
}

std::optional<head_problem> host_or_version_problem(const bhttp::request_header<>& head) {
    if (head.version() != 11 && head.version() != 10) {
        return head_problem{bhttp::status::http_version_not_supported, "http_version_not_supported",
                            "only HTTP/1.0 and HTTP/1.1 are served on this port"};
    }
    auto hosts = head.count(bhttp::field::host);
    if (hosts > 1) {
        return head_problem{bhttp::status::bad_request, "bad_host",
                            "more than one Host field (RFC 9112 §3.2)"};
    }
    if (hosts == 0 && head.version() == 11) {
        return head_problem{bhttp::status::bad_request, "bad_host",
                            "an HTTP/1.1 request needs a Host field (RFC 9112 §3.2)"};
    }
    if (hosts == 1 && !is_authority(head[bhttp::field::host])) {
        return head_problem{bhttp::status::bad_request, "bad_host",
                            "the Host field is not a host[:port] (RFC 9112 §3.2, RFC 3986 §3.2)"};
    }
    return std::nullopt;
}

std::optional<head_problem> credential_problem(const bhttp::request_header<>& head,
                                               usage::tenant_source tenant_from,
                                               std::string_view tenant_header) {
    if (tenant_from == usage::tenant_source::none) {
        return std::nullopt;
    }
    auto refuse = [](std::string_view code, std::string message) {
        return head_problem{bhttp::status::bad_request, code, std::move(message)};
    };
    const beast::string_view header_name(tenant_header.data(), tenant_header.size());
    // The fields that decide the tenant.
    std::array<beast::string_view, 2> deciding{};
    std::size_t count = 0;
    if (tenant_from == usage::tenant_source::header) {
        deciding[count++] = header_name;
    } else {
        deciding[count++] = "authorization";
        deciding[count++] = "x-api-key";
    }
    std::optional<head_problem> problem;
    each_token(head, bhttp::field::connection, [&](std::string_view option) {
        for (std::size_t i = 0; i < count; ++i) {
            if (beast::iequals(beast::string_view(option.data(), option.size()), deciding[i])) {
                problem = refuse("credential_in_connection",
                                 "the Connection field names " + std::string(option) +
                                     ", which decides the tenant; it would be billed but "
                                     "not forwarded");
                return false;
            }
        }
        return true;
    });
    if (problem) {
        return problem;
    }
    for (std::size_t i = 0; i < count; ++i) {
        if (head.count(deciding[i]) > 1) {
            return refuse("duplicate_credentials",
                          "more than one " + std::string(deciding[i]) + " field");
        }
    }
    if (tenant_from != usage::tenant_source::api_key) {
        return std::nullopt;
    }
    const auto authorization = head[bhttp::field::authorization];
    const auto api_key = core::trim(head["x-api-key"], core::http_whitespace);
    if (head.find(bhttp::field::authorization) == head.end()) {
        return std::nullopt;
    }
    const std::string_view value(authorization.data(), authorization.size());
    if (!usage::parse_authorization(value).valid) {
        return refuse("bad_authorization",
                      "the Authorization field is not an auth-scheme followed by one or more "
                      "spaces and a token68 or auth-params (RFC 9110 §11.4)");
    }
    if (!api_key.empty() && usage::bearer_token(value) != api_key) {
        return refuse("conflicting_credentials",
                      "Authorization and x-api-key carry different credentials");
    }
    return std::nullopt;
}

void drop_trailer_fields(bhttp::fields& fields, std::size_t header_fields) {
    auto it = fields.begin();
    for (std::size_t i = 0; i < header_fields && it != fields.end(); ++i) {
        ++it;
    }
    while (it != fields.end()) {
        it = fields.erase(it);
    }
}

void append_status_line(unsigned version, unsigned code, std::string_view reason,
                        std::string& out) {
    out.append("HTTP/");
    out.push_back(static_cast<char>('0' + (version / 10) % 10));
    out.push_back('.');
    out.push_back(static_cast<char>('0' + version % 10));
    out.push_back(' ');
    out.push_back(static_cast<char>('0' + (code / 100) % 10));
    out.push_back(static_cast<char>('0' + (code / 10) % 10));
    out.push_back(static_cast<char>('0' + code % 10));
    out.push_back(' ');
    out.append(reason);
    out.append("\r\n");
}

std::string upstream_host_header(const net::upstream_address& upstream) {
    // Built with append: GCC 12 misreports "literal" + std::string at -O3 (-Wrestrict).
    std::string host;
    bool ipv6 = upstream.host.find(':') != std::string::npos;
    if (ipv6) {
        host.append("[").append(upstream.host).append("]");
    } else {
        host.append(upstream.host);
    }
    if (upstream.port != (upstream.scheme == "https" ? 443 : 80)) {
        host.append(":").append(std::to_string(upstream.port));
    }
    return host;
}

}  // namespace tokenmeter::relay
