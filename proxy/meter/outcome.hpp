// meter/outcome: how a request ended, in the two words the relay and the meter share. Apart from
// stream_meter so that the relay's headers name them without reaching the tokenizer.
#pragma once

#include <cstdint>
#include <string_view>

namespace tokenmeter::meter {

enum class outcome : std::uint8_t {
    complete,            // the upstream finished its response
    client_cancel,       // the client went away before the response ended
    upstream_error,      // the upstream could not be reached, timed out, or answered with an error
    upstream_truncated,  // the upstream closed the connection before the response was complete
    rejected,            // the proxy refused the request (malformed, too large) before forwarding
};
std::string_view to_string(outcome o) noexcept;

// How the exchange ended, as the transport saw it.
enum class end_reason : std::uint8_t {
    upstream_complete,
    client_cancel,
    upstream_truncated,
    upstream_failed,  // connect error, idle timeout, reset before a complete response
    rejected,
};

}  // namespace tokenmeter::meter
