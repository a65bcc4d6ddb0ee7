// Fuzz target for the request path: arbitrary bytes as a client request, through Beast's parser
// configured as the proxy configures it, then every decision the proxy takes before forwarding
// (Host and version, framing, the credential checks, the target's normal form, an escaped
// metered path, the route) and every dialect's request parser, the Python-compatible reading
// and the usage injection on the body, and the upstream head the proxy writes (it must
// parse back as one complete request). Nothing may crash, throw out or recurse without
// bound; a normalized target must be stable (normalizing it again changes nothing) and never
// climb above the root.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <iterator>
#include <string>
#include <string_view>
#include <variant>

#include "net/beast.hpp"
#include "protocol/dialect.hpp"
#include "protocol/dialects.hpp"
#include "protocol/json_limits.hpp"
#include "protocol/openai.hpp"
#include "protocol/python_json.hpp"
#include "relay/headers.hpp"
#include "relay/request_plan.hpp"
#include "relay/request_target.hpp"

namespace {

using namespace tokenmeter;
using protocol::api_kind;

void check_target(std::string_view target) {
    auto first = relay::normalize_target(target);
    auto* path = std::get_if<std::string>(&first);
    if (path == nullptr) {
        return;
    }
    if (*path != "*" && (path->empty() || path->front() != '/')) {
        std::abort();  // the forwarded target is always origin-form
    }
    auto again = relay::normalize_target(*path);
    auto* same = std::get_if<std::string>(&again);
    if (same == nullptr || *same != *path) {
        std::abort();  // normalizing is idempotent
    }
}

// The one-pass OpenAI request reader reads what the DOM reader it replaced reads.
void check_openai_reader(std::string_view body) {
    const protocol::request_info walk = protocol::parse_openai_request(body);
    const protocol::request_info dom = protocol::parse_openai_request_dom(body);
    if (walk.body_parsed != dom.body_parsed || walk.model != dom.model ||
        walk.stream != dom.stream || walk.include_usage != dom.include_usage ||
        walk.has_stream_options != dom.has_stream_options ||
        walk.empty_object != dom.empty_object || walk.prompt_chars != dom.prompt_chars ||
        walk.prompt_text != dom.prompt_text) {
        std::abort();
    }
}

// The head the proxy writes for the upstream, from these fields, is one complete HTTP/1.1
// request head that Beast's parser reads back, with the body's length.
void check_upstream_head(const bhttp::request<bhttp::string_body>& parsed, std::size_t size) {
    auto normalized = relay::normalize_target(parsed.target());
    const auto* target = std::get_if<std::string>(&normalized);
    if (target == nullptr) {
        return;
    }
    auto request = parsed;
    const auto fields = static_cast<std::size_t>(std::distance(request.begin(), request.end()));
    relay::session_settings settings;
    settings.upstream = {"http", "model", 8000, size % 3 == 0 ? "" : "/base"};
    settings.forwarded_for = static_cast<relay::forwarded_for_policy>(size % 3);
    settings.preserve_host = size % 5 == 0;
    const relay::client_origin origin{size % 2 == 0, size % 4 == 0 ? "::1" : "10.0.0.1"};
    const auto plan = relay::plan_request(request, *target, fields, settings, origin);
    if (plan.unparsable_body || plan.model_missing) {
        return;  // answered 400 by the proxy: nothing goes upstream
    }
    bhttp::request_parser<bhttp::string_body> back;
    back.header_limit(64 * 1024);  // the proxy adds forwarding fields to a head at the limit
    back.eager(true);
    error_code ec;
    const std::string bytes = plan.upstream.head + plan.upstream.body;
    const std::size_t used = back.put(asio::const_buffer(bytes.data(), bytes.size()), ec);
    if (ec || !back.is_done() || used != bytes.size() || back.get().version() != 11) {
        std::abort();
    }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    const std::string_view input(reinterpret_cast<const char*>(data), size);
    // The body alone, as each dialect reads it (the bytes after a request head, or the input).
    for (const protocol::dialect* d : protocol::dialect_table()) {
        (void)protocol::parse_request(d->api, "/v1beta/models/m:streamGenerateContent", input);
    }
    (void)protocol::inject_usage_request(input, size % 2 == 0);
    (void)protocol::python_json_as_strict(input);
    check_openai_reader(input);
    check_target(input.substr(0, std::min<std::size_t>(size, 512)));

    bhttp::request_parser<bhttp::string_body> parser;
    parser.header_limit(8 * 1024);
    parser.body_limit(64 * 1024);
    parser.eager(true);
    error_code ec;
    asio::const_buffer buffer(data, size);
    const std::size_t used = parser.put(buffer, ec);
    if (ec && ec != bhttp::error::need_more) {
        return 0;
    }
    if (used > size || !parser.is_header_done()) {
        return 0;
    }
    const auto& head = parser.get();
    (void)relay::host_or_version_problem(head);
    (void)relay::framing_problem(head);
    (void)relay::credential_problem(head, usage::tenant_source::api_key, "x-tenant-id");
    (void)relay::credential_problem(head, usage::tenant_source::header, "x-tenant-id");
    check_target(head.target());
    auto normalized = relay::normalize_target(head.target());
    if (auto* target = std::get_if<std::string>(&normalized)) {
        (void)relay::refuse_escaped_api_path(*target, protocol::route_table({}, true));
        const api_kind api = protocol::api_for_path(*target);
        if (parser.is_done()) {
            (void)protocol::parse_request(api, *target, parser.get().body());
        }
    }
    bhttp::fields copy;
    relay::copy_end_to_end_fields(head.base(), copy);
    if (parser.is_done()) {
        check_upstream_head(parser.get(), size);
    }
    return 0;
}
