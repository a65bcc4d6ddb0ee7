#include "protocol/openai.hpp"

#include <nlohmann/json.hpp>

#include "protocol/json_limits.hpp"

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

void openai_adapter::on_event(std::string_view type, std::string_view data, core::time_point at,
                              chunk_sink& sink) {
    if (type != "message" && type != "error") {
        sink.on_parse_error(parse_error::unknown_event);
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

namespace {

// Walks a chunk with nlohmann's SAX interface: no DOM is built, and only the few fields the
// meter needs are looked at. Each open object or array is a frame that knows what it is
// (a choice, a delta, usage, ...) from its parent and the key it sits under; everything else
// is `ignored`, so a "content" inside logprobs or an unknown extension is never mistaken for
// generated text.
class chunk_reader final : public nlohmann::json_sax<json> {
  public:
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

    chunk_reader(api_kind kind, bool streamed, std::string& content, std::string& reasoning,
                 std::string& tool_text, std::string& finish_reason)
        : kind_(kind),
          streamed_(streamed),
          content_(content),
          reasoning_(reasoning),
          tool_text_(tool_text),
          finish_reason_(finish_reason) {}

    bool null() override {
        value_seen(false);
        return true;
    }
    bool boolean(bool) override {
        value_seen(true);
        return true;
    }
    bool number_integer(number_integer_t value) override {
        if (value >= 0) {
            count_seen(static_cast<std::uint64_t>(value));
        } else {
            value_seen(true);
        }
        return true;
    }
    bool number_unsigned(number_unsigned_t value) override {
        count_seen(value);
        return true;
    }
    bool number_float(number_float_t value, const string_t&) override {
        if (value >= 0.0 && value < 1e18) {
            count_seen(static_cast<std::uint64_t>(value));
        } else {
            value_seen(true);
        }
        return true;
    }
    bool string(string_t& value) override {
        value_seen(true);
        if (stack_.empty()) {
            return true;
        }
        switch (stack_.back()) {
            case frame::choice:
                if (key_ == "finish_reason") {
                    if (finish_reason_.empty()) {
                        finish_reason_ = value;
                    }
                } else if (key_ == "text" && kind_ == api_kind::openai_completions) {
                    content_ += value;
                }
                break;
            case frame::message:
                if (key_ == "content") {
                    content_ += value;
                } else if (key_ == "reasoning_content" || key_ == "reasoning") {
                    // vLLM and SGLang use reasoning_content; newer vLLM and OpenRouter reasoning.
                    reasoning_ += value;
                } else if (key_ == "role") {
                    saw_role_ = true;
                }
                break;
            case frame::function:
                // The function name is generated text too; it is often the very first token.
                if (key_ == "name" || key_ == "arguments") {
                    tool_text_ += value;
                }
                break;
            default:
                break;
        }
        return true;
    }
    bool binary(binary_t&) override {
        value_seen(true);
        return true;
    }
    bool start_object(std::size_t) override {
        if (stack_.size() >= max_depth_) {
            return false;  // past limits.max_json_depth: not parsed
        }
        push(child_frame(true));
        return true;
    }
    bool key(string_t& value) override {
        key_ = value;
        return true;
    }
    bool end_object() override {
        pop();
        return true;
    }
    bool start_array(std::size_t) override {
        if (stack_.size() >= max_depth_) {
            return false;
        }
        push(child_frame(false));
        return true;
    }
    bool end_array() override {
        pop();
        return true;
    }
    bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception&) override {
        return false;
    }

    [[nodiscard]] bool root_is_object() const noexcept { return root_is_object_; }
    [[nodiscard]] bool has_choices() const noexcept { return has_choices_; }
    [[nodiscard]] bool has_error() const noexcept { return has_error_; }
    [[nodiscard]] bool saw_role() const noexcept { return saw_role_; }
    [[nodiscard]] const std::optional<token_usage>& usage() const noexcept { return usage_; }

  private:
    // The frame a new object (or array) opens, from where it sits.
    frame child_frame(bool object) {
        if (stack_.empty()) {
            root_is_object_ = object;
            return object ? frame::root : frame::ignored;
        }
        frame parent = stack_.back();
        switch (parent) {
            case frame::root:
                value_seen(true);
                if (key_ == "choices" && !object) {
                    has_choices_ = true;
                    return frame::choices;
                }
                if (key_ == "usage" && object) {
                    usage_.emplace();
                    return frame::usage;
                }
                return frame::ignored;
            case frame::choices:
                return object ? frame::choice : frame::ignored;
            case frame::choice:
                if (object && kind_ == api_kind::openai_chat_completions &&
                    key_ == (streamed_ ? "delta" : "message")) {
                    return frame::message;
                }
                return frame::ignored;
            case frame::message:
                if (!object && key_ == "tool_calls") {
                    return frame::tool_calls;
                }
                if (object && key_ == "function_call") {
                    return frame::function;
                }
                return frame::ignored;
            case frame::tool_calls:
                return object ? frame::tool_call : frame::ignored;
            case frame::tool_call:
                return object && key_ == "function" ? frame::function : frame::ignored;
            case frame::usage:
                if (object && key_ == "completion_tokens_details") {
                    return frame::completion_details;
                }
                if (object && key_ == "prompt_tokens_details") {
                    return frame::prompt_details;
                }
                return frame::ignored;
            default:
                return frame::ignored;
        }
    }

    void push(frame f) { stack_.push_back(f); }
    void pop() {
        if (!stack_.empty()) {
            stack_.pop_back();
        }
    }

    // A scalar at the root marks an error when it sits under "error" and is not null.
    void value_seen(bool non_null) {
        if (non_null && stack_.size() == 1 && stack_.back() == frame::root && key_ == "error") {
            has_error_ = true;
        }
    }

    void count_seen(std::uint64_t value) {
        value_seen(true);
        if (stack_.empty()) {
            return;
        }
        switch (stack_.back()) {
            case frame::usage:
                if (key_ == "prompt_tokens") {
                    usage_->input_tokens = value;
                } else if (key_ == "completion_tokens") {
                    usage_->output_tokens = value;
                }
                break;
            case frame::completion_details:
                if (key_ == "reasoning_tokens") {
                    usage_->reasoning_tokens = value;
                }
                break;
            case frame::prompt_details:
                if (key_ == "cached_tokens") {
                    usage_->cached_input_tokens = value;
                }
                break;
            default:
                break;
        }
    }

    api_kind kind_;
    bool streamed_;
    std::string& content_;
    std::string& reasoning_;
    std::string& tool_text_;
    std::string& finish_reason_;
    std::vector<frame> stack_;
    std::size_t max_depth_ = max_json_depth();
    std::string key_;
    std::optional<token_usage> usage_;
    bool root_is_object_ = false;
    bool has_choices_ = false;
    bool has_error_ = false;
    bool saw_role_ = false;
};

}  // namespace

void openai_adapter::decode(std::string_view json_text, bool streamed, core::time_point at,
                            chunk_sink& sink) {
    content_.clear();
    reasoning_.clear();
    tool_arguments_.clear();
    finish_reason_.clear();
    chunk_reader reader(kind_, streamed, content_, reasoning_, tool_arguments_, finish_reason_);
    bool ok = json::sax_parse(json_text.begin(), json_text.end(), &reader,
                              nlohmann::detail::input_format_t::json, true);
    if (!ok || !reader.root_is_object()) {
        sink.on_parse_error(parse_error::invalid_json);
        return;
    }

    response_chunk chunk;
    chunk.error = reader.has_error();
    chunk.usage = reader.usage();
    if (!reader.has_choices() && !chunk.error && !chunk.usage) {
        sink.on_parse_error(parse_error::unexpected_shape);
        return;
    }
    chunk.content = content_;
    chunk.reasoning = reasoning_;
    chunk.tool_arguments = tool_arguments_;
    chunk.finish_reason = finish_reason_;
    chunk.role_only = reader.saw_role() && !chunk.carries_text();
    sink.on_chunk(chunk, at);
}

}  // namespace tokenmeter::protocol
