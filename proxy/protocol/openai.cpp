#include "protocol/openai.hpp"

#include <nlohmann/json.hpp>

namespace tokenmeter::protocol {
namespace {

using json = nlohmann::json;

const json* member(const json& object, const char* key) {
    if (!object.is_object()) {
        return nullptr;
    }
    auto it = object.find(key);
    if (it == object.end() || it->is_null()) {
        return nullptr;
    }
    return &*it;
}

void append_string(const json* value, std::string& out) {
    if (value != nullptr && value->is_string()) {
        out += value->get_ref<const std::string&>();
    }
}

std::optional<std::uint64_t> count_field(const json& object, const char* key) {
    const json* value = member(object, key);
    if (value == nullptr || !value->is_number()) {
        return std::nullopt;
    }
    if (value->is_number_unsigned()) {
        return value->get<std::uint64_t>();
    }
    if (value->is_number_integer()) {
        auto v = value->get<std::int64_t>();
        return v < 0 ? std::nullopt : std::optional<std::uint64_t>(static_cast<std::uint64_t>(v));
    }
    double d = value->get<double>();
    if (!(d >= 0.0) || d > 1e18) {
        return std::nullopt;
    }
    return static_cast<std::uint64_t>(d);
}

std::optional<token_usage> decode_usage(const json& root) {
    const json* usage = member(root, "usage");
    if (usage == nullptr || !usage->is_object()) {
        return std::nullopt;
    }
    token_usage out;
    out.input_tokens = count_field(*usage, "prompt_tokens");
    out.output_tokens = count_field(*usage, "completion_tokens");
    if (const json* details = member(*usage, "completion_tokens_details")) {
        out.reasoning_tokens = count_field(*details, "reasoning_tokens");
    }
    if (const json* details = member(*usage, "prompt_tokens_details")) {
        out.cached_input_tokens = count_field(*details, "cached_tokens");
    }
    return out;
}

void append_tool_calls(const json* tool_calls, std::string& out) {
    if (tool_calls == nullptr || !tool_calls->is_array()) {
        return;
    }
    for (const auto& call : *tool_calls) {
        if (const json* function = member(call, "function")) {
            // The function name is generated text too; it is usually the very first token.
            append_string(member(*function, "name"), out);
            append_string(member(*function, "arguments"), out);
        }
    }
}

bool has_text_member(const json& object, const char* key) { return member(object, key) != nullptr; }

}  // namespace

std::string_view to_string(api_kind kind) noexcept {
    switch (kind) {
        case api_kind::openai_chat_completions:
            return "openai_chat";
        case api_kind::openai_completions:
            return "openai_completions";
        case api_kind::none:
            break;
    }
    return "none";
}

request_info parse_openai_request(std::string_view body) {
    request_info info;
    json root = json::parse(body.begin(), body.end(), nullptr, false);
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
    if (const json* options = member(root, "stream_options")) {
        if (const json* usage = member(*options, "include_usage");
            usage != nullptr && usage->is_boolean()) {
            info.include_usage = usage->get<bool>();
        }
    }
    if (const json* messages = member(root, "messages"); messages != nullptr && messages->is_array()) {
        for (const auto& message : *messages) {
            const json* content = member(message, "content");
            if (content != nullptr && content->is_string()) {
                info.prompt_chars += content->get_ref<const std::string&>().size();
            } else if (content != nullptr && content->is_array()) {
                for (const auto& part : *content) {
                    if (const json* text = member(part, "text"); text != nullptr && text->is_string()) {
                        info.prompt_chars += text->get_ref<const std::string&>().size();
                    }
                }
            }
        }
    }
    if (const json* prompt = member(root, "prompt"); prompt != nullptr && prompt->is_string()) {
        info.prompt_chars += prompt->get_ref<const std::string&>().size();
    }
    return info;
}

void openai_adapter::on_event(std::string_view type, std::string_view data, core::time_point at,
                              chunk_sink& sink) {
    if (type != "message" && type != "error") {
        sink.on_parse_error("unknown SSE event type");
        return;
    }
    if (data == "[DONE]") {
        sink.on_done_marker(at);
        return;
    }
    decode(data, true, at, sink);
}

void openai_adapter::on_body(std::string_view body, core::time_point at, chunk_sink& sink) {
    decode(body, false, at, sink);
}

void openai_adapter::decode(std::string_view json_text, bool streamed, core::time_point at,
                            chunk_sink& sink) {
    json root = json::parse(json_text.begin(), json_text.end(), nullptr, false);
    if (root.is_discarded() || !root.is_object()) {
        sink.on_parse_error("malformed JSON");
        return;
    }
    content_.clear();
    reasoning_.clear();
    tool_arguments_.clear();
    finish_reason_.clear();

    response_chunk chunk;
    chunk.error = member(root, "error") != nullptr;
    chunk.usage = decode_usage(root);

    bool saw_role = false;
    if (const json* choices = member(root, "choices"); choices != nullptr && choices->is_array()) {
        for (const auto& choice : *choices) {
            if (kind_ == api_kind::openai_completions) {
                append_string(member(choice, "text"), content_);
            } else {
                const json* message = member(choice, streamed ? "delta" : "message");
                if (message != nullptr) {
                    saw_role = saw_role || has_text_member(*message, "role");
                    append_string(member(*message, "content"), content_);
                    // vLLM and SGLang use reasoning_content; newer vLLM and OpenRouter use reasoning.
                    append_string(member(*message, "reasoning_content"), reasoning_);
                    append_string(member(*message, "reasoning"), reasoning_);
                    append_tool_calls(member(*message, "tool_calls"), tool_arguments_);
                    if (const json* call = member(*message, "function_call")) {
                        append_string(member(*call, "name"), tool_arguments_);
                        append_string(member(*call, "arguments"), tool_arguments_);
                    }
                }
            }
            if (const json* reason = member(choice, "finish_reason");
                reason != nullptr && reason->is_string() && finish_reason_.empty()) {
                finish_reason_ = reason->get<std::string>();
            }
        }
    } else if (!chunk.error && !chunk.usage) {
        sink.on_parse_error("JSON without choices, usage or error");
        return;
    }
    chunk.content = content_;
    chunk.reasoning = reasoning_;
    chunk.tool_arguments = tool_arguments_;
    chunk.finish_reason = finish_reason_;
    chunk.role_only = saw_role && !chunk.carries_text();
    sink.on_chunk(chunk, at);
}

}  // namespace tokenmeter::protocol
