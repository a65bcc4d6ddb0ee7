// net/error_body: the JSON body of every answer the proxy gives itself, on any listener.
#pragma once

#include <string>
#include <string_view>

namespace tokenmeter::net {

// {"error":{"type":"tokenmeter_error","code":…,"message":…}}, every value escaped.
[[nodiscard]] std::string error_body(std::string_view code, std::string_view message);

}  // namespace tokenmeter::net
