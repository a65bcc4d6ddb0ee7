// protocol/openai: OpenAI Chat Completions and Completions: the request reader, usage injection,
// the response adapter (one json_walk pass per chunk) and the two dialect table rows.
#include "protocol/openai.hpp"

#include <nlohmann/json.hpp>
#include <vector>

#include "protocol/chunk_builder.hpp"
#include "protocol/dialect.hpp"
#include "protocol/dialects.hpp"
#include "protocol/json_limits.hpp"
#include "protocol/json_walk.hpp"

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

}  // namespace

request_info parse_openai_request(std::string_view body) {
    request_info info;
    if (!json_depth_within(body, max_json_depth())) {
        return info;  // forwarded as it is, not metered from the body
    }
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
    auto add_text = [&info](const std::string& text) {
        if (!info.prompt_text.empty()) {
            info.prompt_text += '\n';
        }
        info.prompt_text += text;
        info.prompt_chars += text.size();
    };
    if (const json* messages = member(root, "messages");
        messages != nullptr && messages->is_array()) {
        for (const auto& message : *messages) {
            const json* content = member(message, "content");
            if (content != nullptr && content->is_string()) {
                add_text(content->get_ref<const std::string&>());
            } else if (content != nullptr && content->is_array()) {
                for (const auto& part : *content) {
                    if (const json* text = member(part, "text");
                        text != nullptr && text->is_string()) {
                        add_text(text->get_ref<const std::string&>());
                    }
                }
            }
        }
    }
    if (const json* prompt = member(root, "prompt")) {
        if (prompt->is_string()) {
            add_text(prompt->get_ref<const std::string&>());
        } else if (prompt->is_array()) {
            for (const auto& item : *prompt) {
                if (item.is_string()) {
                    add_text(item.get_ref<const std::string&>());
                }
            }
        }
    }
    return info;
}

std::optional<std::string> inject_usage_request(std::string_view body, bool continuous) {
    if (!json_depth_within(body, max_json_depth())) {
        return std::nullopt;
    }
    json root = json::parse(body.begin(), body.end(), nullptr, false);
    if (root.is_discarded() || !root.is_object()) {
        return std::nullopt;
    }
    const std::string_view option =
        continuous ? R"("stream_options":{"include_usage":true,"continuous_usage_stats":true})"
                   : R"("stream_options":{"include_usage":true})";
    if (!root.contains("stream_options")) {
        // Insert the member right after the opening brace: every other byte of the client's
        // body reaches the server as it was written.
        auto brace = body.find('{');
        if (brace == std::string_view::npos) {
            return std::nullopt;
        }
        std::string out;
        out.reserve(body.size() + option.size() + 1);
        out.append(body.substr(0, brace + 1));
        out.append(option);
        if (!root.empty()) {
            out.push_back(',');
        }
        out.append(body.substr(brace + 1));
        return out;
    }
    // stream_options is there but does not ask for usage: re-serialize (keys keep their order
    // only as far as the JSON library keeps it; this case is rare).
    json& options = root["stream_options"];
    if (!options.is_object()) {
        options = json::object();
    }
    options["include_usage"] = true;
    if (continuous) {
        options["continuous_usage_stats"] = true;
    }
    return root.dump();
}

namespace {

// One chunk (or a whole body) walked once. Each open object or array is a frame that knows what
// it is (a choice, a delta, usage, ...) from its parent and the key it sits under; everything
// else is `ignored`, so a "content" inside logprobs or an unknown extension is never mistaken
// for generated text.
class openai_adapter final : public json_document_adapter, private json_visitor {
  public:
    explicit openai_adapter(api_kind kind) noexcept : json_document_adapter(true), kind_(kind) {}

  private:
    enum class frame : std::uint8_t {
        root,
        choices,
        choice,
        message,  // "delta" when streamed, "message" when not
        tool_calls,
        tool_call,
        function,  // tool_calls[].function or the legacy function_call
        usage,
        completion_details,
        prompt_details,
        ignored,
    };

    void decode(std::string_view text, bool streamed, core::time_point at,
                chunk_sink& sink) override {
        out_.reset();
        stack_.clear();
        seen_ = {};
        streamed_ = streamed;
        if (walk_json(text, *this, path_) != walk_result::ok || !seen_.root_object) {
            sink.on_parse_error(parse_error::invalid_json);
            return;
        }
        if (!seen_.choices && !out_.error && !out_.usage) {
            sink.on_parse_error(parse_error::unexpected_shape);
            return;
        }
        response_chunk chunk = out_.chunk();
        chunk.role_only = seen_.role && !chunk.carries_text();
        sink.on_chunk(chunk, at);
    }

    void on_open(const json_path& path, bool object) override {
        stack_.push_back(child_frame(path, object));
    }
    void on_close(const json_path& /*path*/, bool /*object*/) override { stack_.pop_back(); }

