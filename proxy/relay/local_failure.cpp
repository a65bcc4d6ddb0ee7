#include "relay/local_failure.hpp"

#include <boost/asio/ssl/error.hpp>
#include <nlohmann/json.hpp>

#include "relay/upstream_pool.hpp"

namespace tokenmeter::relay {

failure_answer answer_for(local_failure failure) noexcept {
    using s = bhttp::status;
    using o = observe::outcome;
    switch (failure) {
        case local_failure::header_too_large:
            return {s::request_header_fields_too_large, "header_too_large", true, o::rejected};
        case local_failure::body_too_large:
            return {s::payload_too_large, "body_too_large", true, o::rejected};
        case local_failure::bad_request:
        case local_failure::bad_request_body:
            return {s::bad_request, "bad_request", true, o::rejected};
        case local_failure::chunk_line_too_long:
            return {s::bad_request, "chunk_line_too_long", true, o::rejected};
        case local_failure::request_timeout:
            return {s::request_timeout, "request_timeout", true, o::rejected};
        case local_failure::trace_with_content:
            return {s::bad_request, "trace_with_content", true, o::rejected};
        case local_failure::bad_target:
            return {s::bad_request, "bad_target", true, o::rejected};
        case local_failure::unparsable_body:
            // The body was read whole: the connection can carry the next request.
            return {s::bad_request, "unparsable_body", false, o::rejected};
        case local_failure::model_required:
            return {s::bad_request, "model_required", false, o::rejected};
        case local_failure::rate_limited:
            return {s::too_many_requests, "provisioned_throughput_exceeded", false, o::rejected};
        case local_failure::too_many_tunnels:
            return {s::service_unavailable, "too_many_tunnels", false, o::rejected};
        case local_failure::pool_exhausted:
            return {s::service_unavailable, "upstream_pool_exhausted", false, o::upstream_error};
        case local_failure::upstream_timeout:
            return {s::gateway_timeout, "upstream_timeout", true, o::upstream_error};
        case local_failure::upstream_bad_response:
            // It answered, but not with HTTP the proxy can relay: the connection is not reused.
            return {s::bad_gateway, "upstream_bad_response", false, o::upstream_error};
        case local_failure::upstream_closed:
            return {s::bad_gateway, "upstream_closed", false, o::upstream_error};
        case local_failure::upstream_unreachable:
            return {s::bad_gateway, "upstream_unreachable", false, o::upstream_error};
        case local_failure::upstream_tls:
            return {s::bad_gateway, "upstream_tls_failed", false, o::upstream_error};
        case local_failure::internal_error:
            return {s::internal_server_error, "internal_error", true, o::upstream_error};
    }
    return {s::internal_server_error, "internal_error", true, o::upstream_error};
}

std::string_view to_string(upstream_stage stage) noexcept {
    switch (stage) {
        case upstream_stage::connect:
            return "connect";
        case upstream_stage::write:
            return "write";
        case upstream_stage::response_header:
            return "response_header";
    }
    return "unknown";
}

namespace {

std::string_view upstream_reason(const error_code& ec, upstream_stage stage) {
    const bool connecting = stage == upstream_stage::connect;
    if (ec == beast::error::timeout) {
        return connecting ? "connect_timeout" : "timeout";
    }
    if (ec == make_error_code(pool_errc::exhausted)) {
        return "pool_exhausted";
    }
    if (ec.category() == asio::error::get_ssl_category() ||
        ec.category() == asio::ssl::error::get_stream_category()) {
        return "tls";
    }
    if (ec == asio::error::connection_refused) {
        return "connect_refused";
    }
    if (ec == asio::error::host_not_found || ec == asio::error::host_not_found_try_again) {
        return "resolve_failed";
    }
    if (ec == bhttp::error::end_of_stream || ec == asio::error::eof ||
        ec == bhttp::error::partial_message || ec == asio::error::connection_reset ||
        ec == asio::error::broken_pipe) {
        return "connection_closed";
    }
    if (ec.category() == bhttp::make_error_code(bhttp::error::bad_version).category() ||
        ec.category() == upstream_category()) {
        return "bad_response";
    }
    return connecting ? "connect_failed" : "io_error";
}

}  // namespace

upstream_failure classify_upstream_error(const error_code& ec, upstream_stage stage,
                                         std::string_view detail) {
    const std::string_view reason = upstream_reason(ec, stage);
    const std::string why = detail.empty() ? ec.message() : std::string(detail);
    if (reason == "tls") {
        return {reason, local_failure::upstream_tls, "TLS with the upstream failed: " + why};
    }
    if (reason == "pool_exhausted") {
        return {reason, local_failure::pool_exhausted,
                "every upstream connection is busy; try again"};
    }
    if (ec == beast::error::timeout && stage != upstream_stage::connect) {
        return {reason, local_failure::upstream_timeout,
                "the upstream did not answer within timeouts.upstream_idle"};
    }
    if (reason == "bad_response") {
        return {reason, local_failure::upstream_bad_response,
                "the upstream's response was not valid HTTP/1.1: " + why};
    }
    if (reason == "connection_closed") {
        return {reason, local_failure::upstream_closed,
                "the upstream closed the connection before a whole response head: " + why};
    }
    return {reason, local_failure::upstream_unreachable,
            "the upstream could not be reached: " + why};
}

}  // namespace tokenmeter::relay
