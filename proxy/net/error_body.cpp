#include "net/error_body.hpp"

#include <nlohmann/json.hpp>

namespace tokenmeter::net {

std::string error_body(std::string_view code, std::string_view message) {
    nlohmann::json body = {
        {"error", {{"type", "tokenmeter_error"}, {"code", code}, {"message", message}}}};
    return body.dump();
}

}  // namespace tokenmeter::net
