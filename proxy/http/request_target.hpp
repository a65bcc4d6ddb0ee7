// http/request_target: what the proxy forwards as a request-target (RFC 9112 §3.2), decided
// without sockets: absolute-form becomes origin-form, dot segments are removed (RFC 3986
// §5.2.4, "%2e" counted as "."), and a target that is neither, or whose ".." would climb above
// the root (and so out of the upstream's base path), is refused with a reason.
#pragma once

#include <string>
#include <string_view>
#include <variant>

namespace tokenmeter::http {

struct target_refusal {
    std::string_view code;  // stable, for the JSON error body
    std::string message;
};

// The origin-form target to forward ("/path?query", or "*" for asterisk-form), or why not.
std::variant<std::string, target_refusal> normalize_target(std::string_view target);

// Removes "." and ".." segments from an absolute path; false when ".." would leave the root.
bool remove_dot_segments(std::string_view path, std::string& out);

}  // namespace tokenmeter::http
