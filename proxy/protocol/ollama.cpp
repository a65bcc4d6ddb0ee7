// protocol/ollama: Ollama's native /api/chat and /api/generate, one JSON object per NDJSON line
// when streamed (the default), one object when "stream": false.
//
// Usage merge rule: the last object ("done": true) carries prompt_eval_count (input) and
// eval_count (output) as final totals; earlier lines carry none. Ollama leaves
// prompt_eval_count out when the whole prompt came from its cache, so input stays unknown then
// rather than being taken as 0.
#include <string>

#include "protocol/chunk_builder.hpp"
#include "protocol/dialect.hpp"
#include "protocol/json_walk.hpp"

namespace tokenmeter::protocol {
namespace {

class ollama_adapter final : public adapter, private json_visitor {
  public:
    void on_event(std::string_view /*type*/, std::string_view data, core::time_point at,
                  chunk_sink& sink) override {
        decode(data, at, sink);
    }

    void on_body(std::string_view body, core::time_point at, chunk_sink& sink) override {
        decode(body, at, sink);
    }

  private:
    void decode(std::string_view text, core::time_point at, chunk_sink& sink) {
        out_ = &chunk_builder::for_thread();
        out_->reset();
        root_object_ = false;
        known_ = false;
        done_ = false;
        if (walk_json_scratch(text, *this) != walk_result::ok) {
            sink.on_parse_error(parse_error::invalid_json);
            return;
        }
        if (!root_object_ || !known_) {
            sink.on_parse_error(parse_error::unexpected_shape);
            return;
        }
        sink.on_chunk(out_->chunk(), at);
        if (done_) {
            sink.on_done_marker(at);
        }
    }

    void on_open(const json_path& path, bool object) override {
        if (path.size() == 0) {
            root_object_ = object;
        } else if (path.is({"message"})) {
            known_ = true;
        } else if (path.is({"error"})) {
            known_ = true;
            out_->error = true;
        }
    }

    void on_string(const json_path& path, std::string_view value) override {
        if (path.is({"message", "content"}) || path.is({"response"})) {
            out_->content.append(value);
            known_ = true;
        } else if (path.is({"message", "thinking"}) || path.is({"thinking"})) {
            out_->reasoning.append(value);
            known_ = true;
        } else if (path.size() >= 5 && path[0] == "message" && path[1] == "tool_calls" &&
                   path[3] == "function" && (path[4] == "name" || path[4] == "arguments")) {
            // Arguments arrive as a JSON object; its string values stand in for its text.
            out_->tool_arguments.append(value);
        } else if (path.is({"done_reason"})) {
            out_->set_finish(value);
        } else if (path.is({"model"})) {
            out_->set_model(value);
        } else if (path.is({"error"})) {
            out_->error = true;
            known_ = true;
        }
    }

    void on_bool(const json_path& path, bool value) override {
        if (path.is({"done"})) {
            known_ = true;
            done_ = value;
        }
    }

    void on_count(const json_path& path, std::uint64_t value) override {
        if (path.is({"eval_count"})) {
            out_->usage_ref().output_tokens = value;
        } else if (path.is({"prompt_eval_count"})) {
            out_->usage_ref().input_tokens = value;
        }
    }
    chunk_builder* out_ = nullptr;  // the thread's builder, taken as each event's walk starts
    bool root_object_ = false;
    bool known_ = false;
    bool done_ = false;
};

bool is_chat_path(std::string_view path) noexcept {
    return path == "/api/chat";
}

bool is_generate_path(std::string_view path) noexcept {
    return path == "/api/generate";
}

// Ollama streams unless the request says "stream": false.
request_info read_request(std::string_view /*path*/, std::string_view body) {
    return parse_json_request(body, true);
}

std::unique_ptr<adapter> make() {
    return std::make_unique<ollama_adapter>();
}

}  // namespace

extern constinit const dialect ollama_chat_dialect{
    api_kind::ollama_chat, "ollama_chat", is_chat_path, read_request, nullptr, make};
extern constinit const dialect ollama_generate_dialect{
    api_kind::ollama_generate, "ollama_generate", is_generate_path, read_request, nullptr, make};

}  // namespace tokenmeter::protocol
