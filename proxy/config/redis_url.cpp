// config/redis_url: splits tenants.shared_limits.redis.url: redis://host[:port][/0], or
// rediss:// for TLS (the same default port). No credentials: the password belongs in a file or an
// environment variable (a URL is logged and dumped).
#include <charconv>
#include <string>
#include <string_view>

#include "config/config.hpp"

namespace tokenmeter::config {

redis_endpoint parse_redis_url(const std::string& url, std::string& error) {
    redis_endpoint out;
    error.clear();
    std::string_view rest(url);
    if (rest.starts_with("rediss://")) {
        out.tls = true;
        rest.remove_prefix(9);
    } else if (rest.starts_with("redis://")) {
        rest.remove_prefix(8);
    } else {
        error = "expected redis://host:port or rediss://host:port, got '" + url + "'";
        return out;
    }
    if (rest.find('@') != std::string_view::npos) {
        error =
            "credentials do not belong in the URL: set username, and password_file or "
            "password_env";
        return out;
    }
    if (auto slash = rest.find('/'); slash != std::string_view::npos) {
        const std::string_view db = rest.substr(slash);
        if (db != "/" && db != "/0") {
            error = "only database 0 is supported (Redis Cluster has no other), got '" + url + "'";
            return out;
        }
        rest = rest.substr(0, slash);
    }
    std::string_view host = rest;
    if (rest.starts_with('[')) {
        auto close = rest.find(']');
        if (close == std::string_view::npos) {
            error = "unterminated IPv6 address in '" + url + "'";
            return out;
        }
        host = rest.substr(1, close - 1);
        rest.remove_prefix(close + 1);
        if (!rest.empty() && !rest.starts_with(':')) {
            error = "expected :port after the IPv6 address in '" + url + "'";
            return out;
        }
    } else if (auto colon = rest.rfind(':'); colon != std::string_view::npos) {
        host = rest.substr(0, colon);
        rest.remove_prefix(colon);
    } else {
        rest = {};
    }
    if (host.empty()) {
        error = "the host must not be empty in '" + url + "'";
        return out;
    }
    out.host = std::string(host);
    if (rest.starts_with(':')) {
        rest.remove_prefix(1);
        unsigned port = 0;
        auto [end, ec] = std::from_chars(rest.data(), rest.data() + rest.size(), port);
        if (rest.empty() || ec != std::errc{} || end != rest.data() + rest.size() || port == 0 ||
            port > 65535) {
            error = "the port must be from 1 to 65535 in '" + url + "'";
            return out;
        }
        out.port = static_cast<std::uint16_t>(port);
    }
    return out;
}

}  // namespace tokenmeter::config
