#include "http/headers.hpp"

#include <array>
#include <vector>

#include "protocol/dialects.hpp"

namespace tokenmeter::http {
namespace {

// Content-Length is not hop-by-hop, but the proxy re-frames every message, so it sets its own.
constexpr std::array<std::string_view, 8> hop_by_hop = {
    "connection", "keep-alive",        "proxy-connection", "te",
    "trailer",    "transfer-encoding", "upgrade",          "content-length"};

std::string_view trim(std::string_view text) {
    while (!text.empty() && (text.front() == ' ' || text.front() == '\t')) {
        text.remove_prefix(1);
    }
    while (!text.empty() && (text.back() == ' ' || text.back() == '\t')) {
        text.remove_suffix(1);
    }
    return text;
}

// Comma-separated tokens of every instance of a field.
std::vector<std::string> field_tokens(const bhttp::fields& fields, bhttp::field name) {
    std::vector<std::string> tokens;
    auto range = fields.equal_range(name);
    for (auto it = range.first; it != range.second; ++it) {
        std::string_view value = it->value();
        while (!value.empty()) {
            auto comma = value.find(',');
            auto token = trim(value.substr(0, comma));
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
        std::string_view name = field.name_string();
        bool skip = false;
        for (auto hop : hop_by_hop) {
            if (beast::iequals(name, hop)) {
                skip = true;
                break;
            }
        }
        for (const auto& token : named) {
            if (!skip && beast::iequals(name, token)) {
                skip = true;
            }
        }
        if (!skip) {
            to.insert(name, field.value());
        }
    }
}

std::optional<std::string> framing_problem(const bhttp::request_header<>& head) {
    auto lengths = head.equal_range(bhttp::field::content_length);
    bool has_length = lengths.first != lengths.second;
    bool has_transfer_encoding = head.find(bhttp::field::transfer_encoding) != head.end();
    if (has_length && has_transfer_encoding) {
        return std::string("both Content-Length and Transfer-Encoding are present");
    }
    auto codings = field_tokens(head, bhttp::field::transfer_encoding);
    if (has_transfer_encoding && (codings.empty() || !beast::iequals(codings.back(), "chunked"))) {
        // RFC 9112 §6.3: a request whose last transfer coding is not chunked has no knowable
        // length.
        return std::string("Transfer-Encoding without chunked as the final coding");
    }
    auto values = field_tokens(head, bhttp::field::content_length);
    for (const auto& value : values) {
        if (value != values.front()) {
            return std::string("differing Content-Length values");
        }
    }
    return std::nullopt;
}

std::string upstream_host_header(const config::upstream_target& upstream) {
    // Built with append: GCC 12 misreports "literal" + std::string at -O3 (-Wrestrict).
    std::string host;
    bool ipv6 = upstream.host.find(':') != std::string::npos;
    if (ipv6) {
        host.append("[").append(upstream.host).append("]");
    } else {
        host.append(upstream.host);
    }
    if (upstream.port != 80) {
        host.append(":").append(std::to_string(upstream.port));
    }
    return host;
}

}  // namespace tokenmeter::http
