// http_get: one blocking GET against a loopback URL, for scraping /metrics.
#pragma once

#include <chrono>
#include <string>

#include "loopback_url.hpp"

namespace tokenmeter::load {

struct http_get_result {
    int status = 0;
    std::string body;
    std::string error;  // empty on transport success (any status)
};

http_get_result http_get(const loopback_url& url, std::chrono::milliseconds timeout);

}  // namespace tokenmeter::load
