// protocol/openai: OpenAI Chat Completions and Completions: the request reader, usage injection,
// the response adapter (one json_walk pass per chunk) and the two dialect table rows.
#include "protocol/openai.hpp"

#include <algorithm>
#include <atomic>
#include <cstring>
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
                if (path[0] == "stream_options" && options_object_ &&
                    path[1] == "include_usage") {
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
    std::string prompt_items_;  // the completion prompt's texts, back to back
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

namespace {

// Inserts the member right after the opening brace: every other byte of the client's body
// reaches the server as it was written.
std::optional<std::string> insert_stream_options(std::string_view body, std::string_view option,
                                                 bool empty_object) {
    auto brace = body.find('{');
    if (brace == std::string_view::npos) {
        return std::nullopt;
    }
    std::string out;
    out.reserve(body.size() + option.size() + 1);
    out.append(body.substr(0, brace + 1));
    out.append(option);
    if (!empty_object) {
        out.push_back(',');
    }
    out.append(body.substr(brace + 1));
    return out;
}

}  // namespace

std::optional<std::string> inject_usage_request(std::string_view body, bool continuous,
                                                const request_info* parsed) {
    const std::string_view option =
        continuous ? R"("stream_options":{"include_usage":true,"continuous_usage_stats":true})"
                   : R"("stream_options":{"include_usage":true})";
    if (parsed != nullptr && parsed->body_parsed && !parsed->has_stream_options) {
        // parse_openai_request read this body: a JSON object (within the depth limit) without
        // the member, so there is nothing to parse again.
        return insert_stream_options(body, option, parsed->empty_object);
    }
    if (!json_depth_within(body, max_json_depth())) {
        return std::nullopt;
    }
    json root = json::parse(body.begin(), body.end(), nullptr, false);
    if (root.is_discarded() || !root.is_object()) {
        return std::nullopt;
    }
    if (!root.contains("stream_options")) {
        return insert_stream_options(body, option, root.empty());
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

// Off only in tests and benchmarks that compare the reader with the walk.
std::atomic<bool> chunk_reader_enabled{true};

// A key against a literal: the length first, then byte by byte over a size known at compile
// time (unrolled inline; memcmp of an odd constant size is a call for every key of every chunk).
template <std::size_t N>
bool key_is(std::string_view key, const char (&literal)[N]) noexcept {
    if (key.size() != N - 1) {
        return false;
    }
    for (std::size_t i = 0; i + 1 < N; ++i) {
        if (key[i] != literal[i]) {
            return false;
        }
    }
    return true;
}

// Where reading a later text can start when its first bytes are the same: the same bytes read
// the same way, so only the reader's position and what they meant need keeping.
enum class chunk_text_field : std::uint8_t { none, content, reasoning };
struct chunk_resume_point {
    std::size_t at = 0;  // the offset to start at; 0: from the beginning
    // none: at the first "choices" array's '['. content or reasoning: at the opening quote of a
    // delta's text value, with nothing read before it that had an effect (no text, no role, no
    // finish reason).
    chunk_text_field field = chunk_text_field::none;
    // With a text field: the bytes an earlier accepted chunk with the same bytes before `at` had
    // after that text value's closing quote, where reading them had no effect (they close the
    // delta, the choice, "choices" and the root, with nulls and the like between). A text that
    // ends with the same bytes after its value is accepted without reading them. Empty: none.
    std::string_view quiet_suffix;
};

// A streamed Chat Completions chunk of the shape servers send token after token, read in one
// pass without the general walk and its visitor calls: no whitespace, keys and strings of plain
// printable ASCII without escapes, scalars that are such strings, null, true, false or unsigned
// integers of up to 19 digits, "choices" an array of objects whose "delta" is an object of
// scalars. It fills the builder as openai_adapter's walk would, and says no (the caller then
// walks the text) at the first byte outside that shape: an escape, a non-ASCII byte, a nested
// object or array elsewhere (tool calls, logprobs, usage), an "error", anything invalid. A
// "yes" is therefore only given for texts the walk accepts with the same result
// (tests/unit/protocol/openai_test.cpp compares the two on recorded and mutated chunks).
class chat_chunk_reader {
  public:
    chat_chunk_reader(std::string_view text, chunk_builder& out) noexcept
        : begin_(text.data()), p_(text.data()), end_(text.data() + text.size()), out_(out) {}

    using text_field = chunk_text_field;
    using resume_point = chunk_resume_point;

    // On true: `choices` says whether the root held a "choices" array, `role` whether a delta
    // had a "role" string. `from`: a resume point an earlier accepted text gave (choices_at(),
    // value_at()) whose bytes before it this text repeats.
    bool read(bool& choices, bool& role, resume_point from = {}) {
        if (from.at != 0) {
            p_ += from.at;
            choices = true;
            if (from.field == text_field::none) {
                if (!peek('[') || !read_choices(role)) {
                    return false;
                }
            } else {
                if (!delta_text(from.field)) {
                    return false;
                }
                value_end_ = offset();
                effects_at_value_end_ = effect_count_;
                // The same bytes as an earlier chunk's quiet end, read the same way: accepted
                // with nothing more to add.
                if (const auto known = from.quiet_suffix;
                    !known.empty() && static_cast<std::size_t>(end_ - p_) == known.size() &&
                    std::memcmp(p_, known.data(), known.size()) == 0) {
                    p_ = end_;
                    matched_quiet_suffix_ = true;
                    return true;
                }
                if (!rest_of_choices(role)) {
                    return false;
                }
            }
        } else if (!eat('{') || peek('}') || !member(choices, role)) {
            return false;
        }
        while (eat(',')) {
            if (!member(choices, role)) {
                return false;
            }
        }
        return eat('}') && p_ == end_;
    }

    // After an accepted read from the beginning: the first "choices" array's '[' (at 0: none).
    [[nodiscard]] resume_point choices_at() const noexcept { return {choices_at_, text_field::none, {}}; }
    // After an accepted read that did not start at a text value: the first delta text value
    // with nothing of effect before it (at 0: none).
    [[nodiscard]] resume_point value_at() const noexcept { return value_at_; }
    // After an accepted read that started at a text value: where the bytes after that value
    // begin if reading them had no effect (0: they had one).
    [[nodiscard]] std::size_t quiet_suffix_at() const noexcept {
        return effect_count_ == effects_at_value_end_ ? value_end_ : 0;
    }
    // Whether the read ended by matching the quiet suffix it was given.
    [[nodiscard]] bool matched_quiet_suffix() const noexcept { return matched_quiet_suffix_; }

  private:
    [[nodiscard]] std::size_t offset() const noexcept {
        return static_cast<std::size_t>(p_ - begin_);
    }

    bool member(bool& choices, bool& role) {
        std::string_view key;
        if (!member_key(key) || key_is(key, "error")) {
            return false;
        }
        if (key_is(key, "choices") && peek('[')) {
            choices = true;
            if (choices_at_ == 0) {
                choices_at_ = offset();
            }
            return read_choices(role);
        }
        return skip_scalar();
    }

    bool read_choices(bool& role) {
        ++p_;  // '['
        if (eat(']')) {
            return true;
        }
        do {
            if (!read_choice(role)) {
                return false;
            }
        } while (eat(','));
        return eat(']');
    }

    // After a delta's text value to the end of the "choices" array: the rest of the delta, of
    // its choice, and the choices after it.
    bool rest_of_choices(bool& role) {
        while (eat(',')) {
            if (!delta_member(role)) {
                return false;
            }
        }
        if (!eat('}')) {
            return false;
        }
        while (eat(',')) {
            if (!choice_member(role)) {
                return false;
            }
        }
        if (!eat('}')) {
            return false;
        }
        while (eat(',')) {
            if (!read_choice(role)) {
                return false;
            }
        }
        return eat(']');
    }

    bool read_choice(bool& role) {
        if (!eat('{')) {
            return false;
        }
        if (eat('}')) {
            return true;
        }
        do {
            if (!choice_member(role)) {
                return false;
            }
        } while (eat(','));
        return eat('}');
    }

    bool choice_member(bool& role) {
        std::string_view key;
        if (!member_key(key)) {
            return false;
        }
        if (key_is(key, "delta") && peek('{')) {
            return read_delta(role);
        }
        if (key_is(key, "finish_reason") && peek('"')) {
            std::string_view value;
            if (!string(value)) {
                return false;
            }
            out_.set_finish(value);
            had_effect();
            return true;
        }
        return skip_scalar();
    }

    bool read_delta(bool& role) {
        ++p_;  // '{'
        if (eat('}')) {
            return true;
        }
        do {
            if (!delta_member(role)) {
                return false;
            }
        } while (eat(','));
        return eat('}');
    }

    bool delta_member(bool& role) {
        std::string_view key;
        if (!member_key(key)) {
            return false;
        }
        if (!peek('"')) {
            return skip_scalar();
        }
        text_field field = text_field::none;
        if (key_is(key, "content")) {
            field = text_field::content;
        } else if (key_is(key, "reasoning_content") || key_is(key, "reasoning")) {
            // vLLM and SGLang use reasoning_content; newer vLLM and OpenRouter reasoning.
            field = text_field::reasoning;
        }
        if (field != text_field::none) {
            if (effect_count_ == 0 && value_at_.at == 0) {
                value_at_ = {offset(), field, {}};
            }
            return delta_text(field);
        }
        std::string_view value;
        if (!string(value)) {
            return false;
        }
        if (key_is(key, "role")) {
            role = true;
            had_effect();
        }
        return true;
    }

    bool delta_text(text_field field) {
        std::string_view value;
        if (!string(value)) {
            return false;
        }
        (field == text_field::content ? out_.content : out_.reasoning).append(value);
        had_effect();
        return true;
    }

    void had_effect() noexcept { ++effect_count_; }

    [[nodiscard]] bool peek(char c) const noexcept { return p_ != end_ && *p_ == c; }
    bool eat(char c) noexcept {
        if (peek(c)) {
            ++p_;
            return true;
        }
        return false;
    }

    bool string(std::string_view& out) noexcept {
        if (!eat('"')) {
            return false;
        }
        const char* start = p_;
        p_ = detail::skip_plain_bytes(p_, end_);
        if (!peek('"')) {
            return false;
        }
        out = std::string_view(start, static_cast<std::size_t>(p_ - start));
        ++p_;
        return true;
    }

    bool member_key(std::string_view& key) noexcept { return string(key) && eat(':'); }

    bool literal(std::string_view word) noexcept {
        if (static_cast<std::size_t>(end_ - p_) < word.size() ||
            std::memcmp(p_, word.data(), word.size()) != 0) {
            return false;
        }
        p_ += word.size();
        return true;
    }

    // A value the adapter does not look at. What follows it is checked by the caller (a
    // fraction or exponent after the digits fails there).
    bool skip_scalar() noexcept {
        if (p_ == end_) {
            return false;
        }
        switch (*p_) {
            case '"': {
                std::string_view ignored;
                return string(ignored);
            }
            case 'n':
                return literal("null");
            case 't':
                return literal("true");
            case 'f':
                return literal("false");
            default:
                break;
        }
        if (*p_ == '0') {
            ++p_;
            return true;
        }
        const char* digits = p_;
        while (p_ != end_ && *p_ >= '0' && *p_ <= '9') {
            ++p_;
        }
        return p_ != digits && p_ - digits <= 19;
    }

    const char* begin_;
    const char* p_;
    const char* end_;
    chunk_builder& out_;
    std::size_t choices_at_ = 0;
    resume_point value_at_;
    // How many things read so far changed the builder or `role`.
    std::size_t effect_count_ = 0;
    // Where the text value a read resumed at ended, and how many effects there had been then.
    std::size_t value_end_ = 0;
    std::size_t effects_at_value_end_ = 0;
    bool matched_quiet_suffix_ = false;
};

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
        out_ = &chunk_builder::for_thread();
        out_->reset();
        stack_.clear();
        seen_ = {};
        streamed_ = streamed;
        bool read_by_chunk_reader = false;
        if (streamed && kind_ == api_kind::openai_chat_completions &&
            chunk_reader_enabled.load(std::memory_order_relaxed) &&
            max_json_depth() >= chat_chunk_depth) {
            bool choices = false;
            bool role = false;
            // A stream's chunks repeat the same id, object, created and model before "choices",
            // and most the same choice and delta up to the text: bytes the reader accepted
            // before are compared, not read again.
            chat_chunk_reader::resume_point from = at_value_.resume(text);
            if (from.at == 0) {
                from = at_choices_.resume(text);
            }
            chat_chunk_reader reader(text, *out_);
            if (reader.read(choices, role, from)) {
                read_by_chunk_reader = true;
                seen_.root_object = true;
                seen_.choices = choices;
                seen_.role = role;
                if (from.at == 0) {
                    at_choices_.keep(text, reader.choices_at());
                }
                if (from.field == chat_chunk_reader::text_field::none) {
                    at_value_.keep(text, reader.value_at());
                } else if (const std::size_t quiet = reader.quiet_suffix_at();
                           quiet != 0 && !reader.matched_quiet_suffix()) {
                    at_value_.keep_suffix(text.substr(quiet));
                }
            } else {
                out_->reset();  // not that shape: the walk below reads it from the start
            }
        }
        if (!seen_.root_object &&
            (walk_json_scratch(text, *this) != walk_result::ok || !seen_.root_object)) {
            sink.on_parse_error(parse_error::invalid_json);
            return;
        }
        if (!seen_.choices && !out_->error && !out_->usage) {
            sink.on_parse_error(parse_error::unexpected_shape);
            return;
        }
        response_chunk chunk = out_->chunk();
        chunk.role_only = seen_.role && !chunk.carries_text();
        chunk.ascii_text = read_by_chunk_reader;  // its strings are plain printable ASCII
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
                    out_->usage.emplace();
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
            out_->error = true;
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
                    out_->set_finish(value);
                } else if (key == "text" && kind_ == api_kind::openai_completions) {
                    out_->content.append(value);
                }
                break;
            case frame::message:
                if (key == "content") {
                    out_->content.append(value);
                } else if (key == "reasoning_content" || key == "reasoning") {
                    // vLLM and SGLang use reasoning_content; newer vLLM and OpenRouter reasoning.
                    out_->reasoning.append(value);
                } else if (key == "role") {
                    seen_.role = true;
                }
                break;
            case frame::function:
                // The function name is generated text too; it is often the very first token.
                if (key == "name" || key == "arguments") {
                    out_->tool_arguments.append(value);
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
                    out_->usage->input_tokens = value;
                } else if (key == "completion_tokens") {
                    out_->usage->output_tokens = value;
                }
                break;
            case frame::completion_details:
                if (key == "reasoning_tokens") {
                    out_->usage->reasoning_tokens = value;
                }
                break;
            case frame::prompt_details:
                if (key == "cached_tokens") {
                    out_->usage->cached_input_tokens = value;
                } else if (key == "cache_write_tokens") {
                    out_->usage->cache_write_tokens = value;
                }
                break;
            default:
                break;
        }
    }

    // The deepest the chunk reader goes: root, choices, a choice, its delta.
    static constexpr std::size_t chat_chunk_depth = 4;
    // A resume point of an accepted chunk and the bytes before it.
    class known_prefix {
      public:
        // Where `text` can be read from: the point kept if text starts with its bytes (and has
        // more), else none.
        [[nodiscard]] chat_chunk_reader::resume_point resume(std::string_view text) const noexcept {
            if (bytes_.empty() || text.size() <= bytes_.size() ||
                std::memcmp(text.data(), bytes_.data(), bytes_.size()) != 0) {
                return {};
            }
            chat_chunk_reader::resume_point point = point_;
            point.quiet_suffix = suffix_;
            return point;
        }
        void keep(std::string_view text, chat_chunk_reader::resume_point point) {
            // Servers send well under 200 bytes before the text; a longer prefix is not kept.
            if (point.at != 0 && point.at <= 512) {
                bytes_.assign(text.data(), point.at);
                point_ = point;
                suffix_.clear();  // it followed other bytes
            }
        }
        // The quiet end of a text read from this point (see chunk_resume_point::quiet_suffix).
        void keep_suffix(std::string_view suffix) {
            if (suffix.size() <= 512) {
                suffix_.assign(suffix);
            }
        }

      private:
        std::string bytes_;
        std::string suffix_;
        chat_chunk_reader::resume_point point_;
    };

    api_kind kind_;
    bool streamed_ = true;
    chunk_builder* out_ = nullptr;  // the thread's builder, taken as each event's walk starts
    // What the last chunks the reader accepted held before their "choices" array and before
    // their first delta text; empty until one is accepted.
    known_prefix at_choices_;
    known_prefix at_value_;
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

void set_openai_chunk_reader(bool enabled) noexcept {
    chunk_reader_enabled.store(enabled, std::memory_order_relaxed);
}

bool read_openai_chat_chunk(std::string_view text, chunk_builder& out, bool& choices, bool& role) {
    return chat_chunk_reader(text, out).read(choices, role);
}

extern const dialect openai_chat_dialect{api_kind::openai_chat_completions, "openai_chat",
                                         is_chat_path,  read_request,
                                         may_inject_usage, make_chat};
extern const dialect openai_completions_dialect{
    api_kind::openai_completions, "openai_completions", is_completions_path, read_request,
    may_inject_usage, make_completions};

}  // namespace tokenmeter::protocol
