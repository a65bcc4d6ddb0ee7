// loopback_url: parses the http:// and https:// URLs tokenmeter-load is given and refuses any host
// that is not this machine, so a mistyped flag can never aim load at someone else's server.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace tokenmeter::load {

struct loopback_url {
    std::string host_header;  // as written (with the port), for the Host header
    std::string address;      // numeric loopback address to connect to
    std::uint16_t port = 80;  // 443 for https:// without a port
    std::string path;         // "/" when the URL has none
    bool tls = false;         // https://
};

struct url_result {
    std::optional<loopback_url> url;
    std::string error;
};

// Accepts http://HOST[:PORT][/PATH] and https://HOST[:PORT][/PATH] where HOST is an address in
// 127.0.0.0/8, [::1] or localhost.
url_result parse_loopback_url(std::string_view text);

}  // namespace tokenmeter::load
