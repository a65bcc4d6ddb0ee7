// relay/request_target: what the proxy forwards as a request-target (RFC 9112 §3.2), decided
// without sockets: absolute-form becomes origin-form, percent-encoded unreserved characters in
// the path are decoded (RFC 3986 §6.2.2.2, so "%63ompletions" is "completions" for routing,
// metering and the upstream alike), dot segments are removed (RFC 3986 §5.2.4), and a target
// that is neither, or whose ".." would climb above the root (and so out of the upstream's base
// path), is refused with a reason.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <variant>

#include "protocol/routes.hpp"

namespace tokenmeter::relay {

struct target_refusal {
    std::string_view code;  // stable, for the JSON error body
    std::string message;
};

// The origin-form target to forward ("/path?query", or "*" for asterisk-form), or why not.
std::variant<std::string, target_refusal> normalize_target(std::string_view target);

// Removes "." and ".." segments from an absolute path; false when ".." would leave the root,
// unless `clamp_at_root` (then "/../a" is "/a", as RFC 3986 §5.2.4 reads it).
bool remove_dot_segments(std::string_view path, std::string& out, bool clamp_at_root = false);

// `path` with every valid percent escape decoded, as a server that decodes the whole path reads
// it (uvicorn, under vLLM and SGLang: "%2F" becomes a separator); an invalid escape stays as it
// is, as Python's unquote leaves it.
std::string percent_decode_path(std::string_view path);

// A POST whose normalized target's path still carries a percent escape ("%2F", "%3A", a
// non-ASCII byte...) is refused when a server that decodes the whole path would read it, with or
// without its dot segments, as a metered API: servers differ on such a path, and the meter must
// read exactly what the model server serves. nullopt: the target may be forwarded.
std::optional<target_refusal> refuse_escaped_api_path(std::string_view target,
                                                      const protocol::route_table& routes);

}  // namespace tokenmeter::relay
