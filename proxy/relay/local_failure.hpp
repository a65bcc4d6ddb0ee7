// relay/local_failure: every answer the proxy gives itself instead of the upstream's, in one
// enum. Each maps to a status, the JSON error code clients see, whether the connection closes
// after it, and the outcome the metrics record. Upstream failures before any response byte are
// classified here too, with the label of tokenmeter_upstream_errors_total.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>

#include "net/beast_http.hpp"
#include "net/error_body.hpp"
#include "observe/observer.hpp"

namespace tokenmeter::relay {

enum class local_failure : std::uint8_t {
    header_too_large,
    body_too_large,
    bad_request,
    bad_request_body,
    chunk_line_too_long,
    request_timeout,
    trace_with_content,
    bad_target,
    unparsable_body,
    model_required,
    rate_limited,
    too_many_tunnels,
    pool_exhausted,
    upstream_timeout,
    upstream_bad_response,
    upstream_closed,
    upstream_unreachable,
    upstream_tls,
    internal_error,
};

struct failure_answer {
    bhttp::status status;
    std::string_view code;  // the "code" of the JSON error body
    bool close;             // the connection closes after the answer
    observe::outcome result;
};

[[nodiscard]] failure_answer answer_for(local_failure failure) noexcept;

// Where an upstream exchange failed before any response byte reached the client.
enum class upstream_stage : std::uint8_t { connect, write, response_header };
[[nodiscard]] std::string_view to_string(upstream_stage stage) noexcept;

struct upstream_failure {
    std::string_view reason;  // metric label: connect_refused, timeout, bad_response ...
    local_failure failure;
    std::string message;  // for the JSON body
};

// Every label of tokenmeter_upstream_errors_total: what classify_upstream_error gives, and the
// two failures of a response already begun (idle_timeout, truncated). Each series starts at 0.
inline constexpr std::array<std::string_view, 12> upstream_error_reasons{
    "connect_timeout", "timeout",        "pool_exhausted",    "tls",
    "connect_refused", "resolve_failed", "connection_closed", "bad_response",
    "connect_failed",  "io_error",       "idle_timeout",      "truncated"};

// detail: more than the error code says, when known (a TLS certificate verdict).
[[nodiscard]] upstream_failure classify_upstream_error(const error_code& ec, upstream_stage stage,
                                                       std::string_view detail = {});

}  // namespace tokenmeter::relay
