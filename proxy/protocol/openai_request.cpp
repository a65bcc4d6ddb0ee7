// protocol/openai_request: the OpenAI Chat Completions and Completions request reader: the
// one-pass walk, and the DOM reader it defers to for a body that repeats a key it reads.
#include <nlohmann/json.hpp>
#include <vector>

#include "protocol/dialect.hpp"
#include "protocol/json_limits.hpp"
#include "protocol/json_walk.hpp"
#include "protocol/openai.hpp"

namespace tokenmeter::protocol {
namespace {

using json = nlohmann::json;

const json* member(const json& object, const char* key) {
    return json_member(object, key);
}

}  // namespace

request_info parse_openai_request_dom(std::string_view body) {
    request_info info;
    if (!json_depth_within(body, max_json_depth())) {
        return info;  // forwarded as it is, not metered from the body
    }
    json root = json::parse(body.begin(), body.end(), nullptr, false);
    if (root.is_discarded() || !root.is_object()) {
        return info;
    }
    info.body_parsed = true;
    info.has_stream_options = root.contains("stream_options");
    info.empty_object = root.empty();
    read_output_limit(root, info);
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

namespace {

// The request's fields in one json_walk pass, without a DOM (the DOM's allocations and copies
// were most of a request's parse). It gives what parse_openai_request_dom gives, which the
// tests and the request fuzzer check: where the DOM keeps the last of two equal keys, the walk
// stops at the first repeat of a key it reads (`repeated`) and the DOM reads that body instead.
class request_walk final : public json_visitor {
  public:
    explicit request_walk(request_info& info) : info_(info) {}

    bool repeated = false;

    // The prompt's texts in the DOM reader's order: every message's (added as they come), then
    // the completion prompt's, wherever it stood.
    void join_texts() {
        std::size_t from = 0;
        for (const std::size_t end : prompt_ends_) {
            add(info_.prompt_text, std::string_view(prompt_items_).substr(from, end - from));
            from = end;
        }
    }

  private:
    // Keys read in one object; a second one of them is `repeated`.
    enum key_bit : std::uint8_t {
        model = 1U << 0U,
        stream = 1U << 1U,
        stream_options = 1U << 2U,
        messages = 1U << 3U,
        prompt = 1U << 4U,
        include_usage = 1U << 5U,
        content = 1U << 6U,
        text = 1U << 7U,
    };
    static void add(std::string& joined, std::string_view text) {
        if (!joined.empty()) {
            joined += '\n';
        }
        joined += text;
    }
    void mark(std::uint8_t& seen, key_bit bit) noexcept {
        repeated = repeated || (seen & bit) != 0;
        seen |= bit;
    }
    // What the value at `path` is, as far as the request reader cares; marks the keys seen.
    enum class slot : std::uint8_t {
        other,
        model,
        stream,
        stream_options,
        include_usage,
        messages,
        content,
        part_text,
        prompt,
        prompt_item
    };
    slot classify(const json_path& path) noexcept {
        switch (path.size()) {
            case 1: {
                ++root_members_;
                const std::string_view key = path[0];
                if (key == "model") {
                    mark(root_seen_, key_bit::model);
                    return slot::model;
                }
                if (key == "stream") {
                    mark(root_seen_, key_bit::stream);
                    return slot::stream;
                }
                if (key == "stream_options") {
                    mark(root_seen_, key_bit::stream_options);
                    return slot::stream_options;
                }
                if (key == "messages") {
                    mark(root_seen_, key_bit::messages);
                    return slot::messages;
                }
                if (key == "prompt") {
                    mark(root_seen_, key_bit::prompt);
                    return slot::prompt;
                }
                return slot::other;
            }
            case 2:
                if (path[0] == "stream_options" && options_object_ && path[1] == "include_usage") {
                    mark(options_seen_, key_bit::include_usage);
                    return slot::include_usage;
                }
                if (path[0] == "prompt" && prompt_array_) {
                    return slot::prompt_item;
                }
                return slot::other;
            case 3:
                if (messages_array_ && path[0] == "messages" && message_object_ &&
                    path[2] == "content") {
                    mark(message_seen_, key_bit::content);
                    return slot::content;
                }
                return slot::other;
            case 5:
                if (messages_array_ && path[0] == "messages" && content_array_ &&
                    path[2] == "content" && part_object_ && path[4] == "text") {
                    mark(part_seen_, key_bit::text);
                    return slot::part_text;
                }
                return slot::other;
            default:
                return slot::other;
        }
    }

    void on_open(const json_path& path, bool object) override {
        if (path.size() == 0) {
            info_.body_parsed = object;
            return;
        }
        const slot where = classify(path);
        switch (path.size()) {
            case 1:
                if (where == slot::stream_options) {
                    info_.has_stream_options = true;
                    options_object_ = object;
                    options_seen_ = 0;
                } else if (where == slot::messages) {
                    messages_array_ = !object;
                } else if (where == slot::prompt) {
                    prompt_array_ = !object;
                }
                break;
            case 2:
                message_object_ = object && messages_array_ && path[0] == "messages";
                message_seen_ = 0;
                break;
            case 3:
                content_array_ = where == slot::content && !object;
                break;
            case 4:
                part_object_ = object && content_array_;
                part_seen_ = 0;
                break;
            default:
                break;
        }
    }
    void on_close(const json_path& path, bool /*object*/) override {
        // Leaving a container: what it was stops mattering to the keys after it.
        switch (path.size()) {
            case 1:
                options_object_ = messages_array_ = prompt_array_ = false;
                break;
            case 2:
                message_object_ = false;
                break;
            case 3:
                content_array_ = false;
                break;
            case 4:
                part_object_ = false;
                break;
            default:
                break;
        }
    }
    void on_string(const json_path& path, std::string_view value) override {
        switch (classify(path)) {
            case slot::model:
                info_.model.assign(value);
                break;
            case slot::stream_options:
                info_.has_stream_options = true;
                break;
            case slot::content:
            case slot::part_text:
                add(info_.prompt_text, value);
                info_.prompt_chars += value.size();
                break;
            case slot::prompt:
            case slot::prompt_item:
                prompt_items_.append(value);
                prompt_ends_.push_back(prompt_items_.size());
                info_.prompt_chars += value.size();
                break;
            default:
                break;
        }
    }
    void on_bool(const json_path& path, bool value) override {
        switch (classify(path)) {
            case slot::stream:
                info_.stream = value;
                break;
            case slot::include_usage:
                info_.include_usage = value;
                break;
            case slot::stream_options:
                info_.has_stream_options = true;
                break;
            default:
                break;
        }
    }
    void scalar(const json_path& path) {
        if (classify(path) == slot::stream_options) {
            info_.has_stream_options = true;
        }
    }
    void on_other(const json_path& path) override { scalar(path); }
    void on_null(const json_path& path) override { scalar(path); }
    void on_count(const json_path& path, std::uint64_t value) override {
        if (path.size() == 1 && names_output_limit("", path[0])) {
            // The largest limit named, as read_output_limit takes it.
            info_.max_output_tokens = std::max(info_.max_output_tokens.value_or(0), value);
        }
        scalar(path);
    }
    void on_fraction(const json_path& path, double /*value*/) override { scalar(path); }

  public:
    [[nodiscard]] bool empty_root() const noexcept { return root_members_ == 0; }

  private:
    request_info& info_;
    std::string prompt_items_;              // the completion prompt's texts, back to back
    std::vector<std::size_t> prompt_ends_;  // where each ends in prompt_items_
    std::size_t root_members_ = 0;
    std::uint8_t root_seen_ = 0;
    std::uint8_t options_seen_ = 0;
    std::uint8_t message_seen_ = 0;
    std::uint8_t part_seen_ = 0;
    bool options_object_ = false;  // the root's stream_options is an object
    bool messages_array_ = false;  // the root's messages is an array
    bool message_object_ = false;  // the messages element open now is an object
    bool content_array_ = false;   // its content is an array
    bool part_object_ = false;     // the content element open now is an object
    bool prompt_array_ = false;    // the root's prompt is an array
};

}  // namespace

request_info parse_openai_request(std::string_view body) {
    request_info info;
    // No separate depth scan first: the walk stops at max_json_depth() itself (a body nested
    // deeper is forwarded as it is, not metered from the body), and the DOM reader below is
    // only given a body the walk accepted.
    thread_local json_path path;
    request_walk walk(info);
    if (walk_json(body, walk, path) != walk_result::ok || !info.body_parsed) {
        return request_info{};
    }
    if (walk.repeated) {
        return parse_openai_request_dom(body);
    }
    info.empty_object = walk.empty_root();
    walk.join_texts();
    return info;
}

}  // namespace tokenmeter::protocol
