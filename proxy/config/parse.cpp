// config/parse: the configuration's value formats as text parsers. Each refusal says why, in
// words the loader quotes after the value ("expected a duration like 30s, got ... (why)").
#include "config/parse.hpp"

#include <algorithm>
#include <array>
#include <charconv>
#include <cmath>
#include <limits>
#include <system_error>

#include "core/text.hpp"

namespace tokenmeter::config {

using std::chrono::milliseconds;

namespace detail {

std::string quote(std::string_view s) {
    return "\"" + std::string(s) + "\"";
}

namespace {

bool is_digit(char c) {
    return c >= '0' && c <= '9';
}
bool is_alpha(char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}
bool is_hex(char c) {
    return is_digit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}

char to_lower(char c) {
    return (c >= 'A' && c <= 'Z') ? static_cast<char>(c - 'A' + 'a') : c;
}

}  // namespace

std::string lowercase(std::string_view s) {
    std::string out(s);
    std::transform(out.begin(), out.end(), out.begin(), to_lower);
    return out;
}

namespace {

std::size_t count_digits(std::string_view s) {
    std::size_t n = 0;
    while (n < s.size() && is_digit(s[n])) {
        ++n;
    }
    return n;
}

// Digits only; nullopt on overflow. The caller has already checked that s is all digits.
std::optional<std::uint64_t> digits_value(std::string_view s) {
    std::uint64_t v = 0;
    const auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
    if (ec != std::errc{} || ptr != s.data() + s.size()) {
        return std::nullopt;
    }
    return v;
}

// Host names and IPv4 literals. Deliberately narrow: a stray space or slash is a typo, not a host.
bool valid_name(std::string_view host) {
    return std::all_of(host.begin(), host.end(), [](char c) {
        return is_alpha(c) || is_digit(c) || c == '-' || c == '.' || c == '_';
    });
}

// The inside of "[...]": hex groups, colons, an embedded IPv4 tail, and an optional %zone.
bool valid_v6(std::string_view host) {
    const std::size_t percent = host.find('%');
    const std::string_view address = host.substr(0, percent);
    if (address.find(':') == std::string_view::npos) {
        return false;
    }
    const bool address_ok = std::all_of(address.begin(), address.end(),
                                        [](char c) { return is_hex(c) || c == ':' || c == '.'; });
    if (!address_ok) {
        return false;
    }
    if (percent == std::string_view::npos) {
        return true;
    }
    const std::string_view zone = host.substr(percent + 1);
    return !zone.empty() && valid_name(zone);
}

parsed<std::uint16_t> parse_port(std::string_view text) {
    if (text.empty()) {
        return failure<std::uint16_t>("missing port after ':'");
    }
    if (count_digits(text) != text.size()) {
        return failure<std::uint16_t>("port " + quote(text) + " is not a number");
    }
    const auto v = digits_value(text);
    if (!v || *v > 65535) {
        return failure<std::uint16_t>("port " + std::string(text) + " is out of range 0-65535");
    }
    return success(static_cast<std::uint16_t>(*v));
}

struct authority {
    std::string host;
    std::optional<std::uint16_t> port;
};

// "host", "host:port", "[v6]", "[v6]:port", with the port demanded when port_required.
parsed<authority> parse_authority(std::string_view text, bool port_required) {
    std::string_view host;
    std::optional<std::string_view> port_text;
    if (!text.empty() && text.front() == '[') {
        const std::size_t close = text.find(']');
        if (close == std::string_view::npos) {
            return failure<authority>("missing ']' after the IPv6 address");
        }
        host = text.substr(1, close - 1);
        const std::string_view rest = text.substr(close + 1);
        if (!rest.empty()) {
            if (rest.front() != ':') {
                return failure<authority>("unexpected " + quote(rest) + " after ']'");
            }
            port_text = rest.substr(1);
        }
        if (host.empty()) {
            return failure<authority>("empty host");
        }
        if (!valid_v6(host)) {
            return failure<authority>(quote(host) + " is not an IPv6 address");
        }
    } else {
        const std::size_t colon = text.rfind(':');
        host = text.substr(0, colon);
        if (colon != std::string_view::npos) {
            port_text = text.substr(colon + 1);
        }
        if (host.find(':') != std::string_view::npos) {
            return failure<authority>("an IPv6 address needs brackets, e.g. [::1]:8080");
        }
        if (host.empty()) {
            return failure<authority>("empty host");
        }
        if (!valid_name(host)) {
            return failure<authority>(quote(host) + " is not a valid host name or address");
        }
    }
    authority out{std::string(host), std::nullopt};
    if (!port_text) {
        if (port_required) {
            return failure<authority>("missing port");
        }
        return success(std::move(out));
    }
    auto port = parse_port(*port_text);
    if (!port.value) {
        return failure<authority>(std::move(port.why));
    }
    out.port = *port.value;
    return success(std::move(out));
}

// RFC 3986 path characters; anything else (spaces, quotes, backslashes, non-ASCII) is a typo.
bool valid_path_char(char c) {
    static constexpr std::string_view extra = "-._~!$&'()*+,;=:@/%";
    return is_alpha(c) || is_digit(c) || extra.find(c) != std::string_view::npos;
}

struct unit {
    std::string_view name;
    std::uint64_t factor;
};

}  // namespace

parsed<endpoint> parse_endpoint_detailed(std::string_view text) {
    text = core::trim(text);
    if (text.empty()) {
        return failure<endpoint>("empty address");
    }
    auto a = parse_authority(text, true);
    if (!a.value) {
        return failure<endpoint>(std::move(a.why));
    }
    return success(endpoint{std::move(a.value->host), *a.value->port});
}

parsed<upstream_target> parse_upstream_detailed(std::string_view text) {
    text = core::trim(text);
    if (text.empty()) {
        return failure<upstream_target>("empty URL");
    }
    const std::size_t sep = text.find("://");
    if (sep == std::string_view::npos) {
        return failure<upstream_target>("missing scheme; write http://" + std::string(text));
    }
    upstream_target out;
    out.scheme = lowercase(text.substr(0, sep));
    if (out.scheme != "http" && out.scheme != "https") {
        return failure<upstream_target>("unsupported scheme " + quote(out.scheme) +
                                        "; use http:// or https://");
    }
    const std::string_view rest = text.substr(sep + 3);
    if (rest.find_first_of("?#") != std::string_view::npos) {
        return failure<upstream_target>(
            "a query string or fragment is not allowed in the upstream");
    }
    const std::size_t slash = rest.find('/');
    const std::string_view authority_text = rest.substr(0, slash);
    std::string_view path =
        slash == std::string_view::npos ? std::string_view{} : rest.substr(slash);
    if (authority_text.find('@') != std::string_view::npos) {
        return failure<upstream_target>("credentials in the upstream URL are not supported");
    }
    if (authority_text.empty()) {
        return failure<upstream_target>("missing host");
    }
    auto a = parse_authority(authority_text, false);
    if (!a.value) {
        return failure<upstream_target>(std::move(a.why));
    }
    out.host = std::move(a.value->host);
    out.port = a.value->port.value_or(out.scheme == "https" ? 443 : 80);
    if (out.port == 0) {
        return failure<upstream_target>("port 0 is not a valid upstream port");
    }
    if (!std::all_of(path.begin(), path.end(), valid_path_char)) {
        return failure<upstream_target>("the base path " + quote(path) +
                                        " has characters that need percent-encoding");
    }
    // The base is prepended to paths that begin with '/', so its own trailing slash would double.
    while (!path.empty() && path.back() == '/') {
        path.remove_suffix(1);
    }
    out.base_path = std::string(path);
    return success(std::move(out));
}

parsed<milliseconds> parse_duration_detailed(std::string_view text) {
    text = core::trim(text);
    if (text.empty()) {
        return failure<milliseconds>("empty duration");
    }
    if (text.front() == '-') {
        return failure<milliseconds>("a duration cannot be negative");
    }
    const std::size_t int_len = count_digits(text);
    if (int_len == 0) {
        return failure<milliseconds>("a duration starts with a number");
    }
    std::string_view int_part = text.substr(0, int_len);
    std::string_view frac_part;
    std::string_view rest = text.substr(int_len);
    if (!rest.empty() && rest.front() == '.') {
        const std::size_t frac_len = count_digits(rest.substr(1));
        if (frac_len == 0) {
            return failure<milliseconds>("expected digits after '.'");
        }
        frac_part = rest.substr(1, frac_len);
        rest = rest.substr(1 + frac_len);
    }
    const std::string_view unit_text = core::trim(rest);
    static constexpr std::array<unit, 4> units{{
        {"ms", 1},
        {"s", 1'000},
        {"m", 60'000},
        {"h", 3'600'000},
    }};
    std::uint64_t factor = 1'000;  // a bare number is seconds
    if (!unit_text.empty()) {
        const auto* const it = std::find_if(units.begin(), units.end(),
                                            [&](const unit& u) { return u.name == unit_text; });
        if (it == units.end()) {
            return failure<milliseconds>("unknown unit " + quote(unit_text) +
                                         "; use ms, s, m or h");
        }
        factor = it->factor;
    }
    // Exact decimal arithmetic: "0.1s" must be 100 ms, not 99 because of binary rounding.
    while (!frac_part.empty() && frac_part.back() == '0') {
        frac_part.remove_suffix(1);
    }
    constexpr std::uint64_t max_ms = 365ull * 24 * 3'600'000;
    const auto whole = int_len <= 12 ? digits_value(int_part) : std::nullopt;
    if (!whole || *whole > max_ms || *whole * factor > max_ms) {
        return failure<milliseconds>("a duration must be at most one year");
    }
    std::uint64_t ms = *whole * factor;
    if (!frac_part.empty()) {
        if (frac_part.size() > 9) {
            return failure<milliseconds>("the resolution of a duration is one millisecond");
        }
        std::uint64_t scale = 1;
        for (std::size_t i = 0; i < frac_part.size(); ++i) {
            scale *= 10;
        }
        const std::uint64_t scaled = *digits_value(frac_part) * factor;
        if (scaled % scale != 0) {
            return failure<milliseconds>("the resolution of a duration is one millisecond");
        }
        ms += scaled / scale;
        if (ms > max_ms) {
            return failure<milliseconds>("a duration must be at most one year");
        }
    }
    return success(milliseconds{static_cast<milliseconds::rep>(ms)});
}

parsed<std::uint64_t> parse_size_detailed(std::string_view text) {
    text = core::trim(text);
    if (text.empty()) {
        return failure<std::uint64_t>("empty size");
    }
    if (text.front() == '-') {
        return failure<std::uint64_t>("a size cannot be negative");
    }
    const std::size_t int_len = count_digits(text);
    if (int_len == 0) {
        return failure<std::uint64_t>("a size starts with a number");
    }
    const std::string_view rest = text.substr(int_len);
    if (!rest.empty() && rest.front() == '.') {
        return failure<std::uint64_t>("a size is a whole number; write 1536KiB, not 1.5MiB");
    }
    const std::string unit_text = lowercase(core::trim(rest));
    static constexpr std::array<unit, 5> units{{
        {"", 1},
        {"b", 1},
        {"kib", 1ull << 10},
        {"mib", 1ull << 20},
        {"gib", 1ull << 30},
    }};
    const auto* const it = std::find_if(units.begin(), units.end(),
                                        [&](const unit& u) { return u.name == unit_text; });
    if (it == units.end()) {
        static constexpr std::array<std::string_view, 8> decimal{"k", "kb", "m", "mb",
                                                                 "g", "gb", "t", "tb"};
        const std::string shown(core::trim(rest));
        if (std::find(decimal.begin(), decimal.end(), unit_text) != decimal.end()) {
            return failure<std::uint64_t>("the unit " + quote(shown) +
                                          " is ambiguous; write KiB, MiB or GiB, which are powers "
                                          "of 1024, or a plain byte count");
        }
        return failure<std::uint64_t>("unknown unit " + quote(shown) + "; use KiB, MiB or GiB");
    }
    const auto v = digits_value(text.substr(0, int_len));
    if (!v || *v > std::numeric_limits<std::uint64_t>::max() / it->factor) {
        return failure<std::uint64_t>("the size is too large");
    }
    return success(*v * it->factor);
}

std::string format_number(double v) {
    std::array<char, 32> buf{};
    const auto [ptr, ec] = std::to_chars(buf.data(), buf.data() + buf.size(), v);
    if (ec != std::errc{}) {
        return "?";
    }
    return std::string(buf.data(), ptr);
}

parsed<std::uint32_t> parse_count(std::string_view text) {
    text = core::trim(text);
    if (!text.empty() && text.front() == '-') {
        return failure<std::uint32_t>("cannot be negative");
    }
    if (text.empty() || count_digits(text) != text.size()) {
        return failure<std::uint32_t>("not a whole number");
    }
    const auto v = digits_value(text);
    if (!v || *v > std::numeric_limits<std::uint32_t>::max()) {
        return failure<std::uint32_t>("too large");
    }
    return success(static_cast<std::uint32_t>(*v));
}

parsed<bool> parse_bool(std::string_view text) {
    const std::string t = lowercase(core::trim(text));
    if (t == "true" || t == "yes" || t == "on") {
        return success(true);
    }
    if (t == "false" || t == "no" || t == "off") {
        return success(false);
    }
    return failure<bool>("not a boolean");
}

std::optional<double> parse_number(std::string_view text) {
    const std::string_view t = core::trim(text);
    double v = 0;
    const auto [ptr, ec] = std::from_chars(t.data(), t.data() + t.size(), v);
    if (t.empty() || ec != std::errc{} || ptr != t.data() + t.size()) {
        return std::nullopt;
    }
    return v;
}

parsed<double> parse_objective(std::string_view text) {
    text = core::trim(text);
    if (!text.empty() && text.back() == '%') {
        text.remove_suffix(1);
        text = core::trim(text);
    }
    double v = 0;
    const auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
    if (text.empty() || ec != std::errc{} || ptr != text.data() + text.size() ||
        !std::isfinite(v)) {
        return failure<double>("not a number");
    }
    if (v <= 1.0) {
        return failure<double>("looks like a ratio; write the percentage, e.g. 99%");
    }
    if (v >= 100.0) {
        return failure<double>("must be below 100%");
    }
    // Via whole units of 1e-10 %, so "99.9%" becomes exactly the double nearest 0.999 (a
    // plain v / 100 gives 0.9990000000000001, which would show up in the exported gauge).
    return success(std::round(v * 1e10) / 1e12);
}

}  // namespace detail

std::string to_string(const endpoint& e) {
    const bool v6 = e.host.find(':') != std::string::npos;
    return (v6 ? "[" + e.host + "]" : e.host) + ":" + std::to_string(e.port);
}

std::optional<endpoint> parse_endpoint(const std::string& text) {
    return detail::parse_endpoint_detailed(text).value;
}

std::optional<upstream_target> parse_upstream(const std::string& text) {
    return detail::parse_upstream_detailed(text).value;
}

std::optional<milliseconds> parse_duration(const std::string& text) {
    return detail::parse_duration_detailed(text).value;
}

std::optional<std::uint64_t> parse_size(const std::string& text) {
    return detail::parse_size_detailed(text).value;
}

}  // namespace tokenmeter::config
