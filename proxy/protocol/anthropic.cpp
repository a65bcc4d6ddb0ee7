// protocol/anthropic: the Anthropic Messages dialect (/v1/messages), streamed and not.
//
// Usage merge rule: message_start carries message.usage (input, cache reads and writes, and a
// placeholder output count, which is ignored); message_delta carries usage again with the
// cumulative output count (and, on newer servers, input figures). Every field is a running total,
// so the adapter keeps the latest value of each and reports the normalized totals after every
// usage-bearing event: input = input_tokens + cache_read_input_tokens + cache_creation_input_tokens
// (Anthropic's input_tokens excludes both), cached_input = cache_read_input_tokens, cache_write =
// cache_creation_input_tokens (its 1-hour part: cache_creation.ephemeral_1h_input_tokens),
// output = output_tokens.
// The meter keeps the latest report, so nothing is added twice.
#include <optional>
#include <string>

#include "protocol/chunk_builder.hpp"
#include "protocol/dialect.hpp"
#include "protocol/json_walk.hpp"

namespace tokenmeter::protocol {
namespace {

class anthropic_adapter final : public adapter, private json_visitor {
  public:
    void on_event(std::string_view type, std::string_view data, core::time_point at,
                  chunk_sink& sink) override {
        if (type == "ping") {
            return;
        }
        if (auto problem = decode(data, true)) {
            sink.on_parse_error(*problem);
            return;
        }
        // The SSE event name and the JSON "type" agree on a real server; the JSON wins when the
        // event line is missing.
        std::string_view kind = type == "message" || type.empty() ? std::string_view(type_) : type;
        if (kind == "ping" || kind == "content_block_stop") {
            return;
        }
        if (kind == "message_stop") {
            sink.on_done_marker(at);
            return;
        }
        if (kind == "error") {
            out_->error = true;
        } else if (kind != "message_start" && kind != "message_delta" &&
                   kind != "content_block_start" && kind != "content_block_delta") {
            sink.on_parse_error(parse_error::unknown_event);
            return;
        }
        emit(at, sink);
    }

    void on_body(std::string_view body, core::time_point at, chunk_sink& sink) override {
        if (auto problem = decode(body, false)) {
            sink.on_parse_error(*problem);
            return;
        }
        if (type_ == "error") {
            out_->error = true;
        } else if (type_ != "message" && !usage_seen_) {
            sink.on_parse_error(parse_error::unexpected_shape);
            return;
        }
        emit(at, sink);
    }

  private:
    // nullopt when the text is a JSON object; otherwise what is wrong with it.
    std::optional<parse_error> decode(std::string_view text, bool streamed) {
        out_ = &chunk_builder::for_thread();
        out_->reset();
        type_.clear();
        usage_seen_ = false;
        streamed_ = streamed;
        root_object_ = false;
        if (walk_json_scratch(text, *this) != walk_result::ok) {
            return parse_error::invalid_json;
        }
        if (!root_object_) {
            return parse_error::unexpected_shape;
        }
        return std::nullopt;
    }

    void emit(core::time_point at, chunk_sink& sink) {
        if (usage_seen_) {
            token_usage& usage = out_->usage_ref();
            if (input_ || cache_read_ || cache_creation_) {
                usage.input_tokens =
                    input_.value_or(0) + cache_read_.value_or(0) + cache_creation_.value_or(0);
            }
            usage.cached_input_tokens = cache_read_;
            usage.cache_write_tokens = cache_creation_;
            usage.cache_write_1h_tokens = cache_creation_1h_;
            usage.output_tokens = output_;
        }
        sink.on_chunk(out_->chunk(), at);
    }

    void on_open(const json_path& path, bool object) override {
        if (path.size() == 0) {
            root_object_ = object;
        }
    }

    void on_string(const json_path& path, std::string_view value) override {
        if (path.is({"type"})) {
            type_.assign(value);
        } else if (streamed_) {
            if (path.is({"delta", "text"}) || path.is({"content_block", "text"})) {
                out_->content.append(value);
            } else if (path.is({"delta", "thinking"}) || path.is({"content_block", "thinking"})) {
                out_->reasoning.append(value);
            } else if (path.is({"delta", "partial_json"}) || path.is({"content_block", "name"})) {
                // The tool name is generated text too, often the first token of the turn.
                out_->tool_arguments.append(value);
            } else if (path.is({"delta", "stop_reason"})) {
                out_->set_finish(value);
            } else if (path.is({"message", "model"})) {
                out_->set_model(value);  // message_start
            }
        } else if (path.size() >= 3 && path[0] == "content" && path[1] == json_path::element) {
            if (path.size() == 3 && path[2] == "text") {
                out_->content.append(value);
            } else if (path.size() == 3 && path[2] == "thinking") {
                out_->reasoning.append(value);
            } else if ((path.size() == 3 && path[2] == "name") || path[2] == "input") {
                out_->tool_arguments.append(value);
            }
        } else if (path.is({"stop_reason"})) {
            out_->set_finish(value);
        } else if (path.is({"model"})) {
            out_->set_model(value);
        }
    }

    void on_count(const json_path& path, std::uint64_t value) override {
        // message_start: message.usage; message_delta and whole bodies: usage.
        std::size_t depth = path.size();
        const std::size_t usage_at = depth >= 1 && path[0] == "message" ? 1 : 0;
        if (depth < usage_at + 2 || path[usage_at] != "usage") {
            return;
        }
        std::string_view key = path.back();
        if (depth == usage_at + 3) {
            // usage.cache_creation: the cache writes by how long they are kept.
            if (path[usage_at + 1] == "cache_creation" && key == "ephemeral_1h_input_tokens") {
                cache_creation_1h_ = value;
                usage_seen_ = true;
            }
            return;
        }
        if (depth != usage_at + 2) {
            return;
        }
        if (depth == 3 && key == "output_tokens") {
            // message_start's output count is a placeholder taken before generation (usually
            // 1); were the stream cut before message_delta, it would stand in for the real
            // count. Unknown is better: the meter then uses the tokens it counted.
            return;
        }
        if (key == "input_tokens") {
            input_ = value;
        } else if (key == "output_tokens") {
            output_ = value;
        } else if (key == "cache_read_input_tokens") {
            cache_read_ = value;
        } else if (key == "cache_creation_input_tokens") {
            cache_creation_ = value;
        } else {
            return;
        }
        usage_seen_ = true;
    }
    chunk_builder* out_ = nullptr;  // the thread's builder, taken as each event's walk starts
    std::string type_;
    bool streamed_ = true;
    bool usage_seen_ = false;
    bool root_object_ = false;
    // Latest value of each usage field over the whole response.
    std::optional<std::uint64_t> input_;
    std::optional<std::uint64_t> output_;
    std::optional<std::uint64_t> cache_read_;
    std::optional<std::uint64_t> cache_creation_;
    std::optional<std::uint64_t> cache_creation_1h_;
};

bool matches_path(std::string_view path) noexcept {
    return path == "/v1/messages";
}

request_info read_request(std::string_view /*path*/, std::string_view body) {
    return parse_json_request(body, false);
}

std::unique_ptr<adapter> make() {
    return std::make_unique<anthropic_adapter>();
}

}  // namespace

extern constinit const dialect anthropic_messages_dialect{
    api_kind::anthropic_messages, "anthropic_messages", matches_path, read_request, nullptr, make};

}  // namespace tokenmeter::protocol
