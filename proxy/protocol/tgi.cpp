// protocol/tgi: Hugging Face Text Generation Inference's native /generate_stream (SSE, one token
// object per event) and /generate (one JSON body).
//
// Usage merge rule: the last streamed event carries details.generated_tokens (output) and, on
// TGI 2+, details.input_length (input) as final totals. Special tokens (EOS) are generated
// tokens but not text, so they appear in generated_tokens and not in the content. The last
// event's generated_text repeats the whole text and is not counted again.
#include <string>

#include "protocol/chunk_builder.hpp"
#include "protocol/dialect.hpp"
#include "protocol/json_walk.hpp"

namespace tokenmeter::protocol {
namespace {

class tgi_adapter final : public json_document_adapter, private json_visitor {
  private:
    void decode(std::string_view text, bool streamed, core::time_point at,
                chunk_sink& sink) override {
        out_ = &chunk_builder::for_thread();
        out_->reset();
        token_text_.clear();
        special_ = false;
        known_ = false;
        streamed_ = streamed;
        root_ = root_kind::other;
        auto result = walk_json_scratch(text, *this);
        if (result != walk_result::ok) {
            sink.on_parse_error(parse_error::invalid_json);
            return;
        }
        if (root_ == root_kind::other || !known_) {
            sink.on_parse_error(parse_error::unexpected_shape);
            return;
        }
        if (!special_) {
            out_->content.append(token_text_);
        }
        sink.on_chunk(out_->chunk(), at);
    }

    // /generate answers an object, or an array of them for a batched request.
    [[nodiscard]] std::size_t skip() const { return root_ == root_kind::array ? 1 : 0; }

    void on_open(const json_path& path, bool object) override {
        if (path.size() == 0) {
            root_ = object ? root_kind::object : root_kind::array;
        } else if (path.is_from(skip(), {"token"}) || path.is_from(skip(), {"details"})) {
            known_ = true;
        }
    }

    void on_string(const json_path& path, std::string_view value) override {
        std::size_t s = skip();
        if (path.is_from(s, {"token", "text"})) {
            token_text_.append(value);
        } else if (!streamed_ && path.is_from(s, {"generated_text"})) {
            out_->content.append(value);
            known_ = true;
        } else if (path.is_from(s, {"details", "finish_reason"})) {
            out_->set_finish(value);
        } else if (path.is_from(s, {"error"})) {
            out_->error = true;
            known_ = true;
        }
    }

    void on_bool(const json_path& path, bool value) override {
        if (path.is_from(skip(), {"token", "special"})) {
            special_ = value;
        }
    }

    void on_count(const json_path& path, std::uint64_t value) override {
        std::size_t s = skip();
        if (path.is_from(s, {"details", "generated_tokens"})) {
            auto& usage = out_->usage_ref();
            usage.output_tokens = usage.output_tokens.value_or(0) + value;
        } else if (path.is_from(s, {"details", "input_length"})) {
            auto& usage = out_->usage_ref();
            usage.input_tokens = usage.input_tokens.value_or(0) + value;
        }
    }

    enum class root_kind : std::uint8_t { other, object, array };
    chunk_builder* out_ = nullptr;  // the thread's builder, taken as each event's walk starts
    std::string token_text_;
    root_kind root_ = root_kind::other;
    bool special_ = false;
    bool known_ = false;
    bool streamed_ = true;
};

bool matches_path(std::string_view path) noexcept {
    return path == "/generate" || path == "/generate_stream";
}

// TGI streams by path, whatever the body says.
request_info read_request(std::string_view path, std::string_view body) {
    request_info info = parse_json_request(body, false);
    info.stream = path.ends_with("_stream");
    return info;
}

std::unique_ptr<adapter> make() {
    return std::make_unique<tgi_adapter>();
}

}  // namespace

extern constinit const dialect tgi_generate_dialect{
    api_kind::tgi_generate, "tgi_generate", matches_path, read_request, nullptr, make};

}  // namespace tokenmeter::protocol
