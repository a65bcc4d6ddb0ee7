// protocol/dialect: what one API dialect is, as a row of the dialect table (dialects.cpp). Each
// dialect's file defines its descriptor next to its adapter; the registry functions in
// dialects.hpp only walk the table, so adding a dialect is one file plus one table row.
#pragma once

#include <memory>
#include <nlohmann/json_fwd.hpp>
#include <span>
#include <string_view>

#include "protocol/adapter.hpp"
#include "protocol/types.hpp"

namespace tokenmeter::protocol {

struct dialect {
    api_kind api = api_kind::none;
    std::string_view name;  // the `api` label value and the name a configured route uses
    // Whether a POST to `path` (the target without its query) speaks this dialect by its
    // well-known path. The table is tried in order; the first match wins.
    bool (*matches_path)(std::string_view path) noexcept = nullptr;
    // Model, stream flag and prompt size from the request; `path` is without its query.
    request_info (*parse_request)(std::string_view path, std::string_view body) = nullptr;
    // Whether the proxy may ask this request for usage (inject_usage_request); null when the
    // dialect has no such option.
    bool (*can_inject_usage)(const request_info& info) noexcept = nullptr;
    // A fresh adapter for one response.
    std::unique_ptr<adapter> (*make_adapter)() = nullptr;
};

// Every dialect, in the order paths are matched.
[[nodiscard]] std::span<const dialect* const> dialect_table() noexcept;
// The row of `api`; nullptr for api_kind::none.
[[nodiscard]] const dialect* find_dialect(api_kind api) noexcept;

// The request reader most dialects share: model, a boolean "stream" (else `stream_default`) and
// the prompt's text size, from a JSON object body. Bodies past limits.max_json_depth or not an
// object are not looked into (body_parsed stays false).
request_info parse_json_request(std::string_view body, bool stream_default);

// Whether a root member named `key` (or, under `parent`, a member of that object) states the
// request's output limit (request_info::max_output_tokens). parent "" is the root.
[[nodiscard]] bool names_output_limit(std::string_view parent, std::string_view key) noexcept;
// Sets info.max_output_tokens from a parsed request body: the largest limit it names (a body
// naming both max_tokens and max_completion_tokens reserves for the larger); a negative or
// fractional value (llama.cpp's -1: no limit) names none.
void read_output_limit(const nlohmann::json& root, request_info& info);
// The member `key` of `object`; null when `object` is not an object or the member is absent or
// null.
[[nodiscard]] const nlohmann::json* json_member(const nlohmann::json& object, const char* key);

}  // namespace tokenmeter::protocol
