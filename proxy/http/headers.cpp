#include "http/headers.hpp"

#include <algorithm>
#include <array>
#include <vector>

#include "core/text.hpp"
#include "protocol/dialects.hpp"

namespace tokenmeter::http {
namespace {

// Content-Length is not hop-by-hop, but the proxy re-frames every message, so it sets its own.
// Beast's parser names every one of them by its enum, whatever the case it came in.
constexpr std::array<bhttp::field, 8> hop_by_hop = {
    bhttp::field::connection, bhttp::field::keep_alive,        bhttp::field::proxy_connection,
    bhttp::field::te,         bhttp::field::trailer,           bhttp::field::transfer_encoding,
    bhttp::field::upgrade,    bhttp::field::content_length};

// Comma-separated tokens of every instance of a field.
std::vector<std::string> field_tokens(const bhttp::fields& fields, bhttp::field name) {
    std::vector<std::string> tokens;
    auto range = fields.equal_range(name);
    for (auto it = range.first; it != range.second; ++it) {
        std::string_view value = it->value();
        while (!value.empty()) {
            auto comma = value.find(',');
            auto token = core::trim(value.substr(0, comma), core::http_whitespace);
            if (!token.empty()) {
                tokens.emplace_back(token);
            }
            if (comma == std::string_view::npos) {
                break;
            }
            value.remove_prefix(comma + 1);
        }
    }
    return tokens;
}

// RFC 3986 host [":" port] without user info: reg-name, IPv4 or a bracketed IP literal. An
// empty value is allowed (a target without an authority).
bool is_authority(std::string_view value) {
    for (char c : value) {
        const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
                        (c >= '0' && c <= '9') ||
                        std::string_view("-._~%!$&'()*+,;=:[]").find(c) != std::string_view::npos;
        if (!ok) {
            return false;
        }
    }
    return true;
}

}  // namespace

protocol::api_kind classify(bhttp::verb method, std::string_view target) {
    if (method != bhttp::verb::post) {
        return protocol::api_kind::none;
    }
    return protocol::api_for_path(target);
}

void copy_end_to_end_fields(const bhttp::fields& from, bhttp::fields& to) {
    auto named = field_tokens(from, bhttp::field::connection);
    for (const auto& field : from) {
        const bhttp::field known = field.name();
        std::string_view name = field.name_string();
        bool skip = known != bhttp::field::unknown &&
                    std::find(hop_by_hop.begin(), hop_by_hop.end(), known) != hop_by_hop.end();
        for (const auto& token : named) {
            if (!skip && beast::iequals(name, token)) {
                skip = true;
            }
        }
        if (!skip) {
            // With its enum: Beast need not look the name up again.
            to.insert(known, name, field.value());
        }
    }
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
    auto codings = field_tokens(head, bhttp::field::transfer_encoding);
    if (has_transfer_encoding && (codings.empty() || !beast::iequals(codings.back(), "chunked"))) {
        // RFC 9112 §6.3: a request whose last transfer coding is not chunked has no knowable
        // length.
        return ambiguous("Transfer-Encoding without chunked as the final coding");
    }
    for (std::size_t i = 0; i + 1 < codings.size(); ++i) {
        if (beast::iequals(codings[i], "chunked")) {
            // RFC 9112 §6.1: chunked is applied once, and last.
            return ambiguous("Transfer-Encoding applies chunked more than once");
        }
    }
    if (codings.size() > 1) {
        // The proxy forwards with its own framing and decodes no other coding: forwarding the
        // body without it would change it, so the request is not implemented (RFC 9112 §6.1).
        return head_problem{
            bhttp::status::not_implemented, "unsupported_transfer_coding",
            "transfer coding '" + codings.front() + "' is not supported; only chunked"};
    }
    auto values = field_tokens(head, bhttp::field::content_length);
    for (const auto& value : values) {
        if (value != values.front()) {
            return ambiguous("differing Content-Length values");
        }
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

void drop_trailer_fields(bhttp::fields& fields, std::size_t header_fields) {
    auto it = fields.begin();
    for (std::size_t i = 0; i < header_fields && it != fields.end(); ++i) {
        ++it;
    }
    while (it != fields.end()) {
        it = fields.erase(it);
    }
}

namespace {

void append_view(std::string& out, beast::string_view text) {
    out.append(text.data(), text.size());
}

// Every field as Beast stores it ("name: value\r\n"), then the empty line.
void append_fields(const bhttp::fields& fields, std::string& out) {
    for (const auto& field : fields) {
        append_view(out, field.name_string());
        out.append(": ");
        append_view(out, field.value());
        out.append("\r\n");
    }
    out.append("\r\n");
}

void append_version(unsigned version, std::string& out) {
    out.append("HTTP/");
    out.push_back(static_cast<char>('0' + (version / 10) % 10));
    out.push_back('.');
    out.push_back(static_cast<char>('0' + version % 10));
}

}  // namespace

void append_head(const bhttp::request_header<>& head, std::string& out) {
    append_view(out, head.method_string());
    out.push_back(' ');
    append_view(out, head.target());
    out.push_back(' ');
    append_version(head.version(), out);
    out.append("\r\n");
    append_fields(head, out);
}

void append_head(const bhttp::response_header<>& head, std::string& out) {
    append_version(head.version(), out);
    const unsigned code = head.result_int();
    out.push_back(' ');
    out.push_back(static_cast<char>('0' + (code / 100) % 10));
    out.push_back(static_cast<char>('0' + (code / 10) % 10));
    out.push_back(static_cast<char>('0' + code % 10));
    out.push_back(' ');
    append_view(out, head.reason());  // the upstream's, or the standard one when it sent none
    out.append("\r\n");
    append_fields(head, out);
}

std::string upstream_host_header(const upstream_address& upstream) {
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

}  // namespace tokenmeter::http
