// observe/access_log: the one access record a request leaves when it ends, as values. The
// metering observer fills it from the request's facts and the billing rule's counts; app/
// writes it in the log's format (app/log_format). An empty string or an unset optional is a
// value nobody knows, written as null, never as a made-up "" or 0.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string_view>

#include "core/trace_context.hpp"

namespace tokenmeter::observe {

struct access_entry {
    std::string_view method;      // the request method as the client sent it
    std::string_view path;        // the request target without its query (a query can hold a key)
    int status = 0;               // the status the client got; 0: none (the client left first)
    std::string_view outcome;     // meter::outcome's word
    std::string_view api;         // the API label; "" for a request that is not metered
    std::string_view model;       // the model the request named (cut as in the usage record)
    std::string_view tenant;      // the tenant it is metered for; "" when none is resolved
    std::string_view request_id;  // the client's X-Request-Id, kept as the usage record keeps it
    // The request's W3C trace (the client's or the proxy's new one) and the proxy's span in it;
    // unset when the request was not forwarded with one.
    std::optional<core::trace_id> trace_id;
    std::optional<core::span_id> span_id;
    std::string_view client;    // the client's IP address
    std::string_view upstream;  // the upstream it was forwarded to; "" when it was not
    std::optional<double> time_to_first_token;  // seconds; streamed responses with output only
    double duration_seconds = 0.0;
    std::optional<std::uint64_t> input_tokens;   // meter::billed's input count
    std::optional<std::uint64_t> output_tokens;  // meter::billed's output count
    std::optional<std::uint64_t> bytes_in;       // request body bytes, as the client sent them
    // Response body bytes the upstream sent (its framing removed); unknown when the proxy
    // answered itself.
    std::optional<std::uint64_t> bytes_out;
};

// Writes one access record; called once per request, on the request's own thread.
using access_writer = std::function<void(const access_entry&)>;

}  // namespace tokenmeter::observe
