// protocol/json_limits: how deep a JSON text from the network may nest before the proxy stops
// looking into it. Every walk over request and response JSON is iterative or depth-checked
// against this bound, so no body can exhaust the stack; a text past it is forwarded unchanged and
// only counted as not parsed. Set once at start-up (limits.max_json_depth), read on every parse.
#pragma once

#include <cstddef>
#include <string_view>

namespace tokenmeter::protocol {

inline constexpr std::size_t default_max_json_depth = 256;

void set_max_json_depth(std::size_t depth) noexcept;
[[nodiscard]] std::size_t max_json_depth() noexcept;

// One pass over the bytes, strings skipped: is no array or object nested deeper than
// `max_depth`? Says nothing about validity (the parser decides that).
[[nodiscard]] bool json_depth_within(std::string_view text, std::size_t max_depth) noexcept;

}  // namespace tokenmeter::protocol
