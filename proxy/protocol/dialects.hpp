// protocol/dialects: the protocol registry. Maps a request path to the API it speaks, reads what
// the request body says about the response, and builds the adapter that decodes that API's
// responses. Each function looks its dialect up in the dialect table (protocol/dialect.hpp);
// configured routes are protocol/routes.hpp.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "protocol/adapter.hpp"
#include "protocol/routes.hpp"
#include "protocol/types.hpp"

namespace tokenmeter::protocol {

// The API a POST to `target` (path and optional query) speaks by its well-known path;
// api_kind::none when the path is not one of them.
api_kind api_for_path(std::string_view target) noexcept;

// The api_kind whose label is `name` ("openai_chat", "anthropic_messages", ..., "none").
std::optional<api_kind> api_from_name(std::string_view name) noexcept;
// Every name api_from_name accepts, for error messages: "openai_chat, ..., gemini_generate or
// none".
std::string api_names_list();

// Model, stream flag and prompt size from the request, by dialect: Gemini names the model and
// streaming in the path, TGI streams by path, Ollama streams unless told "stream": false. A
// body that only Python's json reads (NaN, 1e400, a lone surrogate: what vLLM and SGLang accept)
// is read as Python reads it (protocol/python_json); body_parsed is false only for a body the
// proxy cannot read at all.
request_info parse_request(api_kind api, std::string_view target, std::string_view body);

// Whether the proxy may add stream_options.include_usage to this request (OpenAI chat and
// completions, streamed, not already asking for usage).
bool can_inject_usage(api_kind api, const request_info& info) noexcept;
// Whether the API names its model in the request body (OpenAI, Responses, Anthropic, Ollama):
// a body without one is served under a model the meter cannot know (a server's default). TGI and
// llama.cpp serve one model and name none; Gemini names it in the path.
[[nodiscard]] bool names_model_in_body(api_kind api) noexcept;
// The request body with "stream_options":{"include_usage":true} set (and
// "continuous_usage_stats":true when asked); nullopt when the body is not a JSON object (then
// it is forwarded as it is). `parsed`, when given, is what parse_request read from this same
// body: with a JSON object and no "stream_options" member the body is not parsed again.
std::optional<std::string> inject_usage_request(std::string_view body, bool continuous = false,
                                                const request_info* parsed = nullptr);

// A fresh adapter for one response; nullptr for api_kind::none.
std::unique_ptr<adapter> make_adapter(api_kind api);

}  // namespace tokenmeter::protocol
