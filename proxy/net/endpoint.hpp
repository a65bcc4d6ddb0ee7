// net/endpoint: where an outbound connection goes (the model server, the usage sink), as plain
// data that app/ fills from a URL.
#pragma once

#include <cstdint>
#include <string>

namespace tokenmeter::net {

struct upstream_address {
    std::string scheme = "http";
    std::string host = "127.0.0.1";
    std::uint16_t port = 80;
    std::string base_path;  // "" or "/prefix" (no trailing slash), prepended to every path
};

}  // namespace tokenmeter::net
