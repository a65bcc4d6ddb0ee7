// protocol/openai_responses: the OpenAI Responses API (/v1/responses), streamed (typed events
// such as response.output_text.delta) and not (a response object with output items).
//
// Usage merge rule: usage comes once, in the response object of response.completed (or
// response.incomplete / response.failed), as final totals: input_tokens (cached ones included,
// also given as input_tokens_details.cached_tokens) and output_tokens (reasoning included, also
// given as output_tokens_details.reasoning_tokens). The "*.done" events repeat text already
// streamed as deltas and are not counted again.
#include <optional>
#include <string>

#include "protocol/chunk_builder.hpp"
#include "protocol/dialect.hpp"
#include "protocol/json_walk.hpp"

namespace tokenmeter::protocol {
namespace {

enum class delta_kind : std::uint8_t { none, content, reasoning, tool };

delta_kind classify_delta(std::string_view type) {
    if (type == "response.output_text.delta" || type == "response.refusal.delta") {
        return delta_kind::content;
    }
    if (type == "response.reasoning_summary_text.delta" ||
        type == "response.reasoning_text.delta") {
        return delta_kind::reasoning;
    }
    if (type == "response.function_call_arguments.delta" ||
        type == "response.custom_tool_call_input.delta" ||
        type == "response.mcp_call_arguments.delta") {
        return delta_kind::tool;
    }
    return delta_kind::none;
}

class responses_adapter final : public adapter, private json_visitor {
  public:
    void on_event(std::string_view type, std::string_view data, core::time_point at,
                  chunk_sink& sink) override {
        if (data == "[DONE]") {
            sink.on_done_marker(at);
            return;
        }
        if (auto problem = decode(data, true)) {
            sink.on_parse_error(*problem);
            return;
        }
        std::string_view kind = type_.empty() ? type : std::string_view(type_);
        if (delta_kind k = classify_delta(kind); k != delta_kind::none) {
            std::string& target = k == delta_kind::content     ? out_->content
                                  : k == delta_kind::reasoning ? out_->reasoning
                                                               : out_->tool_arguments;
            target.assign(delta_);
            sink.on_chunk(out_->chunk(), at);
            return;
        }
        if (kind == "response.completed" || kind == "response.incomplete" ||
            kind == "response.failed") {
            out_->error = kind == "response.failed";
            out_->set_finish(kind == "response.completed" ? std::string_view("stop") : status_);
            sink.on_chunk(out_->chunk(), at);
            return;
        }
        if (kind == "error") {
            out_->error = true;
            sink.on_chunk(out_->chunk(), at);
            return;
        }
        // Lifecycle events (response.created, output_item.added, *.done, ...) carry nothing to
        // meter; the API adds new ones often, so any response.* type is accepted quietly.
        if (!kind.starts_with("response.")) {
            sink.on_parse_error(parse_error::unknown_event);
        }
    }

    void on_body(std::string_view body, core::time_point at, chunk_sink& sink) override {
        if (auto problem = decode(body, false)) {
            sink.on_parse_error(*problem);
            return;
        }
        if (has_error_) {
            out_->error = true;
        } else if (!is_response_) {
            sink.on_parse_error(parse_error::unexpected_shape);
            return;
        }
        out_->set_finish(status_);
        sink.on_chunk(out_->chunk(), at);
    }

  private:
    // nullopt when the text is a JSON object; otherwise what is wrong with it.
    std::optional<parse_error> decode(std::string_view text, bool streamed) {
        out_ = &chunk_builder::for_thread();
        out_->reset();
        type_.clear();
        delta_.clear();
        status_.clear();
        part_text_.clear();
        part_type_.clear();
        streamed_ = streamed;
        root_object_ = false;
        is_response_ = false;
        has_error_ = false;
        // A streamed event's response object sits under "response"; a whole body is one.
        usage_root_ = streamed ? 1 : 0;
        if (walk_json_scratch(text, *this) != walk_result::ok) {
            return parse_error::invalid_json;
        }
        if (!root_object_) {
            return parse_error::unexpected_shape;
        }
        return std::nullopt;
    }

