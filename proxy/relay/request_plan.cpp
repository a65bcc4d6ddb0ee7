#include "relay/request_plan.hpp"

#include <cstdint>
#include <optional>
#include <string>
#include <utility>

#include "protocol/dialects.hpp"
#include "protocol/realtime.hpp"
#include "relay/headers.hpp"

namespace tokenmeter::relay {
namespace {

constexpr std::string_view forwarded_for = "X-Forwarded-For";
constexpr std::string_view forwarded_proto = "X-Forwarded-Proto";
constexpr std::string_view traceparent = "traceparent";
constexpr std::string_view tracestate = "tracestate";

bool named(const bhttp::fields::value_type& field, std::string_view name) {
    return beast::iequals(field.name_string(), beast::string_view(name.data(), name.size()));
}

// A list field's non-empty lines joined into one value (RFC 9110 §5.3).
void join_line(std::string& joined, beast::string_view value) {
    if (value.empty()) {
        return;
    }
    if (!joined.empty()) {
        joined += ", ";
    }
    joined.append(value.data(), value.size());
}

void join_element(std::string& joined, std::string_view element) {
    if (!joined.empty()) {
        joined += ", ";
    }
    joined += element;
}

// The client's traceparent when it sent exactly one field of it and its value is valid. Two
// fields are malformed: a list of traceparents has no meaning.
std::optional<core::trace_parent> incoming_trace(const bhttp::fields& fields) {
    std::optional<core::trace_parent> found;
    bool seen = false;
    for (const auto& field : fields) {
        if (field.name() == bhttp::field::unknown && named(field, traceparent)) {
            if (seen) {
                return std::nullopt;
            }
            seen = true;
            const auto value = field.value();
            found = core::parse_traceparent(std::string_view(value.data(), value.size()));
        }
    }
    return found;
}

// A field the plan writes itself or drops: the client's traceparent (replaced), and its
// tracestate when the traceparent was not valid (a new trace starts without one).
bool replaced_trace_field(const bhttp::fields::value_type& field, bool valid_trace) {
    return field.name() == bhttp::field::unknown &&
           (named(field, traceparent) || (!valid_trace && named(field, tracestate)));
}

// The route of a request: only a POST is metered.
protocol::route_choice route_of(bhttp::verb method, std::string_view target,
                                const session_settings& settings) {
    if (method != bhttp::verb::post) {
        return {};
    }
    protocol::route_choice route = settings.routes.choose(target);
    if (protocol::is_tunnel_api(route.api)) {
        return {};  // a tunnel's API: an HTTP request on its path is passed through
    }
    return route;
}

// The API of a WebSocket upgrade's tunnel (none for a request that is no upgrade): a Realtime
// session where a configured route names one of its APIs, else the well-known path's.
protocol::api_kind tunnel_api_of(bool upgrade, std::string_view target,
                                 const session_settings& settings) {
    if (!upgrade) {
        return protocol::api_kind::none;
    }
    if (protocol::is_tunnel_api(settings.routes.choose(target).api)) {
        return protocol::api_kind::openai_realtime;
    }
    return protocol::tunnel_api_for_path(target);
}

// Fields a metered exchange does not pass on: Accept-Encoding (the meter decodes no content
// coding; "identity" is asked for instead), and on a metered tunnel Sec-WebSocket-Extensions
// (no message may come compressed where the meter reads it).
bool withheld_for_metering(bhttp::field known, bool metered, protocol::api_kind tunnel_api) {
    return (metered && known == bhttp::field::accept_encoding) ||
           (tunnel_api != protocol::api_kind::none &&
            known == bhttp::field::sec_websocket_extensions);
}

}  // namespace

bool plans_a_large_body(const bhttp::request<bhttp::string_body>& request,
                        std::string_view forward_target, const session_settings& settings,
                        std::size_t bytes) {
    return request.body().size() > bytes &&
           route_of(request.method(), forward_target, settings).api != protocol::api_kind::none;
}

request_plan plan_request(bhttp::request<bhttp::string_body>& request,
                          std::string_view forward_target, std::size_t header_fields,
                          const session_settings& settings, const client_origin& origin,
                          core::trace_random* random) {
    request_plan plan;
    // From here on the target is the normalized origin-form one: routing, metering, the usage
    // record and the upstream all see the same path.
    request.target(beast::string_view(forward_target.data(), forward_target.size()));
    // Beast appends a chunked body's trailer fields to the header; they are not header fields
    // (RFC 9110 §6.5.1) and the proxy re-frames the body, so they are dropped.
    drop_trailer_fields(request.base(), header_fields);
    plan.keep_alive = request.keep_alive();
    plan.version = request.version();
    plan.head = request.method() == bhttp::verb::head;
    plan.upgrade = asks_for_websocket(request.base(), request.body().size());
    plan.tunnel_api = tunnel_api_of(plan.upgrade, forward_target, settings);

    const protocol::route_choice route = route_of(request.method(), forward_target, settings);
    plan.api = route.api;
    const bool metered = plan.api != protocol::api_kind::none;
    if (metered) {
        plan.info = protocol::parse_request(plan.api, request.target(), request.body());
        if (settings.unparsable_body == unparsable_body_policy::refuse) {
            if (!plan.info.body_parsed) {
                plan.unparsable_body = true;
                return plan;
            }
            if (plan.info.model.empty() && protocol::names_model_in_body(plan.api)) {
                plan.model_missing = true;
                return plan;
            }
        }
        if (route.usage_injection && protocol::can_inject_usage(plan.api, plan.info)) {
            // The one place the proxy changes bytes: usage on every stream (see usage_filter).
            if (auto body = protocol::inject_usage_request(request.body(), route.continuous_usage,
                                                           &plan.info)) {
                request.body() = std::move(*body);
                plan.usage_injected = true;
                plan.continuous_usage = route.continuous_usage;
            }
        }
    }

    // The upstream head, written as text straight from the client's fields (no second field
    // set): the request line, every end-to-end field in the order it came, then the fields
    // the proxy sets, in the order Beast's set() put them before (it appends).
    std::string& head = plan.upstream.head;
    head.reserve(256);
    const auto method = request.method_string();  // a token method Beast has no verb for too
    head.append(method.data(), method.size());
    head.push_back(' ');
    if (forward_target != "*") {
        head += settings.upstream.base_path;
    }
    head += forward_target;
    head += " HTTP/1.1\r\n";

    const auto policy = settings.forwarded_for;
    const bool client_host_kept = settings.preserve_host && !request[bhttp::field::host].empty();
    const bool append_for = policy == forwarded_for_policy::append && !origin.address.empty();
    std::string joined_for;        // with append_for: the client's X-Forwarded-For lines
    std::string joined_forwarded;  // over TLS: the client's Forwarded lines
    // The trace is read before the fields are copied: a tracestate goes on only with the
    // traceparent it belongs to.
    const std::optional<core::trace_parent> incoming = incoming_trace(request.base());
    plan.trace =
        core::continue_trace(incoming, settings.trace_sampling_ratio,
                             random != nullptr ? *random : core::trace_random::for_thread());
    const auto connection_named = connection_options(request.base());
    for (const auto& field : request.base()) {  // the trailer fields are gone (above)
        if (is_hop_by_hop(field, connection_named) &&
            !(plan.upgrade && field.name() == bhttp::field::upgrade)) {
            continue;
        }
        const bhttp::field known = field.name();
        if (replaced_trace_field(field, incoming.has_value())) {
            continue;  // the proxy's traceparent is written below
        }
        if (known == bhttp::field::expect || (known == bhttp::field::host && !client_host_kept) ||
            withheld_for_metering(known, metered, plan.tunnel_api)) {
            continue;
        }
        if ((policy == forwarded_for_policy::drop || append_for) && named(field, forwarded_for)) {
            if (append_for) {
                join_line(joined_for, field.value());
            }
            continue;  // dropped; or joined, and written after the other fields with the address
        }
        if (origin.tls) {
            if (named(field, forwarded_proto)) {
                continue;  // replaced: this hop is https whatever the client claimed
            }
            if (known == bhttp::field::forwarded) {
                join_line(joined_forwarded, field.value());
                continue;
            }
        }
        append_field(head, field.name_string(), field.value());
    }
    if (append_for) {
        join_element(joined_for, origin.address);
        append_field(head, forwarded_for, joined_for);
    }
    if (origin.tls) {
        append_field(head, forwarded_proto, "https");
        std::string element;
        if (policy == forwarded_for_policy::append && !origin.address.empty()) {
            // An IPv6 address is a quoted, bracketed node (RFC 7239 §6).
            const bool v6 = origin.address.find(':') != std::string_view::npos;
            element = v6 ? "for=\"[" + std::string(origin.address) + "]\";"
                         : "for=" + std::string(origin.address) + ";";
        }
        element += "proto=https";
        join_element(joined_forwarded, element);
        append_field(head, "Forwarded", joined_forwarded);
    }
    append_field(head, traceparent, core::format_traceparent(plan.trace));
    if (!client_host_kept) {
        append_field(head, "Host", upstream_host_header(settings.upstream));
    }
    if (plan.upgrade) {
        // Hop-by-hop, but the upgrade is asked of the upstream on the client's behalf.
        append_field(head, "Connection", "Upgrade");
    }
    if (metered) {
        // The meter reads the body as the upstream sends it, and decodes no content coding:
        // whatever the client accepts, a metered response is asked for without one. Leaving
        // the field out would not do: no Accept-Encoding means any coding is acceptable (RFC
        // 9110 §12.5.3).
        append_field(head, "Accept-Encoding", "identity");
    }
    // The body has a known length: Content-Length, as Beast's prepare_payload set it (for an
    // empty body only on the methods that are defined to have one).
    const auto length = request.body().size();
    const auto verb = request.method();
    if (length > 0 || verb == bhttp::verb::post || verb == bhttp::verb::put ||
        verb == bhttp::verb::options) {
        append_field(head, "Content-Length", std::uint64_t{length});
    }
    head += "\r\n";
    plan.upstream.body = std::move(request.body());
    return plan;
}

}  // namespace tokenmeter::relay