    // The frame a new object (or array) opens, from where it sits.
    frame child_frame(const json_path& path, bool object) {
        if (stack_.empty()) {
            seen_.root_object = object;
            return object ? frame::root : frame::ignored;
        }
        // The key it sits under; an element's "[]" only where the parent is an array, and no
        // array parent looks at it.
        std::string_view key = path.back();
        switch (stack_.back()) {
            case frame::root:
                value_seen(path, true);
                if (key == "choices" && !object) {
                    seen_.choices = true;
                    return frame::choices;
                }
                if (key == "usage" && object) {
                    out_.usage.emplace();
                    return frame::usage;
                }
                return frame::ignored;
            case frame::choices:
                return object ? frame::choice : frame::ignored;
            case frame::choice:
                if (object && kind_ == api_kind::openai_chat_completions &&
                    key == (streamed_ ? "delta" : "message")) {
                    return frame::message;
                }
                return frame::ignored;
            case frame::message:
                if (!object && key == "tool_calls") {
                    return frame::tool_calls;
                }
                if (object && key == "function_call") {
                    return frame::function;
                }
                return frame::ignored;
            case frame::tool_calls:
                return object ? frame::tool_call : frame::ignored;
            case frame::tool_call:
                return object && key == "function" ? frame::function : frame::ignored;
            case frame::usage:
                if (object && key == "completion_tokens_details") {
                    return frame::completion_details;
                }
                if (object && key == "prompt_tokens_details") {
                    return frame::prompt_details;
                }
                return frame::ignored;
            default:
                return frame::ignored;
        }
    }

    // A value directly under the root's "error" marks an error unless it is null.
    void value_seen(const json_path& path, bool non_null) {
        if (non_null && stack_.size() == 1 && stack_.back() == frame::root &&
            path.back() == "error") {
            out_.error = true;
        }
    }

    void on_null(const json_path& path) override { value_seen(path, false); }
    void on_other(const json_path& path) override { value_seen(path, true); }
    void on_bool(const json_path& path, bool /*value*/) override { value_seen(path, true); }
    void on_count(const json_path& path, std::uint64_t value) override { count_seen(path, value); }
    void on_fraction(const json_path& path, double value) override {
        count_seen(path, static_cast<std::uint64_t>(value));
    }

    void on_string(const json_path& path, std::string_view value) override {
        value_seen(path, true);
        if (stack_.empty()) {
            return;
        }
        std::string_view key = path.back();
        switch (stack_.back()) {
            case frame::choice:
                if (key == "finish_reason") {
                    out_.set_finish(value);
                } else if (key == "text" && kind_ == api_kind::openai_completions) {
                    out_.content.append(value);
                }
                break;
            case frame::message:
                if (key == "content") {
                    out_.content.append(value);
                } else if (key == "reasoning_content" || key == "reasoning") {
                    // vLLM and SGLang use reasoning_content; newer vLLM and OpenRouter reasoning.
                    out_.reasoning.append(value);
                } else if (key == "role") {
                    seen_.role = true;
                }
                break;
            case frame::function:
                // The function name is generated text too; it is often the very first token.
                if (key == "name" || key == "arguments") {
                    out_.tool_arguments.append(value);
                }
                break;
            default:
                break;
        }
    }

    void count_seen(const json_path& path, std::uint64_t value) {
        value_seen(path, true);
        if (stack_.empty()) {
            return;
        }
        std::string_view key = path.back();
        switch (stack_.back()) {
            case frame::usage:
                if (key == "prompt_tokens") {
                    out_.usage->input_tokens = value;
                } else if (key == "completion_tokens") {
                    out_.usage->output_tokens = value;
                }
                break;
            case frame::completion_details:
                if (key == "reasoning_tokens") {
                    out_.usage->reasoning_tokens = value;
                }
                break;
            case frame::prompt_details:
                if (key == "cached_tokens") {
                    out_.usage->cached_input_tokens = value;
                }
                break;
            default:
                break;
        }
    }

    api_kind kind_;
    bool streamed_ = true;
    json_path path_;
    chunk_builder out_;  // buffers reused from chunk to chunk
    std::vector<frame> stack_;
    // What the walk of one chunk found besides text and usage; reset by assignment.
    struct {
        bool root_object = false;
        bool choices = false;  // a "choices" array at the root
        bool role = false;     // a delta's "role"
    } seen_;
};

// OpenAI's paths, also served by vLLM, SGLang, TGI, llama.cpp and Ollama; llama.cpp also serves
// chat without the /v1 prefix.
bool is_chat_path(std::string_view path) noexcept {
    return path == "/v1/chat/completions" || path == "/chat/completions";
}

bool is_completions_path(std::string_view path) noexcept {
    return path == "/v1/completions";
}

request_info read_request(std::string_view /*path*/, std::string_view body) {
    return parse_openai_request(body);
}

// Streamed and not already asking for usage: the proxy may ask for it (stream_options).
bool may_inject_usage(const request_info& info) noexcept {
    return info.body_parsed && info.stream && !info.include_usage;
}

std::unique_ptr<adapter> make_chat() {
    return std::make_unique<openai_adapter>(api_kind::openai_chat_completions);
}

std::unique_ptr<adapter> make_completions() {
    return std::make_unique<openai_adapter>(api_kind::openai_completions);
}

}  // namespace

extern const dialect openai_chat_dialect{api_kind::openai_chat_completions, "openai_chat",
                                         is_chat_path,  read_request,
                                         may_inject_usage, make_chat};
extern const dialect openai_completions_dialect{
    api_kind::openai_completions, "openai_completions", is_completions_path, read_request,
    may_inject_usage, make_completions};

}  // namespace tokenmeter::protocol
