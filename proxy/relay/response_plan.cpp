#include "relay/response_plan.hpp"

#include <boost/beast/core/string.hpp>

#include "relay/headers.hpp"
#include "relay/ws_frame.hpp"

namespace tokenmeter::relay {

response_plan plan_response(const upstream_head& upstream, const response_context& context) {
    const auto& head = upstream.fields;
    response_plan plan;
    plan.keep_alive = context.client_keep_alive;
    // The client's head is written as text straight from the upstream's (no second field set):
    // the status line, every end-to-end field in the order it came, then the framing fields the
    // proxy sets.
    const unsigned version = context.client_version == 10 ? 10 : 11;
    append_status_line(version, head.result_int(), head.reason(), plan.head);
    append_end_to_end_fields(head, plan.head);

    const auto content_type = head[bhttp::field::content_type];
    plan.filter_usage = context.filter_usage && upstream.has_body && head.result_int() < 300 &&
                        boost::beast::iequals(content_type.substr(0, 17), "text/event-stream");
    if (const auto coding = head[bhttp::field::content_encoding];
        upstream.has_body && !coding.empty() && !boost::beast::iequals(coding, "identity")) {
        plan.coded_body = true;
    }
    plan.framing = upstream.has_body ? body_framing::raw : body_framing::none;
    if (!upstream.has_body) {
        // HEAD, 204 and 304 keep the upstream's Content-Length as a description, with no body.
        if (const auto length = head[bhttp::field::content_length]; !length.empty()) {
            append_field(plan.head, "Content-Length", length);
        }
    } else if (upstream.content_length && !plan.filter_usage) {
        append_field(plan.head, "Content-Length", *upstream.content_length);
    } else if (version == 11) {
        append_field(plan.head, "Transfer-Encoding", "chunked");
        plan.framing = body_framing::chunked;
    } else {
        // An HTTP/1.0 client cannot take chunks: the body ends when the connection closes.
        plan.keep_alive = false;
    }
    // Persistence is the default of HTTP/1.1 and must be asked for in HTTP/1.0 (RFC 9112 §9.3).
    const bool stays_open = plan.keep_alive && !context.draining;
    if (version == 11 && !stays_open) {
        append_field(plan.head, "Connection", "close");
    } else if (version == 10 && stays_open) {
        append_field(plan.head, "Connection", "keep-alive");
    }
    plan.head += "\r\n";
    return plan;
}

switch_plan plan_switch(const boost::beast::http::response_header<>& upstream) {
    switch_plan plan;
    append_status_line(11, upstream.result_int(), upstream.reason(), plan.head);
    append_end_to_end_fields(upstream, plan.head);
    append_field(plan.head, "Upgrade", upstream[bhttp::field::upgrade]);
    append_field(plan.head, "Connection", "Upgrade");
    plan.head += "\r\n";
    plan.reserved_bits =
        ws::reserved_bits_for_extensions(upstream[bhttp::field::sec_websocket_extensions]);
    return plan;
}

}  // namespace tokenmeter::relay
