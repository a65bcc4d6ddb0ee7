// protocol/llamacpp: llama.cpp server's native /completion (SSE data events without event
// names, or one JSON body). Its OpenAI endpoints go through the OpenAI adapter.
//
// Usage merge rule: the final object ("stop": true) carries tokens_predicted (output) and
// tokens_evaluated (input) as totals, and timings.cache_n (prompt tokens reused from the
// cache). With timings_per_token, every chunk also carries timings.predicted_n, a running
// output total; tokens_predicted wins when both are given.
#include <optional>
#include <string>

#include "protocol/chunk_builder.hpp"
#include "protocol/dialect.hpp"
#include "protocol/json_walk.hpp"

namespace tokenmeter::protocol {
namespace {

class llamacpp_adapter final : public json_document_adapter, private json_visitor {
  private:
    void decode(std::string_view text, bool /*streamed*/, core::time_point at,
                chunk_sink& sink) override {
        out_ = &chunk_builder::for_thread();
        out_->reset();
        root_object_ = false;
        known_ = false;
        stop_ = false;
        predicted_.reset();
        predicted_n_.reset();
        if (walk_json_scratch(text, *this) != walk_result::ok) {
            sink.on_parse_error(parse_error::invalid_json);
            return;
        }
        if (!root_object_ || !known_) {
            sink.on_parse_error(parse_error::unexpected_shape);
            return;
        }
        if (auto output = predicted_ ? predicted_ : predicted_n_) {
            out_->usage_ref().output_tokens = output;
        }
        sink.on_chunk(out_->chunk(), at);
    }

    void on_open(const json_path& path, bool object) override {
        if (path.size() == 0) {
            root_object_ = object;
        } else if (path.is({"error"})) {
            out_->error = true;
            known_ = true;
        }
    }

    void on_string(const json_path& path, std::string_view value) override {
        if (path.is({"content"})) {
            out_->content.append(value);
            known_ = true;
        } else if (path.is({"stop_type"})) {
            out_->set_finish(value);
        } else if (path.is({"model"})) {
            out_->set_model(value);
        }
    }

    void on_bool(const json_path& path, bool value) override {
        if (path.is({"stop"})) {
            known_ = true;
            stop_ = value;
        }
    }

    void on_count(const json_path& path, std::uint64_t value) override {
        if (path.is({"tokens_predicted"})) {
            predicted_ = value;
        } else if (path.is({"tokens_evaluated"})) {
            out_->usage_ref().input_tokens = value;
        } else if (path.is({"timings", "predicted_n"})) {
            predicted_n_ = value;
        } else if (path.is({"timings", "cache_n"})) {
            out_->usage_ref().cached_input_tokens = value;
        }
    }
    chunk_builder* out_ = nullptr;  // the thread's builder, taken as each event's walk starts
    std::optional<std::uint64_t> predicted_;
    std::optional<std::uint64_t> predicted_n_;
    bool root_object_ = false;
    bool known_ = false;
    bool stop_ = false;
};

// llama.cpp's native endpoint and its alias (not to be confused with /v1/completions).
bool matches_path(std::string_view path) noexcept {
    return path == "/completion" || path == "/completions";
}

request_info read_request(std::string_view /*path*/, std::string_view body) {
    return parse_json_request(body, false);
}

std::unique_ptr<adapter> make() {
    return std::make_unique<llamacpp_adapter>();
}

}  // namespace

extern constinit const dialect llamacpp_completion_dialect{api_kind::llamacpp_completion,
                                                           "llamacpp_completion",
                                                           matches_path,
                                                           read_request,
                                                           nullptr,
                                                           make};

}  // namespace tokenmeter::protocol
