#include "http/request_plan.hpp"

#include <string>
#include <utility>

#include "http/headers.hpp"
#include "protocol/dialects.hpp"

namespace tokenmeter::http {
namespace {

// Every line of a possibly repeated list field joined into one value (RFC 9110 §5.3), removed.
std::string take_list_field(bhttp::fields& fields, std::string_view name) {
    std::string joined;
    const beast::string_view key(name.data(), name.size());
    for (auto [it, end] = fields.equal_range(key); it != end; ++it) {
        const auto value = it->value();
        if (value.empty()) {
            continue;
        }
        if (!joined.empty()) {
            joined += ", ";
        }
        joined.append(value.data(), value.size());
    }
    fields.erase(key);
    return joined;
}

void append_list_field(bhttp::fields& fields, std::string_view name, std::string_view element) {
    std::string value = take_list_field(fields, name);
    if (!value.empty()) {
        value += ", ";
    }
    value += element;
    fields.set(beast::string_view(name.data(), name.size()), value);
}

}  // namespace

void apply_forwarding(bhttp::fields& upstream, const client_origin& origin,
                      forwarded_for_policy policy) {
    constexpr std::string_view xff = "X-Forwarded-For";
    switch (policy) {
        case forwarded_for_policy::keep:
            break;
        case forwarded_for_policy::drop:
            upstream.erase(beast::string_view(xff.data(), xff.size()));
            break;
        case forwarded_for_policy::append:
            if (!origin.address.empty()) {
                append_list_field(upstream, xff, origin.address);
            }
            break;
    }
    if (origin.tls) {
        upstream.set("X-Forwarded-Proto", "https");
        std::string element;
        if (policy == forwarded_for_policy::append && !origin.address.empty()) {
            // An IPv6 address is a quoted, bracketed node (RFC 7239 §6).
            const bool v6 = origin.address.find(':') != std::string_view::npos;
            element = v6 ? "for=\"[" + std::string(origin.address) + "]\";"
                         : "for=" + std::string(origin.address) + ";";
        }
        element += "proto=https";
        append_list_field(upstream, "Forwarded", element);
    }
}

request_plan plan_request(bhttp::request<bhttp::string_body>& request,
                          std::string_view forward_target, std::size_t header_fields,
                          const session_settings& settings, const client_origin& origin) {
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

    protocol::route_choice route;
    if (request.method() == bhttp::verb::post) {
        route = settings.routes.choose(
            std::string_view(request.target().data(), request.target().size()));
    }
    plan.api = route.api;
    if (plan.api != protocol::api_kind::none) {
        plan.info = protocol::parse_request(plan.api, request.target(), request.body());
        if (route.usage_injection && protocol::can_inject_usage(plan.api, plan.info)) {
            // The one place the proxy changes bytes: usage on every stream (see usage_filter).
            if (auto body =
                    protocol::inject_usage_request(request.body(), route.continuous_usage,
                                                   &plan.info)) {
                request.body() = std::move(*body);
                plan.usage_injected = true;
                plan.continuous_usage = route.continuous_usage;
            }
        }
    }

    auto& upstream = plan.upstream;
    if (request.method() == bhttp::verb::unknown) {
        // Any token method (QUERY, PURGE, lowercase "get" ...) goes upstream as it came; Beast
        // throws for method(verb::unknown), so only the string is set.
        upstream.method_string(request.method_string());
    } else {
        upstream.method(request.method());
    }
    if (forward_target == "*") {
        upstream.target("*");
    } else {
        upstream.target(settings.upstream.base_path + std::string(forward_target));
    }
    upstream.version(11);
    copy_end_to_end_fields(request.base(), upstream.base());
    upstream.erase(bhttp::field::expect);
    apply_forwarding(upstream.base(), origin, settings.forwarded_for);
    if (!settings.preserve_host || request[bhttp::field::host].empty()) {
        upstream.set(bhttp::field::host, upstream_host_header(settings.upstream));
    }
    upstream.body() = std::move(request.body());
    upstream.prepare_payload();
    upstream.keep_alive(true);
    return plan;
}

}  // namespace tokenmeter::http
