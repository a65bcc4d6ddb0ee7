// config: defaults, text parsers, the YAML walk and validate(). yaml-cpp's exceptions never leave
// load_yaml; every problem becomes a config_error naming its dotted key, and all are collected.
#include "config/config.hpp"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <initializer_list>
#include <iterator>
#include <limits>
#include <set>
#include <sstream>
#include <string_view>
#include <system_error>

#include "protocol/dialects.hpp"

namespace tokenmeter::config {

namespace {

// 2^(k/4) seconds for k in [from, to], rounded to 4 significant digits: each bucket is about
// 19 % wider than the one below, so histogram_quantile's linear interpolation inside one bucket
// puts a median within 9.5 % of the truth however the values fall. These are the boundaries of a
// native histogram of schema 2, and exact powers of two (0.25, 0.5, 1, 2 s) are among them.
std::vector<double> quarter_octaves(int from, int to) {
    std::vector<double> out;
    for (int k = from; k <= to; ++k) {
        const double v = std::exp2(static_cast<double>(k) / 4.0);
        const double scale = std::pow(10.0, 3.0 - std::floor(std::log10(v)));
        out.push_back(std::round(v * scale) / scale);
    }
    return out;
}

}  // namespace

histogram_buckets default_buckets() {
    histogram_buckets b;
    // 3.9 ms to 64 s (57 boundaries): the 5 ms to 60 s range with a bucket to spare at each end.
    b.time_to_first_token = quarter_octaves(-32, 24);
    // 0.82 ms to 2.83 s (48 boundaries): batched decoding emits tokens under 10 ms apart, a
    // stalled stream seconds apart.
    b.inter_token_latency = quarter_octaves(-41, 6);
    b.time_per_output_token = b.inter_token_latency;
    // Not latencies: a 1-2-5 ladder spanning CPU inference to speculative decoding.
    b.output_tokens_per_second = {1,   2,   5,   10,  20,  30,   40,   50,  75,
                                  100, 150, 200, 300, 500, 1000, 2000, 5000};
    b.decode_tokens_per_second = b.output_tokens_per_second;
    // 3.9 ms to 256 s (65 boundaries): as TTFT, extended because long generations and reasoning
    // runs last minutes.
    b.request_duration = quarter_octaves(-32, 32);
    return b;
}

settings default_settings() {
    return settings{};
}

std::string effective_tokenizer_dir(const tokenization& t) {
    if (!t.tokenizer_dir.empty()) {
        return t.tokenizer_dir;
    }
    if (const char* env = std::getenv("TOKENMETER_TOKENIZER_DIR"); env != nullptr && *env != 0) {
        return env;
    }
    return "/usr/local/share/tokenmeter/tokenizers";
}

std::optional<slo_target> slo_preset(std::string_view name) {
    using std::chrono::milliseconds;
    // MLPerf Inference v5 LLM scenarios (Llama 2 70B): "server" is the classic online scenario,
    // "interactive" the tighter one for chat-like use.
    if (name == "server") {
        return slo_target{"server", milliseconds{2'000}, milliseconds{100}, std::nullopt};
    }
    if (name == "interactive") {
        return slo_target{"interactive", milliseconds{500}, milliseconds{30}, std::nullopt};
    }
    return std::nullopt;
}

double slo_objective(const slo_settings& slo, const slo_target& target) {
    return target.objective.value_or(slo.objective);
}

namespace {

double seconds_of(milliseconds d) {
    return static_cast<double>(d.count()) / 1000.0;
}

void add_boundary(std::vector<double>& bounds, double v) {
    const auto at = std::lower_bound(bounds.begin(), bounds.end(), v);
    if (at == bounds.end() || *at != v) {
        bounds.insert(at, v);
    }
}

// Every configured entry, the default one first, with the key it was configured under.
std::vector<std::pair<std::string, const slo_target*>> slo_entries(const slo_settings& slo) {
    std::vector<std::pair<std::string, const slo_target*>> out;
    if (slo.default_target) {
        out.emplace_back("slo.default", &*slo.default_target);
    }
    for (const auto& [name, target] : slo.models) {
        out.emplace_back("slo.models." + name, &target);
    }
    return out;
}

}  // namespace

histogram_buckets buckets_with_slo_targets(const metrics& m, const slo_settings& slo) {
    histogram_buckets out = m.buckets;
    const histogram_buckets defaults = default_buckets();
    // Compared with the lists as configured, not as extended, so every target gets in.
    for (const auto& [key, target] : slo_entries(slo)) {
        if (target->ttft && m.buckets.time_to_first_token == defaults.time_to_first_token) {
            add_boundary(out.time_to_first_token, seconds_of(*target->ttft));
        }
        if (target->tpot && m.buckets.time_per_output_token == defaults.time_per_output_token) {
            add_boundary(out.time_per_output_token, seconds_of(*target->tpot));
        }
        if (target->tpot && m.buckets.inter_token_latency == defaults.inter_token_latency) {
            add_boundary(out.inter_token_latency, seconds_of(*target->tpot));
        }
    }
    return out;
}

std::string to_string(const config_error& e) {
    if (e.key.empty()) {
        return e.message;
    }
    return e.key + ": " + e.message;
}

std::string to_string(const endpoint& e) {
    const bool v6 = e.host.find(':') != std::string::npos;
    return (v6 ? "[" + e.host + "]" : e.host) + ":" + std::to_string(e.port);
}

// Internal linkage: these helpers are this file's business, not the module's API.
namespace detail {
namespace {

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

std::string quote(std::string_view s) {
    return "\"" + std::string(s) + "\"";
}

std::string_view trim(std::string_view s) {
    const auto is_space = [](char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n'; };
    while (!s.empty() && is_space(s.front())) {
        s.remove_prefix(1);
    }
    while (!s.empty() && is_space(s.back())) {
        s.remove_suffix(1);
    }
    return s;
}

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

std::string lowercase(std::string_view s) {
    std::string out(s);
    std::transform(out.begin(), out.end(), out.begin(), to_lower);
    return out;
}

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

parsed<endpoint> parse_endpoint_detailed(std::string_view text) {
    text = trim(text);
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
    text = trim(text);
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
                                        "; only http:// is supported");
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
    text = trim(text);
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
    const std::string_view unit_text = trim(rest);
    static constexpr std::array<unit, 4> units{{
        {"ms", 1},
        {"s", 1'000},
        {"m", 60'000},
        {"h", 3'600'000},
    }};
    std::uint64_t factor = 1'000;  // a bare number is seconds
    if (!unit_text.empty()) {
        const auto it = std::find_if(units.begin(), units.end(),
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
    text = trim(text);
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
    const std::string unit_text = lowercase(trim(rest));
    static constexpr std::array<unit, 5> units{{
        {"", 1},
        {"b", 1},
        {"kib", 1ull << 10},
        {"mib", 1ull << 20},
        {"gib", 1ull << 30},
    }};
    const auto it = std::find_if(units.begin(), units.end(),
                                 [&](const unit& u) { return u.name == unit_text; });
    if (it == units.end()) {
        static constexpr std::array<std::string_view, 8> decimal{"k", "kb", "m", "mb",
                                                                 "g", "gb", "t", "tb"};
        const std::string shown(trim(rest));
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

}  // namespace
}  // namespace detail

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

namespace {

// Binding to a wildcard takes the port on every address, so it collides with any host.
bool is_wildcard(const std::string& host) {
    return host == "0.0.0.0" || host == "::";
}

class validator {
  public:
    std::vector<config_error> run(const settings& s) {
        check_endpoint("listen", s.listen);
        check_endpoint("admin", s.admin);
        if (s.listen.port != 0 && s.listen.port == s.admin.port &&
            (s.listen.host == s.admin.host || is_wildcard(s.listen.host) ||
             is_wildcard(s.admin.host))) {
            error("admin",
                  "must not use the same address and port as listen (" + to_string(s.listen) + ")");
        }
        check_upstream(s.upstream);
        if (s.threads > 256) {
            error("threads",
                  "must be at most 256 (0 means one per core), got " + std::to_string(s.threads));
        }

        check_positive("timeouts.request_header", s.timeout.request_header);
        check_positive("timeouts.client_idle", s.timeout.client_idle);
        check_positive("timeouts.upstream_connect", s.timeout.upstream_connect);
        check_positive("timeouts.upstream_idle", s.timeout.upstream_idle);
        check_positive("timeouts.client_write", s.timeout.client_write);
        check_positive("timeouts.drain", s.timeout.drain);

        check_positive("limits.max_request_body_bytes", s.limit.max_request_body_bytes);
        check_positive("limits.max_request_header_bytes", s.limit.max_request_header_bytes);
        check_positive("limits.max_sse_event_bytes", s.limit.max_sse_event_bytes);
        check_positive("limits.max_buffered_response_bytes", s.limit.max_buffered_response_bytes);
        if (s.limit.max_json_depth < 8 || s.limit.max_json_depth > 100'000) {
            error("limits.max_json_depth",
                  "must be from 8 to 100000, got " + std::to_string(s.limit.max_json_depth));
        }

        if (s.pool.max_connections < 1) {
            error("upstream_pool.max_connections", "must be at least 1");
        }
        if (s.pool.max_idle_connections > s.pool.max_connections) {
            error("upstream_pool.max_idle_connections",
                  "must not exceed upstream_pool.max_connections (" +
                      std::to_string(s.pool.max_connections) + "), got " +
                      std::to_string(s.pool.max_idle_connections));
        }
        check_positive("upstream_pool.idle_keepalive", s.pool.idle_keepalive);
        check_positive("upstream_pool.acquire_timeout", s.pool.acquire_timeout);
        check_positive("readiness.probe_interval", s.ready.probe_interval);
        check_routes(s.routes);

        check_models(s.metric);
        const histogram_buckets& b = s.metric.buckets;
        check_buckets("metrics.buckets.time_to_first_token", b.time_to_first_token);
        check_buckets("metrics.buckets.inter_token_latency", b.inter_token_latency);
        check_buckets("metrics.buckets.time_per_output_token", b.time_per_output_token);
        check_buckets("metrics.buckets.output_tokens_per_second", b.output_tokens_per_second);
        check_buckets("metrics.buckets.decode_tokens_per_second", b.decode_tokens_per_second);
        check_buckets("metrics.buckets.request_duration", b.request_duration);

        check_one_of("log.level", s.log.level, {"trace", "debug", "info", "warn", "error", "off"});
        check_one_of("log.format", s.log.format, {"text", "json"});
        check_billing(s.tenant, s.usage_records);
        check_one_of("count_input_tokens", s.tokens.count_input_tokens,
                     {"when_unreported", "always", "never"});
        if (s.tokens.reference_tokenizer.empty()) {
            error("reference_tokenizer",
                  "must name a tokenizer (o200k_base, cl100k_base, a path) or be \"none\"");
        }
        auto check_special = [&](const std::string& key, const std::string& value) {
            if (!value.empty() && value != "match" && value != "text") {
                error(key, "must be match or text (leave it out for the file type's default), got '" +
                               value + "'");
            }
        };
        check_special("reference_special_tokens", s.tokens.reference_special_tokens);
        for (const auto& [name, m] : s.tokens.models) {
            check_special("models." + name + ".special_tokens", m.special_tokens);
            if (m.tokenizer.empty()) {
                error("models." + name + ".tokenizer",
                      "must name a tokenizer (o200k_base, cl100k_base or a path to "
                      "tokenizer.json)");
            }
        }
        check_prompt_classes(s.metric.prompt_classes);
        check_slo(s);
        return std::move(errors_);
    }

  private:
    void error(std::string key, std::string message) {
        errors_.push_back(config_error{std::move(key), std::move(message)});
    }

    void check_endpoint(const std::string& key, const endpoint& e) {
        if (e.host.empty()) {
            error(key, "the host must not be empty (0.0.0.0 listens on every interface)");
        }
    }

    void check_upstream(const upstream_target& u) {
        if (u.scheme != "http") {
            error("upstream", "only http:// upstreams are supported in this version");
        }
        if (u.host.empty()) {
            error("upstream", "the host must not be empty");
        }
        if (u.port == 0) {
            error("upstream", "the port must be between 1 and 65535");
        }
        if (!u.base_path.empty() && (u.base_path.front() != '/' || u.base_path.back() == '/')) {
            error("upstream", "the base path must start with '/' and not end with one, got " +
                                  detail::quote(u.base_path));
        }
    }

    void check_positive(const std::string& key, milliseconds d) {
        if (d <= milliseconds::zero()) {
            error(key, "must be greater than 0");
        }
    }

    void check_positive(const std::string& key, std::uint64_t bytes) {
        if (bytes == 0) {
            error(key, "must be at least 1 byte");
        }
    }

    void check_models(const metrics& m) {
        if (m.max_models < 1) {
            error("metrics.models.max_models", "must be at least 1");
        }
        std::set<std::string_view> seen;
        for (std::size_t i = 0; i < m.model_allowlist.size(); ++i) {
            const std::string key = "metrics.models.allowlist[" + std::to_string(i) + "]";
            const std::string& name = m.model_allowlist[i];
            if (name.empty()) {
                error(key, "a model name must not be empty");
            } else if (!seen.insert(name).second) {
                error(key, "duplicate model name " + detail::quote(name));
            }
        }
    }

    void check_routes(const std::vector<route>& routes) {
        for (std::size_t i = 0; i < routes.size(); ++i) {
            const std::string key = "routes[" + std::to_string(i) + "]";
            const route& r = routes[i];
            if (r.path.empty() || r.path.front() != '/') {
                error(key + ".path", "must start with '/', got " + detail::quote(r.path));
            } else if (r.path.find('*') != std::string::npos &&
                       r.path.find('*') + 1 != r.path.size()) {
                error(key + ".path",
                      "'*' may only end a path prefix, got " + detail::quote(r.path));
            }
            if (!protocol::api_from_name(r.api)) {
                error(key + ".api", "unknown api " + detail::quote(r.api) +
                                        " (expected openai_chat, openai_completions, "
                                        "openai_responses, anthropic_messages, tgi_generate, "
                                        "llamacpp_completion, ollama_chat, ollama_generate, "
                                        "gemini_generate or none)");
            }
        }
    }

    void check_buckets(const std::string& key, const std::vector<double>& bounds) {
        if (bounds.empty()) {
            error(key, "must list at least one boundary");
            return;
        }
        for (std::size_t i = 0; i < bounds.size(); ++i) {
            const std::string item = key + "[" + std::to_string(i) + "]";
            const double v = bounds[i];
            if (!std::isfinite(v)) {
                // Prometheus adds the +Inf bucket itself.
                error(item, "must be a finite number");
            } else if (v <= 0) {
                error(item, "must be greater than 0, got " + detail::format_number(v));
            } else if (i > 0 && std::isfinite(bounds[i - 1]) && v <= bounds[i - 1]) {
                error(item, "must be greater than the boundary before it (" +
                                detail::format_number(bounds[i - 1]) + "), got " +
                                detail::format_number(v));
            }
        }
    }

    void check_prompt_classes(const std::vector<std::uint64_t>& bounds) {
        const std::string key = "metrics.prompt_classes";
        // Each class is one more TTFT histogram per model and API: keep the label bounded.
        constexpr std::size_t max_classes = 15;
        if (bounds.empty()) {
            error(key, "must list at least one boundary (input tokens)");
        } else if (bounds.size() > max_classes) {
            error(key, "at most " + std::to_string(max_classes) + " boundaries, got " +
                           std::to_string(bounds.size()));
        }
        for (std::size_t i = 0; i < bounds.size(); ++i) {
            const std::string item = key + "[" + std::to_string(i) + "]";
            if (bounds[i] == 0) {
                error(item, "must be greater than 0");
            } else if (i > 0 && bounds[i] <= bounds[i - 1]) {
                error(item, "must be greater than the boundary before it (" +
                                std::to_string(bounds[i - 1]) + "), got " +
                                std::to_string(bounds[i]));
            }
        }
    }

    void check_objective(const std::string& key, double v) {
        if (!(v > 0.0 && v < 1.0)) {
            error(key, "must be between 0% and 100% (exclusive), got " +
                           detail::format_number(v * 100) + "%");
        }
    }

    void check_slo(const settings& s) {
        check_objective("slo.objective", s.slo.objective);
        const histogram_buckets defaults = default_buckets();
        const histogram_buckets& b = s.metric.buckets;
        const auto must_be_boundary =
            [&](const std::string& key, milliseconds target, const std::vector<double>& bounds,
                const std::vector<double>& default_bounds, const std::string& list) {
                const double v = static_cast<double>(target.count()) / 1000.0;
                if (bounds != default_bounds &&
                    std::find(bounds.begin(), bounds.end(), v) == bounds.end()) {
                    error(key,
                          "the target " + detail::format_number(v) +
                              " s is not a boundary of metrics.buckets." + list +
                              "; add it, so that quantiles and the SLO counts agree at the target");
                }
            };
        for (const auto& [key, target] : slo_entries(s.slo)) {
            if (!target->ttft && !target->tpot) {
                error(key, "set a preset (server, interactive) or a target (ttft, tpot)");
            }
            if (target->ttft) {
                check_positive(key + ".ttft", *target->ttft);
                must_be_boundary(key + ".ttft", *target->ttft, b.time_to_first_token,
                                 defaults.time_to_first_token, "time_to_first_token");
            }
            if (target->tpot) {
                check_positive(key + ".tpot", *target->tpot);
                must_be_boundary(key + ".tpot", *target->tpot, b.time_per_output_token,
                                 defaults.time_per_output_token, "time_per_output_token");
                must_be_boundary(key + ".tpot", *target->tpot, b.inter_token_latency,
                                 defaults.inter_token_latency, "inter_token_latency");
            }
            if (target->objective) {
                check_objective(key + ".objective", *target->objective);
            }
        }
        const auto& allow = s.metric.model_allowlist;
        for (const auto& [name, target] : s.slo.models) {
            if (name.empty()) {
                error("slo.models", "a model name must not be empty");
            } else if (!allow.empty() &&
                       std::find(allow.begin(), allow.end(), name) == allow.end()) {
                error("slo.models." + name,
                      "is not in metrics.models.allowlist, so its requests would be labelled "
                      "\"other\"; add it there");
            }
        }
        if (allow.empty() && s.slo.models.size() > s.metric.max_models) {
            error("slo.models", "has " + std::to_string(s.slo.models.size()) +
                                    " models, more than metrics.models.max_models (" +
                                    std::to_string(s.metric.max_models) + ")");
        }
    }

    void check_one_of(const std::string& key, const std::string& value,
                      std::initializer_list<std::string_view> allowed) {
        if (std::find(allowed.begin(), allowed.end(), value) != allowed.end()) {
            return;
        }
        std::string list;
        for (const std::string_view a : allowed) {
            list += (list.empty() ? "" : ", ") + std::string(a);
        }
        error(key, "must be one of " + list + ", got " + detail::quote(value));
    }

    void check_billing(const tenants& t, const usage& u) {
        check_one_of("tenants.source", t.source, {"none", "header", "api_key"});
        if (t.source == "header" && t.header.empty()) {
            error("tenants.header", "must name the header that carries the tenant");
        }
        if (t.source == "api_key" && t.api_key_secret_env.empty() &&
            t.api_key_secret_file.empty()) {
            error("tenants.api_key_secret_env",
                  "source api_key needs a secret: set api_key_secret_env or api_key_secret_file");
        }
        if (!t.api_key_secret_env.empty() && !t.api_key_secret_file.empty()) {
            error("tenants.api_key_secret_file",
                  "set either api_key_secret_env or api_key_secret_file, not both");
        }
        if (t.max_tenants < 1) {
            error("tenants.max_tenants", "must be at least 1");
        }
        for (const auto& [name, limit] : t.limits) {
            const double rate = limit.provisioned_tokens_per_second;
            if (!std::isfinite(rate) || rate < 0) {
                error("tenants.limits." + name + ".provisioned_tokens_per_second",
                      "must be a finite number >= 0, got " + detail::format_number(rate));
            }
        }
        check_positive("tenants.provisioned_burst", t.provisioned_burst);
        check_positive("usage.fsync_interval", u.fsync_interval);
        check_positive("usage.checkpoint_interval", u.checkpoint_interval);
        if (u.segment_bytes < 4096) {
            error("usage.segment_bytes", "must be at least 4KiB");
        }
        check_positive("usage.max_pending_bytes", u.max_pending_bytes);
        if (!u.sink.url.empty()) {
            if (u.spool_dir.empty()) {
                error("usage.sink.url",
                      "shipping needs usage.spool_dir (records ship from the spool)");
            }
            if (!parse_upstream(u.sink.url) || parse_upstream(u.sink.url)->scheme != "http") {
                error("usage.sink.url",
                      "expected http://host:port/path, got " + detail::quote(u.sink.url));
            }
        }
        if (u.sink.batch_size < 1 || u.sink.batch_size > 10'000) {
            error("usage.sink.batch_size", "must be between 1 and 10000");
        }
        check_positive("usage.sink.backoff_initial", u.sink.backoff_initial);
        check_positive("usage.sink.request_timeout", u.sink.request_timeout);
        if (u.sink.backoff_max < u.sink.backoff_initial) {
            error("usage.sink.backoff_max", "must not be shorter than usage.sink.backoff_initial");
        }
    }

    std::vector<config_error> errors_;
};

}  // namespace

std::vector<config_error> validate(const settings& s) {
    return validator{}.run(s);
}

namespace {

std::string join_key(const std::string& prefix, std::string_view name) {
    return prefix.empty() ? std::string(name) : prefix + "." + std::string(name);
}

std::string index_key(const std::string& key, std::size_t i) {
    return key + "[" + std::to_string(i) + "]";
}

// What the user wrote, short enough to quote in one line of an error.
std::string describe(const YAML::Node& node) {
    if (!node.IsDefined() || node.IsNull()) {
        return "an empty value";
    }
    if (node.IsScalar()) {
        return detail::quote(node.Scalar());
    }
    YAML::Emitter out;
    out.SetSeqFormat(YAML::Flow);
    out.SetMapFormat(YAML::Flow);
    out << node;
    std::string text = out.good() ? out.c_str() : "a structure";
    constexpr std::size_t max_shown = 60;
    if (text.size() > max_shown) {
        text = text.substr(0, max_shown - 3) + "...";
    }
    return text;
}

// Optimal string alignment distance, ignoring case: Levenshtein plus adjacent transpositions,
// which together cover the usual typos.
std::size_t edit_distance(std::string_view a, std::string_view b) {
    const std::string la = detail::lowercase(a);
    const std::string lb = detail::lowercase(b);
    const std::size_t n = la.size();
    const std::size_t m = lb.size();
    std::vector<std::vector<std::size_t>> d(n + 1, std::vector<std::size_t>(m + 1));
    for (std::size_t i = 0; i <= n; ++i) {
        d[i][0] = i;
    }
    for (std::size_t j = 0; j <= m; ++j) {
        d[0][j] = j;
    }
    for (std::size_t i = 1; i <= n; ++i) {
        for (std::size_t j = 1; j <= m; ++j) {
            const std::size_t cost = la[i - 1] == lb[j - 1] ? 0 : 1;
            d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost});
            if (i > 1 && j > 1 && la[i - 1] == lb[j - 2] && la[i - 2] == lb[j - 1]) {
                d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
            }
        }
    }
    return d[n][m];
}

std::string unknown_key_message(std::string_view name, const std::vector<std::string_view>& known) {
    std::string_view best;
    std::size_t best_distance = std::numeric_limits<std::size_t>::max();
    for (const std::string_view k : known) {
        const std::size_t dist = edit_distance(name, k);
        if (dist < best_distance) {
            best = k;
            best_distance = dist;
        }
    }
    // A third of the length keeps "tread" -> "threads" while not offering "log" for "foo".
    const std::size_t tolerance = std::max<std::size_t>(1, best.size() / 3);
    if (!best.empty() && best_distance <= tolerance) {
        return "unknown key (did you mean " + detail::quote(best) + "?)";
    }
    std::string list;
    for (const std::string_view k : known) {
        list += (list.empty() ? "" : ", ") + std::string(k);
    }
    return "unknown key (expected one of: " + list + ")";
}

class yaml_loader {
  public:
    explicit yaml_loader(std::vector<config_error>& errors) : errors_(errors) {}

    void load(const YAML::Node& root, settings& s) {
        read_mapping(root, "",
                     {
                         {"listen", into(&yaml_loader::read_endpoint, s.listen)},
                         {"admin", into(&yaml_loader::read_endpoint, s.admin)},
                         {"upstream", into(&yaml_loader::read_upstream, s.upstream)},
                         {"threads", into(&yaml_loader::read_count, s.threads)},
                         {"preserve_host", into(&yaml_loader::read_bool, s.preserve_host)},
                         {"timeouts", into(&yaml_loader::read_timeouts, s.timeout)},
                         {"limits", into(&yaml_loader::read_limits, s.limit)},
                         {"upstream_pool", into(&yaml_loader::read_pool, s.pool)},
                         {"readiness", into(&yaml_loader::read_readiness, s.ready)},
                         {"metrics", into(&yaml_loader::read_metrics, s.metric)},
                         {"log", into(&yaml_loader::read_log, s.log)},
                         {"tenants", into(&yaml_loader::read_tenants, s.tenant)},
                         {"usage", into(&yaml_loader::read_usage, s.usage_records)},
                         {"reference_tokenizer", into(&yaml_loader::read_reference, s.tokens)},
                         {"tokenizer_dir", into(&yaml_loader::read_text, s.tokens.tokenizer_dir)},
                         {"reference_special_tokens",
                          into(&yaml_loader::read_word, s.tokens.reference_special_tokens)},
                         {"count_input_tokens",
                          into(&yaml_loader::read_word, s.tokens.count_input_tokens)},
                         {"models", into(&yaml_loader::read_model_table, s.tokens.models)},
                         {"slo", into(&yaml_loader::read_slo, s.slo)},
                         {"usage_injection", into(&yaml_loader::read_bool, s.usage_injection)},
                         {"routes", into(&yaml_loader::read_routes, s.routes)},
                     });
    }

  private:
    using node_ref = const YAML::Node&;
    using key_ref = const std::string&;
    using reader = std::function<void(node_ref, key_ref)>;

    struct field {
        std::string_view name;
        reader read;
    };

    // Every reader has the shape read_x(node, key, out); this binds one to its destination.
    template <typename T>
    reader into(void (yaml_loader::*read)(node_ref, key_ref, T&), T& out) {
        return [this, read, &out](node_ref node, key_ref key) { (this->*read)(node, key, out); };
    }

    void error(std::string key, std::string message) {
        errors_.push_back(config_error{std::move(key), std::move(message)});
    }

    void read_mapping(node_ref node, key_ref key, std::initializer_list<field> fields) {
        // "timeouts:" with every child commented out is an empty section, not a mistake.
        if (node.IsNull()) {
            return;
        }
        if (!node.IsMap()) {
            error(key, "expected a mapping of keys, got " + describe(node));
            return;
        }
        std::vector<std::string_view> known;
        for (const field& f : fields) {
            known.push_back(f.name);
        }
        // yaml-cpp keeps both entries of a repeated key; silently taking one would hide a mistake.
        std::set<std::string> seen;
        for (const auto& entry : node) {
            if (!entry.first.IsScalar()) {
                error(key, "keys must be plain names, got " + describe(entry.first));
                continue;
            }
            const std::string& name = entry.first.Scalar();
            const std::string child = join_key(key, name);
            if (!seen.insert(name).second) {
                error(child, "duplicate key");
                continue;
            }
            const auto it = std::find_if(fields.begin(), fields.end(),
                                         [&](const field& f) { return f.name == name; });
            if (it == fields.end()) {
                error(child, unknown_key_message(name, known));
                continue;
            }
            it->read(entry.second, child);
        }
    }

    // The scalar's text, or an error saying what was expected instead.
    std::optional<std::string> scalar(node_ref node, key_ref key, std::string_view expected) {
        if (!node.IsScalar()) {
            error(key, "expected " + std::string(expected) + ", got " + describe(node));
            return std::nullopt;
        }
        return node.Scalar();
    }

    template <typename T, typename Parse>
    void read_parsed(node_ref node, key_ref key, std::string_view expected, Parse parse, T& out) {
        const auto text = scalar(node, key, expected);
        if (!text) {
            return;
        }
        auto result = parse(*text);
        if (!result.value) {
            error(key, "expected " + std::string(expected) + ", got " + detail::quote(*text) +
                           " (" + result.why + ")");
            return;
        }
        out = std::move(*result.value);
    }

    void read_endpoint(node_ref node, key_ref key, endpoint& out) {
        read_parsed(node, key, "\"host:port\"", detail::parse_endpoint_detailed, out);
    }

    void read_upstream(node_ref node, key_ref key, upstream_target& out) {
        read_parsed(node, key, "a URL like http://host:port", detail::parse_upstream_detailed, out);
    }

    void read_duration(node_ref node, key_ref key, milliseconds& out) {
        read_parsed(node, key, "a duration like 30s", detail::parse_duration_detailed, out);
    }

    void read_size(node_ref node, key_ref key, std::uint64_t& out) {
        read_parsed(node, key, "a size like 65536 or 64KiB", detail::parse_size_detailed, out);
    }

    void read_count(node_ref node, key_ref key, std::uint32_t& out) {
        read_parsed(node, key, "a whole number", parse_count, out);
    }

    static detail::parsed<std::uint32_t> parse_count(std::string_view text) {
        text = detail::trim(text);
        if (!text.empty() && text.front() == '-') {
            return detail::failure<std::uint32_t>("cannot be negative");
        }
        if (text.empty() || detail::count_digits(text) != text.size()) {
            return detail::failure<std::uint32_t>("not a whole number");
        }
        const auto v = detail::digits_value(text);
        if (!v || *v > std::numeric_limits<std::uint32_t>::max()) {
            return detail::failure<std::uint32_t>("too large");
        }
        return detail::success(static_cast<std::uint32_t>(*v));
    }

    void read_bool(node_ref node, key_ref key, bool& out) {
        read_parsed(node, key, "true or false", parse_bool, out);
    }

    // YAML 1.1 spellings too, because yaml-cpp users have long written yes/no/on/off.
    static detail::parsed<bool> parse_bool(std::string_view text) {
        const std::string t = detail::lowercase(detail::trim(text));
        if (t == "true" || t == "yes" || t == "on") {
            return detail::success(true);
        }
        if (t == "false" || t == "no" || t == "off") {
            return detail::success(false);
        }
        return detail::failure<bool>("not a boolean");
    }

    // Validity against the allowed set is validate()'s job; case is forgiven here.
    void read_word(node_ref node, key_ref key, std::string& out) {
        if (const auto text = scalar(node, key, "a word")) {
            out = detail::lowercase(detail::trim(*text));
        }
    }

    void read_text(node_ref node, key_ref key, std::string& out) {
        if (const auto text = scalar(node, key, "a string")) {
            out = std::string(detail::trim(*text));
        }
    }

    void read_reference(node_ref node, key_ref key, tokenization& t) {
        if (const auto text = scalar(node, key, "a tokenizer name or a path to tokenizer.json")) {
            t.reference_tokenizer = std::string(detail::trim(*text));
            t.reference_explicit = true;
        }
    }

    // models: { "<model name>": { tokenizer: ... } }: the keys are names, not a fixed set.
    void read_model_table(node_ref node, key_ref key, std::map<std::string, model_settings>& out) {
        if (node.IsNull()) {
            return;
        }
        if (!node.IsMap()) {
            error(key, "expected a mapping of model names to settings, got " + describe(node));
            return;
        }
        for (const auto& entry : node) {
            if (!entry.first.IsScalar() || entry.first.Scalar().empty()) {
                error(key, "model names must be non-empty strings, got " + describe(entry.first));
                continue;
            }
            const std::string& name = entry.first.Scalar();
            const std::string child = join_key(key, name);
            if (out.contains(name)) {
                error(child, "duplicate model");
                continue;
            }
            model_settings& m = out[name];
            read_mapping(entry.second, child,
                         {
                             {"tokenizer", into(&yaml_loader::read_text, m.tokenizer)},
                             {"special_tokens", into(&yaml_loader::read_word, m.special_tokens)},
                         });
        }
    }

    void read_timeouts(node_ref node, key_ref key, timeouts& t) {
        read_mapping(
            node, key,
            {
                {"request_header", into(&yaml_loader::read_duration, t.request_header)},
                {"client_idle", into(&yaml_loader::read_duration, t.client_idle)},
                {"upstream_connect", into(&yaml_loader::read_duration, t.upstream_connect)},
                {"upstream_idle", into(&yaml_loader::read_duration, t.upstream_idle)},
                {"client_write", into(&yaml_loader::read_duration, t.client_write)},
                {"drain", into(&yaml_loader::read_duration, t.drain)},
            });
    }

    void read_limits(node_ref node, key_ref key, limits& l) {
        read_mapping(
            node, key,
            {
                {"max_request_body_bytes", into(&yaml_loader::read_size, l.max_request_body_bytes)},
                {"max_request_header_bytes",
                 into(&yaml_loader::read_size, l.max_request_header_bytes)},
                {"max_sse_event_bytes", into(&yaml_loader::read_size, l.max_sse_event_bytes)},
                {"max_buffered_response_bytes",
                 into(&yaml_loader::read_size, l.max_buffered_response_bytes)},
                {"max_json_depth", into(&yaml_loader::read_count, l.max_json_depth)},
                {"max_client_connections",
                 into(&yaml_loader::read_count, l.max_client_connections)},
            });
    }

    void read_pool(node_ref node, key_ref key, upstream_pool& p) {
        read_mapping(
            node, key,
            {
                {"max_connections", into(&yaml_loader::read_count, p.max_connections)},
                {"max_idle_connections", into(&yaml_loader::read_count, p.max_idle_connections)},
                {"idle_keepalive", into(&yaml_loader::read_duration, p.idle_keepalive)},
                {"acquire_timeout", into(&yaml_loader::read_duration, p.acquire_timeout)},
            });
    }

    void read_readiness(node_ref node, key_ref key, readiness& r) {
        read_mapping(node, key,
                     {
                         {"probe_interval", into(&yaml_loader::read_duration, r.probe_interval)},
                     });
    }

    void read_metrics(node_ref node, key_ref key, metrics& m) {
        read_mapping(
            node, key,
            {
                {"models", into(&yaml_loader::read_models, m)},
                {"buckets", into(&yaml_loader::read_buckets, m.buckets)},
                {"prompt_classes", into(&yaml_loader::read_token_counts, m.prompt_classes)},
                {"native_histograms", into(&yaml_loader::read_bool, m.native_histograms)},
            });
    }

    void read_models(node_ref node, key_ref key, metrics& m) {
        read_mapping(node, key,
                     {
                         {"allowlist", into(&yaml_loader::read_names, m.model_allowlist)},
                         {"max_models", into(&yaml_loader::read_count, m.max_models)},
                     });
    }

    void read_buckets(node_ref node, key_ref key, histogram_buckets& b) {
        read_mapping(
            node, key,
            {
                {"time_to_first_token", into(&yaml_loader::read_bounds, b.time_to_first_token)},
                {"inter_token_latency", into(&yaml_loader::read_bounds, b.inter_token_latency)},
                {"time_per_output_token", into(&yaml_loader::read_bounds, b.time_per_output_token)},
                {"output_tokens_per_second",
                 into(&yaml_loader::read_bounds, b.output_tokens_per_second)},
                {"decode_tokens_per_second",
                 into(&yaml_loader::read_bounds, b.decode_tokens_per_second)},
                {"request_duration", into(&yaml_loader::read_bounds, b.request_duration)},
            });
    }

    void read_log(node_ref node, key_ref key, logging& l) {
        read_mapping(node, key,
                     {
                         {"level", into(&yaml_loader::read_word, l.level)},
                         {"format", into(&yaml_loader::read_word, l.format)},
                         {"access_log", into(&yaml_loader::read_bool, l.access_log)},
                     });
    }

    void read_routes(node_ref node, key_ref key, std::vector<route>& out) {
        if (node.IsNull()) {
            out.clear();
            return;
        }
        if (!node.IsSequence()) {
            error(key, "expected a list of routes (path, api), got " + describe(node));
            return;
        }
        std::vector<route> routes(node.size());
        for (std::size_t i = 0; i < node.size(); ++i) {
            route& r = routes[i];
            read_mapping(
                node[i], index_key(key, i),
                {
                    {"path", into(&yaml_loader::read_text, r.path)},
                    {"api", into(&yaml_loader::read_word, r.api)},
                    {"usage_injection", into(&yaml_loader::read_optional_bool, r.usage_injection)},
                    {"continuous_usage_stats",
                     into(&yaml_loader::read_bool, r.continuous_usage_stats)},
                });
        }
        out = std::move(routes);
    }

    void read_optional_bool(node_ref node, key_ref key, std::optional<bool>& out) {
        bool value = false;
        const std::size_t before = errors_.size();
        read_bool(node, key, value);
        if (errors_.size() == before) {
            out = value;
        }
    }

    // An empty "allowlist:" means no allowlist, the same as leaving the key out.
    void read_names(node_ref node, key_ref key, std::vector<std::string>& out) {
        if (node.IsNull()) {
            out.clear();
            return;
        }
        if (!node.IsSequence()) {
            error(key, "expected a list of model names, got " + describe(node));
            return;
        }
        std::vector<std::string> names;
        bool ok = true;
        for (std::size_t i = 0; i < node.size(); ++i) {
            if (const auto text = scalar(node[i], index_key(key, i), "a model name")) {
                names.push_back(*text);
            } else {
                ok = false;
            }
        }
        if (ok) {
            out = std::move(names);
        }
    }

    // A list with a bad element keeps its defaults, so validate() does not pile on more errors.
    void read_bounds(node_ref node, key_ref key, std::vector<double>& out) {
        if (!node.IsSequence()) {
            error(key,
                  "expected a list of bucket boundaries like [0.1, 0.5, 1], got " + describe(node));
            return;
        }
        std::vector<double> bounds;
        bool ok = true;
        for (std::size_t i = 0; i < node.size(); ++i) {
            const std::string item = index_key(key, i);
            const auto text = scalar(node[i], item, "a number");
            if (!text) {
                ok = false;
                continue;
            }
            const std::string_view t = detail::trim(*text);
            double v = 0;
            const auto [ptr, ec] = std::from_chars(t.data(), t.data() + t.size(), v);
            if (t.empty() || ec != std::errc{} || ptr != t.data() + t.size()) {
                error(item, "expected a number, got " + detail::quote(*text));
                ok = false;
                continue;
            }
            bounds.push_back(v);
        }
        if (ok) {
            out = std::move(bounds);
        }
    }

    // ---- tenants and usage (billing) ----

    void read_string(node_ref node, key_ref key, std::string& out) {
        if (node.IsNull()) {
            out.clear();
            return;
        }
        if (const auto text = scalar(node, key, "a string")) {
            out = *text;
        }
    }

    void read_strings(node_ref node, key_ref key, std::vector<std::string>& out) {
        if (node.IsNull()) {
            out.clear();
            return;
        }
        if (!node.IsSequence()) {
            error(key, "expected a list of names, got " + describe(node));
            return;
        }
        std::vector<std::string> names;
        for (std::size_t i = 0; i < node.size(); ++i) {
            if (const auto text = scalar(node[i], index_key(key, i), "a name")) {
                names.push_back(*text);
            }
        }
        out = std::move(names);
    }

    void read_string_map(node_ref node, key_ref key, std::map<std::string, std::string>& out) {
        if (node.IsNull()) {
            out.clear();
            return;
        }
        if (!node.IsMap()) {
            error(key, "expected a mapping of names, got " + describe(node));
            return;
        }
        for (const auto& entry : node) {
            if (!entry.first.IsScalar()) {
                error(key, "keys must be plain names, got " + describe(entry.first));
                continue;
            }
            const std::string child = join_key(key, entry.first.Scalar());
            if (const auto text = scalar(entry.second, child, "a tenant name")) {
                out[entry.first.Scalar()] = *text;
            }
        }
    }

    void read_rate(node_ref node, key_ref key, double& out) {
        const auto text = scalar(node, key, "a number");
        if (!text) {
            return;
        }
        const std::string_view t = detail::trim(*text);
        double v = 0;
        const auto [ptr, ec] = std::from_chars(t.data(), t.data() + t.size(), v);
        if (t.empty() || ec != std::errc{} || ptr != t.data() + t.size()) {
            error(key, "expected a number, got " + detail::quote(*text));
            return;
        }
        out = v;
    }

    void read_tenant_limits(node_ref node, key_ref key, std::map<std::string, tenant_limit>& out) {
        if (node.IsNull()) {
            out.clear();
            return;
        }
        if (!node.IsMap()) {
            error(key, "expected a mapping of tenant names to limits, got " + describe(node));
            return;
        }
        for (const auto& entry : node) {
            if (!entry.first.IsScalar()) {
                error(key, "keys must be plain tenant names, got " + describe(entry.first));
                continue;
            }
            tenant_limit limit;
            read_mapping(entry.second, join_key(key, entry.first.Scalar()),
                         {
                             {"provisioned_tokens_per_second",
                              into(&yaml_loader::read_rate, limit.provisioned_tokens_per_second)},
                         });
            out[entry.first.Scalar()] = limit;
        }
    }

    void read_tenants(node_ref node, key_ref key, tenants& t) {
        read_mapping(
            node, key,
            {
                {"source", into(&yaml_loader::read_word, t.source)},
                {"header", into(&yaml_loader::read_string, t.header)},
                {"api_key_secret_env", into(&yaml_loader::read_string, t.api_key_secret_env)},
                {"api_key_secret_file", into(&yaml_loader::read_string, t.api_key_secret_file)},
                {"api_key_names", into(&yaml_loader::read_string_map, t.api_key_names)},
                {"metrics_allowlist", into(&yaml_loader::read_strings, t.metrics_allowlist)},
                {"max_tenants", into(&yaml_loader::read_count, t.max_tenants)},
                {"limits", into(&yaml_loader::read_tenant_limits, t.limits)},
                {"enforce_provisioned", into(&yaml_loader::read_bool, t.enforce_provisioned)},
                {"provisioned_burst", into(&yaml_loader::read_duration, t.provisioned_burst)},
            });
    }

    void read_sink(node_ref node, key_ref key, usage_sink& k) {
        read_mapping(node, key,
                     {
                         {"url", into(&yaml_loader::read_string, k.url)},
                         {"batch_size", into(&yaml_loader::read_count, k.batch_size)},
                         {"backoff_initial", into(&yaml_loader::read_duration, k.backoff_initial)},
                         {"backoff_max", into(&yaml_loader::read_duration, k.backoff_max)},
                         {"request_timeout", into(&yaml_loader::read_duration, k.request_timeout)},
                         {"source", into(&yaml_loader::read_string, k.source)},
                     });
    }

    void read_usage(node_ref node, key_ref key, usage& u) {
        read_mapping(
            node, key,
            {
                {"spool_dir", into(&yaml_loader::read_string, u.spool_dir)},
                {"fsync_interval", into(&yaml_loader::read_duration, u.fsync_interval)},
                {"segment_bytes", into(&yaml_loader::read_size, u.segment_bytes)},
                {"checkpoint_interval", into(&yaml_loader::read_duration, u.checkpoint_interval)},
                {"hold_until_durable", into(&yaml_loader::read_bool, u.hold_until_durable)},
                {"readyz_fail_on_spool_error",
                 into(&yaml_loader::read_bool, u.readyz_fail_on_spool_error)},
                {"max_pending_bytes", into(&yaml_loader::read_size, u.max_pending_bytes)},
                {"sink", into(&yaml_loader::read_sink, u.sink)},
            });
    }

    // A list of input-token counts; a bad element keeps the defaults (as read_bounds does).
    void read_token_counts(node_ref node, key_ref key, std::vector<std::uint64_t>& out) {
        if (!node.IsSequence()) {
            error(key,
                  "expected a list of input-token counts like [512, 2048], got " + describe(node));
            return;
        }
        std::vector<std::uint64_t> counts;
        const std::size_t errors_before = errors_.size();
        for (std::size_t i = 0; i < node.size(); ++i) {
            std::uint32_t v = 0;
            read_count(node[i], index_key(key, i), v);
            counts.push_back(v);
        }
        if (errors_.size() == errors_before) {
            out = std::move(counts);
        }
    }

    void read_slo(node_ref node, key_ref key, slo_settings& s) {
        read_mapping(node, key,
                     {
                         {"objective", into(&yaml_loader::read_objective, s.objective)},
                         {"default",
                          [this, &s](node_ref n, key_ref k) {
                              slo_target t;
                              read_slo_target(n, k, t);
                              s.default_target = std::move(t);
                          }},
                         {"models", into(&yaml_loader::read_slo_models, s.models)},
                     });
    }

    // A mapping from model name to its entry; model names are free text, so no did-you-mean.
    void read_slo_models(node_ref node, key_ref key, std::map<std::string, slo_target>& out) {
        if (node.IsNull()) {
            return;
        }
        if (!node.IsMap()) {
            error(key, "expected a mapping of model name to its SLO, got " + describe(node));
            return;
        }
        for (const auto& entry : node) {
            if (!entry.first.IsScalar()) {
                error(key, "keys must be model names, got " + describe(entry.first));
                continue;
            }
            const std::string& name = entry.first.Scalar();
            const std::string child = join_key(key, name);
            if (out.contains(name)) {
                error(child, "duplicate model");
                continue;
            }
            slo_target t;
            read_slo_target(entry.second, child, t);
            out.emplace(name, std::move(t));
        }
    }

    // Explicit targets win over the preset's, whatever order the keys are written in.
    void read_slo_target(node_ref node, key_ref key, slo_target& out) {
        std::string preset;
        std::optional<milliseconds> ttft;
        std::optional<milliseconds> tpot;
        read_mapping(node, key,
                     {
                         {"preset", into(&yaml_loader::read_word, preset)},
                         {"ttft", into(&yaml_loader::read_optional_duration, ttft)},
                         {"tpot", into(&yaml_loader::read_optional_duration, tpot)},
                         {"objective",
                          [this, &out](node_ref n, key_ref k) {
                              double v = 0;
                              const std::size_t errors_before = errors_.size();
                              read_objective(n, k, v);
                              if (errors_.size() == errors_before) {
                                  out.objective = v;
                              }
                          }},
                     });
        if (!preset.empty()) {
            if (const auto p = slo_preset(preset)) {
                out.ttft = p->ttft;
                out.tpot = p->tpot;
                out.preset = preset;
            } else {
                error(join_key(key, "preset"),
                      "must be one of server, interactive, got " + detail::quote(preset));
            }
        }
        if (ttft) {
            out.ttft = ttft;
        }
        if (tpot) {
            out.tpot = tpot;
        }
    }

    void read_optional_duration(node_ref node, key_ref key, std::optional<milliseconds>& out) {
        milliseconds v{0};
        const std::size_t errors_before = errors_.size();
        read_duration(node, key, v);
        if (errors_.size() == errors_before) {
            out = v;
        }
    }

    void read_objective(node_ref node, key_ref key, double& out) {
        read_parsed(node, key, "a percentage like 99%", parse_objective, out);
    }

    // "99%", "99.9%" or a bare percentage; a ratio like 0.99 is refused, not read as 0.99 %.
    static detail::parsed<double> parse_objective(std::string_view text) {
        text = detail::trim(text);
        if (!text.empty() && text.back() == '%') {
            text.remove_suffix(1);
            text = detail::trim(text);
        }
        double v = 0;
        const auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
        if (text.empty() || ec != std::errc{} || ptr != text.data() + text.size() ||
            !std::isfinite(v)) {
            return detail::failure<double>("not a number");
        }
        if (v <= 1.0) {
            return detail::failure<double>("looks like a ratio; write the percentage, e.g. 99%");
        }
        if (v >= 100.0) {
            return detail::failure<double>("must be below 100%");
        }
        // Via whole units of 1e-10 %, so "99.9%" becomes exactly the double nearest 0.999 (a
        // plain v / 100 gives 0.9990000000000001, which would show up in the exported gauge).
        return detail::success(std::round(v * 1e10) / 1e12);
    }

    std::vector<config_error>& errors_;
};

std::string describe_yaml_exception(const YAML::Exception& e) {
    if (e.mark.is_null()) {
        return "invalid YAML: " + e.msg;
    }
    // yaml-cpp counts from 0; editors count from 1.
    return "invalid YAML at line " + std::to_string(e.mark.line + 1) + ", column " +
           std::to_string(e.mark.column + 1) + ": " + e.msg;
}

}  // namespace

load_result load_yaml(const std::string& yaml_text) {
    load_result result{default_settings(), {}};
    try {
        const std::vector<YAML::Node> documents = YAML::LoadAll(yaml_text);
        if (documents.size() > 1) {
            result.errors.push_back(config_error{"", "expected one YAML document, found " +
                                                         std::to_string(documents.size()) +
                                                         " (remove the extra '---')"});
            return result;
        }
        if (!documents.empty()) {
            const YAML::Node& root = documents.front();
            if (!root.IsNull() && !root.IsMap()) {
                result.errors.push_back(config_error{
                    "", "expected a mapping of settings at the top level, got " + describe(root)});
                return result;
            }
            yaml_loader{result.errors}.load(root, result.value);
        }
    } catch (const YAML::Exception& e) {
        // A syntax error means nothing after it was read: report it alone, with its position.
        result.value = default_settings();
        result.errors.assign({config_error{"", describe_yaml_exception(e)}});
        return result;
    } catch (const std::exception& e) {
        result.errors.push_back(config_error{"", std::string("cannot load: ") + e.what()});
        return result;
    }
    std::vector<config_error> semantic = validate(result.value);
    result.errors.insert(result.errors.end(), std::make_move_iterator(semantic.begin()),
                         std::make_move_iterator(semantic.end()));
    return result;
}

load_result load_file(const std::string& path) {
    const auto unreadable = [&](const std::string& why) {
        load_result result{default_settings(), {}};
        result.errors.push_back(config_error{"", "cannot read " + path + ": " + why});
        return result;
    };
    std::error_code ec;
    if (std::filesystem::is_directory(path, ec)) {
        return unreadable("it is a directory");
    }
    std::ifstream in(path, std::ios::binary);
    if (!in) {
        return unreadable(std::generic_category().message(errno));
    }
    std::ostringstream text;
    text << in.rdbuf();
    if (in.bad()) {
        return unreadable(std::generic_category().message(errno));
    }
    return load_yaml(text.str());
}

}  // namespace tokenmeter::config
