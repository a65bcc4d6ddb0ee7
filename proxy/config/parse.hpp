// config/parse: the value formats of the configuration as text parsers (endpoint, URL, duration,
// size, count, boolean, percentage). No YAML here: the loader and command-line overrides share
// them. Each has a detailed form that says why a text was refused, for the loader's messages.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace tokenmeter::config {

struct endpoint {
    std::string host;  // IPv4/IPv6 literal or name; "[::1]" brackets stripped
    std::uint16_t port = 0;
    bool operator==(const endpoint&) const = default;
};

struct upstream_target {
    std::string scheme = "http";  // "https" parses (port 443) but validate() rejects it for now
    std::string host;
    std::uint16_t port = 80;
    // "" or e.g. "/prefix" (no trailing slash) prepended to every request path
    std::string base_path;
    bool operator==(const upstream_target&) const = default;
};

// "host:port", "[v6]:port". Returns nullopt on malformed input.
std::optional<endpoint> parse_endpoint(const std::string& text);
// The inverse of parse_endpoint: IPv6 hosts get their brackets back.
std::string to_string(const endpoint& e);
// "http://host:port[/base]". Returns nullopt on malformed input.
std::optional<upstream_target> parse_upstream(const std::string& text);
// "250ms", "30s", "5m", "1h", or a bare number of seconds (may be fractional).
std::optional<std::chrono::milliseconds> parse_duration(const std::string& text);
// A byte count: "65536", "64KiB", "32MiB", "1GiB". Binary units only: "MB" is refused as ambiguous.
std::optional<std::uint64_t> parse_size(const std::string& text);

namespace detail {

// A parse result that says why it failed, so the loader can explain more than "invalid".
template <typename T>
struct parsed {
    std::optional<T> value;
    std::string why;
};

template <typename T>
parsed<T> failure(std::string why) {
    return parsed<T>{std::nullopt, std::move(why)};
}

template <typename T>
parsed<T> success(T v) {
    return parsed<T>{std::move(v), {}};
}

std::string quote(std::string_view s);
std::string lowercase(std::string_view s);
// Shortest text that reads back as v ("0.005", "1e+20").
std::string format_number(double v);

parsed<endpoint> parse_endpoint_detailed(std::string_view text);
parsed<upstream_target> parse_upstream_detailed(std::string_view text);
parsed<std::chrono::milliseconds> parse_duration_detailed(std::string_view text);
parsed<std::uint64_t> parse_size_detailed(std::string_view text);
// A whole number that fits 32 bits.
parsed<std::uint32_t> parse_count(std::string_view text);
// YAML 1.1 spellings too, because yaml-cpp users have long written yes/no/on/off.
parsed<bool> parse_bool(std::string_view text);
// A finite decimal number, the whole text (surrounding space trimmed).
std::optional<double> parse_number(std::string_view text);
// "99%", "99.9%" or a bare percentage, as a ratio; a ratio like 0.99 is refused.
parsed<double> parse_objective(std::string_view text);

}  // namespace detail
}  // namespace tokenmeter::config
