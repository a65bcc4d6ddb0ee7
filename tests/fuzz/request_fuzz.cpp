// Fuzz target for the request path: arbitrary bytes as a client request, through Beast's parser
// configured as the proxy configures it, then every decision the proxy takes before forwarding
// (Host and version, framing, the target's normal form, the route) and every dialect's request
// parser and the usage injection on the body. Nothing may crash, throw out or recurse without
// bound; a normalized target must be stable (normalizing it again changes nothing) and never
// climb above the root.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>
#include <variant>

#include "http/beast.hpp"
#include "http/headers.hpp"
#include "http/request_target.hpp"
#include "protocol/dialect.hpp"
#include "protocol/dialects.hpp"
#include "protocol/json_limits.hpp"
#include "protocol/openai.hpp"

namespace {

using namespace tokenmeter;
using protocol::api_kind;

void check_target(std::string_view target) {
    auto first = http::normalize_target(target);
    auto* path = std::get_if<std::string>(&first);
    if (path == nullptr) {
        return;
    }
    if (*path != "*" && (path->empty() || path->front() != '/')) {
        std::abort();  // the forwarded target is always origin-form
    }
    auto again = http::normalize_target(*path);
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

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    const std::string_view input(reinterpret_cast<const char*>(data), size);
    // The body alone, as each dialect reads it (the bytes after a request head, or the input).
    for (const protocol::dialect* d : protocol::dialect_table()) {
        (void)protocol::parse_request(d->api, "/v1beta/models/m:streamGenerateContent", input);
    }
    (void)protocol::inject_usage_request(input, size % 2 == 0);
    check_openai_reader(input);
    check_target(input.substr(0, std::min<std::size_t>(size, 512)));

    http::bhttp::request_parser<http::bhttp::string_body> parser;
    parser.header_limit(8 * 1024);
    parser.body_limit(64 * 1024);
    parser.eager(true);
    http::error_code ec;
    http::asio::const_buffer buffer(data, size);
    const std::size_t used = parser.put(buffer, ec);
    if (ec && ec != http::bhttp::error::need_more) {
        return 0;
    }
    if (used > size || !parser.is_header_done()) {
        return 0;
    }
    const auto& head = parser.get();
    (void)http::host_or_version_problem(head);
    (void)http::framing_problem(head);
    check_target(head.target());
    auto normalized = http::normalize_target(head.target());
    if (auto* target = std::get_if<std::string>(&normalized)) {
        const api_kind api = protocol::api_for_path(*target);
        if (parser.is_done()) {
            (void)protocol::parse_request(api, *target, parser.get().body());
        }
    }
    http::bhttp::fields copy;
    http::copy_end_to_end_fields(head.base(), copy);
    return 0;
}
