// protocol/dialects: the dialect table and the registry functions over it.
#include "protocol/dialects.hpp"

#include <algorithm>
#include <array>
#include <nlohmann/json.hpp>
#include <vector>

#include "protocol/dialect.hpp"
#include "protocol/json_limits.hpp"
#include "protocol/python_json.hpp"

namespace tokenmeter::protocol {

// The table: each dialect's file defines its descriptor; a new dialect adds one line to each of
// the two lists below. The rows are constinit and the table constexpr, so both are in place
// before any dynamic initialization: a lookup from another file's static initializer is safe.
extern const dialect openai_chat_dialect;
extern const dialect openai_completions_dialect;
extern const dialect openai_responses_dialect;
extern const dialect anthropic_messages_dialect;
extern const dialect tgi_generate_dialect;
extern const dialect llamacpp_completion_dialect;
extern const dialect ollama_chat_dialect;
extern const dialect ollama_generate_dialect;
extern const dialect gemini_generate_dialect;
extern const dialect openai_embeddings_dialect;
extern const dialect rerank_dialect;
extern const dialect score_dialect;
extern const dialect classify_dialect;
extern const dialect pooling_dialect;
extern const dialect openai_moderations_dialect;
extern const dialect openai_transcriptions_dialect;
extern const dialect openai_translations_dialect;
extern const dialect openai_speech_dialect;
extern const dialect openai_realtime_dialect;
extern const dialect openai_realtime_transcription_dialect;

namespace {

constexpr std::array<const dialect*, 20> table{{
    &openai_chat_dialect,
    &openai_completions_dialect,
    &openai_responses_dialect,
    &anthropic_messages_dialect,
    &tgi_generate_dialect,
    &llamacpp_completion_dialect,
    &ollama_chat_dialect,
    &ollama_generate_dialect,
    &gemini_generate_dialect,
    &openai_embeddings_dialect,
    &rerank_dialect,
    &score_dialect,
    &classify_dialect,
    &pooling_dialect,
    &openai_moderations_dialect,
    &openai_transcriptions_dialect,
    &openai_translations_dialect,
    &openai_speech_dialect,
    &openai_realtime_dialect,
    &openai_realtime_transcription_dialect,
}};

constexpr std::string_view none_name = "none";

std::string_view path_of(std::string_view target) noexcept {
    return target.substr(0, target.find('?'));
}

using json = nlohmann::json;

const json* member(const json& object, const char* key) {
    return json_member(object, key);
}

// Text a prompt carries: a string, or parts/blocks with "text" (OpenAI, Anthropic, Gemini).
// Iterative, with an explicit stack: the body's nesting cannot reach the call stack.
std::uint64_t text_chars(const json& root) {
    std::uint64_t chars = 0;
    std::vector<const json*> todo{&root};
    while (!todo.empty()) {
        const json* value = todo.back();
        todo.pop_back();
        if (value->is_string()) {
            chars += value->get_ref<const std::string&>().size();
        } else if (value->is_array()) {
            for (const auto& item : *value) {
                todo.push_back(&item);
            }
        } else if (value->is_object()) {
            for (const char* key : {"text", "content", "parts"}) {
                if (const json* inner = member(*value, key)) {
                    todo.push_back(inner);
                }
            }
        }
    }
    return chars;
}

}  // namespace

std::span<const dialect* const> dialect_table() noexcept {
    return table;
}

const dialect* find_dialect(api_kind api) noexcept {
    for (const dialect* d : table) {
        if (d->api == api) {
            return d;
        }
    }
    return nullptr;
}

std::string_view to_string(api_kind kind) noexcept {
    const dialect* d = find_dialect(kind);
    return d != nullptr ? d->name : none_name;
}

std::string_view to_string(parse_error reason) noexcept {
    switch (reason) {
        case parse_error::invalid_json:
            return "invalid_json";
        case parse_error::unexpected_shape:
            return "unexpected_shape";
        case parse_error::unknown_event:
            return "unknown_event";
        case parse_error::oversized_event:
            return "oversized_event";
        case parse_error::truncated_event:
            return "truncated_event";
    }
    return "unexpected_shape";
}

std::optional<api_kind> api_from_name(std::string_view name) noexcept {
    if (name == none_name) {
        return api_kind::none;
    }
    for (const dialect* d : table) {
        if (d->name == name) {
            return d->api;
        }
    }
    return std::nullopt;
}

std::string api_names_list() {
    std::string out;
    for (const dialect* d : table) {
        out.append(d->name).append(", ");
    }
    out.resize(out.size() - 2);
    out.append(" or ").append(none_name);
    return out;
}

api_kind api_for_path(std::string_view target) noexcept {
    std::string_view path = path_of(target);
    for (const dialect* d : table) {
        if (d->matches_path(path)) {
            return d->api;
        }
    }
    return api_kind::none;
}

bool names_output_limit(std::string_view parent, std::string_view key) noexcept {
    if (parent.empty()) {
        return key == "max_tokens" || key == "max_completion_tokens" ||
               key == "max_output_tokens" || key == "n_predict";
    }
    return (parent == "generationConfig" && key == "maxOutputTokens") ||
           (parent == "options" && key == "num_predict") ||
           (parent == "parameters" && key == "max_new_tokens");
}

void read_output_limit(const json& root, request_info& info) {
    const auto take = [&info](const json& value) {
        const auto limit = value.get<std::uint64_t>();
        info.max_output_tokens = std::max(info.max_output_tokens.value_or(0), limit);
    };
    for (const auto& [key, value] : root.items()) {
        if (value.is_number_unsigned() && names_output_limit("", key)) {
            take(value);
        } else if (value.is_object() &&
                   (key == "generationConfig" || key == "options" || key == "parameters")) {
            for (const auto& [inner, limit] : value.items()) {
                if (limit.is_number_unsigned() && names_output_limit(key, inner)) {
                    take(limit);
                }
            }
        }
    }
}

request_info parse_json_request(std::string_view body, bool stream_default) {
    request_info info;
    info.stream = stream_default;
    // Past the depth limit the body is not looked into (it is still forwarded as it is).
    json root = json_depth_within(body, max_json_depth())
                    ? json::parse(body.begin(), body.end(), nullptr, false)
                    : json(json::value_t::discarded);
    if (root.is_discarded() || !root.is_object()) {
        return info;
    }
    info.body_parsed = true;
    if (const json* model = member(root, "model"); model != nullptr && model->is_string()) {
        info.model = model->get<std::string>();
    }
    if (const json* stream = member(root, "stream"); stream != nullptr && stream->is_boolean()) {
        info.stream = stream->get<bool>();
    }
    for (const char* key : {"messages", "prompt", "input", "inputs", "contents", "system"}) {
        if (const json* prompt = member(root, key)) {
            info.prompt_chars += text_chars(*prompt);
        }
    }
    read_output_limit(root, info);
    return info;
}

request_info parse_request(api_kind api, std::string_view target, std::string_view body) {
    const dialect* d = find_dialect(api);
    if (d == nullptr) {
        return request_info{};
    }
    request_info info = d->parse_request(path_of(target), body);
    if (!info.body_parsed) {
        // Read as the model server's Python json reads it (NaN, 1e400, lone surrogates...).
        if (auto strict = python_json_as_strict(body)) {
            info = d->parse_request(path_of(target), *strict);
        }
    }
    return info;
}

bool names_model_in_body(api_kind api) noexcept {
    switch (api) {
        case api_kind::openai_chat_completions:
        case api_kind::openai_completions:
        case api_kind::openai_responses:
        case api_kind::anthropic_messages:
        case api_kind::ollama_chat:
        case api_kind::ollama_generate:
        case api_kind::openai_embeddings:
            return true;
        case api_kind::none:
        case api_kind::tgi_generate:
        case api_kind::llamacpp_completion:
        case api_kind::gemini_generate:
        // vLLM's pooling and audio endpoints and moderations serve a default model when none
        // is named.
        case api_kind::rerank:
        case api_kind::score:
        case api_kind::classify:
        case api_kind::pooling:
        case api_kind::openai_moderations:
        case api_kind::openai_transcriptions:
        case api_kind::openai_translations:
        case api_kind::openai_realtime:
        case api_kind::openai_realtime_transcription:
            return false;
        // OpenAI's speech API requires a model.
        case api_kind::openai_speech:
            return true;
    }
    return false;
}

bool can_inject_usage(api_kind api, const request_info& info) noexcept {
    const dialect* d = find_dialect(api);
    return d != nullptr && d->can_inject_usage != nullptr && d->can_inject_usage(info);
}

std::unique_ptr<adapter> make_adapter(api_kind api) {
    const dialect* d = find_dialect(api);
    return d != nullptr ? d->make_adapter() : nullptr;
}

const nlohmann::json* json_member(const nlohmann::json& object, const char* key) {
    if (!object.is_object()) {
        return nullptr;
    }
    auto it = object.find(key);
    if (it == object.end() || it->is_null()) {
        return nullptr;
    }
    return &*it;
}

}  // namespace tokenmeter::protocol
