#include "loopback_url.hpp"

#include <algorithm>
#include <boost/asio/ip/address.hpp>
#include <cctype>
#include <charconv>

namespace tokenmeter::load {
namespace {

bool iequals(std::string_view a, std::string_view b) {
    return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
               return std::tolower(static_cast<unsigned char>(x)) ==
                      std::tolower(static_cast<unsigned char>(y));
           });
}

url_result fail(std::string message) {
    return url_result{std::nullopt, std::move(message)};
}

}  // namespace

url_result parse_loopback_url(std::string_view text) {
    auto has_scheme = [text](std::string_view scheme) {
        return text.size() >= scheme.size() && iequals(text.substr(0, scheme.size()), scheme);
    };
    loopback_url url;
    std::string_view rest;
    if (has_scheme("http://")) {
        rest = text.substr(7);
    } else if (has_scheme("https://")) {
        rest = text.substr(8);
        url.tls = true;
        url.port = 443;
    } else {
        return fail("only http:// and https:// URLs are supported: " + std::string(text));
    }
    std::size_t slash = rest.find('/');
    std::string_view authority = rest.substr(0, slash);
    std::string_view path =
        slash == std::string_view::npos ? std::string_view("/") : rest.substr(slash);
    if (authority.find('@') != std::string_view::npos) {
        return fail("credentials in the URL are not supported: " + std::string(text));
    }

    std::string_view host;
    std::string_view port_text;
    if (authority.starts_with('[')) {
        std::size_t close = authority.find(']');
        if (close == std::string_view::npos) {
            return fail("unterminated IPv6 literal: " + std::string(text));
        }
        host = authority.substr(1, close - 1);
        std::string_view after = authority.substr(close + 1);
        if (!after.empty()) {
            if (!after.starts_with(':')) {
                return fail("bad authority: " + std::string(text));
            }
            port_text = after.substr(1);
        }
    } else {
        if (std::count(authority.begin(), authority.end(), ':') > 1) {
            return fail("IPv6 literals need brackets, e.g. http://[::1]:8080: " +
                        std::string(text));
        }
        std::size_t colon = authority.rfind(':');
        host = authority.substr(0, colon);
        if (colon != std::string_view::npos) {
            port_text = authority.substr(colon + 1);
        }
    }
    if (host.empty()) {
        return fail("missing host: " + std::string(text));
    }

    if (!port_text.empty()) {
        unsigned value = 0;
        auto [end, ec] =
            std::from_chars(port_text.data(), port_text.data() + port_text.size(), value);
        if (ec != std::errc() || end != port_text.data() + port_text.size() || value == 0 ||
            value > 65535) {
            return fail("bad port in " + std::string(text));
        }
        url.port = static_cast<std::uint16_t>(value);
    }

    // Names other than localhost are refused rather than resolved: a resolver answer is not a
    // promise that the traffic stays on this machine.
    if (iequals(host, "localhost")) {
        url.address = "127.0.0.1";
    } else {
        boost::system::error_code ec;
        auto address = boost::asio::ip::make_address(std::string(host), ec);
        if (ec) {
            return fail("host must be an address in 127.0.0.0/8, ::1 or localhost: " +
                        std::string(text));
        }
        if (!address.is_loopback()) {
            return fail("refusing non-loopback target " + std::string(host) +
                        " (only 127.0.0.0/8, ::1 and localhost are allowed)");
        }
        url.address = address.to_string();
    }
    url.host_header = std::string(authority);
    url.path = std::string(path);
    return url_result{std::move(url), {}};
}

}  // namespace tokenmeter::load