    [[nodiscard]] bool in_response(const json_path& path) const {
        return usage_root_ == 0 || (path.size() > 0 && path[0] == "response");
    }

    void on_open(const json_path& path, bool object) override {
        if (path.size() == 0) {
            root_object_ = object;
        }
        if (path.is({"error"}) && object) {
            has_error_ = true;
        }
    }

    void on_close(const json_path& path, bool /*object*/) override {
        // A content part of a message or reasoning item: its type says what its text is.
        if (!streamed_ && path.is({"output", json_path::element, "content", json_path::element})) {
            if (part_type_ == "reasoning_text") {
                out_->reasoning.append(part_text_);
            } else {
                out_->content.append(part_text_);
            }
            part_text_.clear();
            part_type_.clear();
        }
    }

    void on_string(const json_path& path, std::string_view value) override {
        if (path.is({"type"})) {
            type_.assign(value);
            return;
        }
        if (streamed_) {
            if (path.is({"delta"})) {
                delta_.assign(value);
            } else if (path.is({"response", "status"})) {
                status_.assign(value);
            } else if (path.is({"response", "model"})) {
                out_->set_model(value);  // reaches the meter with response.completed's chunk
            }
            return;
        }
        if (path.is({"object"})) {
            is_response_ = value == "response";
        } else if (path.is({"model"})) {
            out_->set_model(value);
        } else if (path.is({"status"})) {
            status_.assign(value);
        } else if (path.is({"output", json_path::element, "content", json_path::element, "text"}) ||
                   path.is(
                       {"output", json_path::element, "content", json_path::element, "refusal"})) {
            part_text_.append(value);
        } else if (path.is({"output", json_path::element, "content", json_path::element, "type"})) {
            part_type_.assign(value);
        } else if (path.is({"output", json_path::element, "summary", json_path::element, "text"})) {
            out_->reasoning.append(value);
        } else if (path.is({"output", json_path::element, "arguments"}) ||
                   path.is({"output", json_path::element, "name"}) ||
                   path.is({"output", json_path::element, "input"})) {
            out_->tool_arguments.append(value);
        }
    }

    void on_count(const json_path& path, std::uint64_t value) override {
        if (!in_response(path)) {
            return;
        }
        std::size_t skip = usage_root_;
        if (path.is_from(skip, {"usage", "input_tokens"})) {
            out_->usage_ref().input_tokens = value;
        } else if (path.is_from(skip, {"usage", "output_tokens"})) {
            out_->usage_ref().output_tokens = value;
        } else if (path.is_from(skip, {"usage", "input_tokens_details", "cached_tokens"})) {
            out_->usage_ref().cached_input_tokens = value;
        } else if (path.is_from(skip, {"usage", "input_tokens_details", "cache_write_tokens"})) {
            out_->usage_ref().cache_write_tokens = value;
        } else if (path.is_from(skip, {"usage", "output_tokens_details", "reasoning_tokens"})) {
            out_->usage_ref().reasoning_tokens = value;
        }
    }
    chunk_builder* out_ = nullptr;  // the thread's builder, taken as each event's walk starts
    std::string type_;
    std::string delta_;
    std::string status_;
    std::string part_text_;
    std::string part_type_;
    std::size_t usage_root_ = 1;
    bool streamed_ = true;
    bool root_object_ = false;
    bool is_response_ = false;
    bool has_error_ = false;
};

bool matches_path(std::string_view path) noexcept {
    return path == "/v1/responses";
}

request_info read_request(std::string_view /*path*/, std::string_view body) {
    return parse_json_request(body, false);
}

std::unique_ptr<adapter> make() {
    return std::make_unique<responses_adapter>();
}

}  // namespace

extern constinit const dialect openai_responses_dialect{
    api_kind::openai_responses, "openai_responses", matches_path, read_request, nullptr, make};

}  // namespace tokenmeter::protocol
