// protocol/gemini: Google Gemini's :streamGenerateContent?alt=sse (SSE data events) and
// :generateContent (one JSON body; :streamGenerateContent without alt=sse answers a JSON array
// of the same objects, decoded element by element).
//
// Usage merge rule: usageMetadata comes with every streamed chunk as running totals
// (promptTokenCount, candidatesTokenCount, thoughtsTokenCount, cachedContentTokenCount,
// toolUsePromptTokenCount). Gemini's candidatesTokenCount leaves the thinking out, so
// output = candidates + thoughts and reasoning = thoughts; its promptTokenCount leaves the tool
// results' prompt out, so input = prompt + toolUsePrompt; cached = cachedContent (a part of the
// prompt). Reports are totals: the meter keeps the latest and takes the per-chunk
// difference of the output total as the tokens that chunk carried.
#include <optional>
#include <string>

#include "protocol/chunk_builder.hpp"
#include "protocol/dialect.hpp"
#include "protocol/json_walk.hpp"

namespace tokenmeter::protocol {
namespace {

class gemini_adapter final : public json_document_adapter, private json_visitor {
  private:
    void decode(std::string_view text, bool /*streamed*/, core::time_point at,
                chunk_sink& sink) override {
        sink_ = &sink;
        at_ = at;
        root_ = root_kind::other;
        emitted_ = 0;
        reset_element();
        auto result = walk_json_scratch(text, *this);
        sink_ = nullptr;
        if (result != walk_result::ok) {
            sink.on_parse_error(parse_error::invalid_json);
            return;
        }
        if (root_ == root_kind::other) {
            sink.on_parse_error(parse_error::unexpected_shape);
            return;
        }
        if (root_ == root_kind::object) {
            finish_element(sink);
        } else if (emitted_ == 0) {
            sink.on_parse_error(parse_error::unexpected_shape);
        }
    }

    void reset_element() {
        out_ = &chunk_builder::for_thread();
        out_->reset();
        part_text_.clear();
        thought_ = false;
        known_ = false;
        candidates_.reset();
        thoughts_.reset();
        prompt_.reset();
        tool_use_prompt_.reset();
    }

    void finish_element(chunk_sink& sink) {
        if (!known_) {
            sink.on_parse_error(parse_error::unexpected_shape);
            return;
        }
        if (candidates_ || thoughts_) {
            out_->usage_ref().output_tokens = candidates_.value_or(0) + thoughts_.value_or(0);
            out_->usage_ref().reasoning_tokens = thoughts_;
        }
        if (prompt_ || tool_use_prompt_) {
            out_->usage_ref().input_tokens = prompt_.value_or(0) + tool_use_prompt_.value_or(0);
        }
        emitted_ += 1;
        sink.on_chunk(out_->chunk(), at_);
    }

    [[nodiscard]] std::size_t skip() const { return root_ == root_kind::array ? 1 : 0; }

    [[nodiscard]] bool is_part(const json_path& path) const {
        return path.is_from(
            skip(), {"candidates", json_path::element, "content", "parts", json_path::element});
    }

    void on_open(const json_path& path, bool object) override {
        if (path.size() == 0) {
            root_ = object ? root_kind::object : root_kind::array;
            return;
        }
        if (root_ == root_kind::array && path.size() == 1) {
            reset_element();
            return;
        }
        std::size_t s = skip();
        if (path.is_from(s, {"candidates"}) || path.is_from(s, {"usageMetadata"})) {
            known_ = true;
        } else if (path.is_from(s, {"error"})) {
            known_ = true;
            out_->error = true;
        }
    }

    void on_close(const json_path& path, bool /*object*/) override {
        if (root_ == root_kind::array && path.size() == 1) {
            if (sink_ != nullptr) {
                finish_element(*sink_);
            }
            return;
        }
        if (is_part(path)) {
            // "thought": true may come before or after the text it marks.
            (thought_ ? out_->reasoning : out_->content).append(part_text_);
            part_text_.clear();
            thought_ = false;
        }
    }

    void on_string(const json_path& path, std::string_view value) override {
        std::size_t s = skip();
        if (path.is_from(s, {"candidates", json_path::element, "content", "parts",
                             json_path::element, "text"})) {
            part_text_.append(value);
        } else if (path.size() > s + 6 && path[s] == "candidates" && path[s + 2] == "content" &&
                   path[s + 3] == "parts" && path[s + 5] == "functionCall" &&
                   (path[s + 6] == "name" || path[s + 6] == "args")) {
            // The call's name and its argument values stand in for the generated call text.
            out_->tool_arguments.append(value);
        } else if (path.is_from(s, {"candidates", json_path::element, "finishReason"})) {
            out_->set_finish(value);
        } else if (path.is_from(s, {"modelVersion"})) {
            out_->set_model(value);
        }
    }

    void on_bool(const json_path& path, bool value) override {
        std::size_t s = skip();
        if (path.is_from(s, {"candidates", json_path::element, "content", "parts",
                             json_path::element, "thought"})) {
            thought_ = value;
        }
    }

    void on_count(const json_path& path, std::uint64_t value) override {
        std::size_t s = skip();
        if (path.size() != s + 2 || path[s] != "usageMetadata") {
            return;
        }
        std::string_view key = path.back();
        if (key == "promptTokenCount") {
            prompt_ = value;
        } else if (key == "toolUsePromptTokenCount") {
            tool_use_prompt_ = value;
        } else if (key == "candidatesTokenCount") {
            candidates_ = value;
        } else if (key == "thoughtsTokenCount") {
            thoughts_ = value;
        } else if (key == "cachedContentTokenCount") {
            out_->usage_ref().cached_input_tokens = value;
        }
    }

    enum class root_kind : std::uint8_t { other, object, array };
    chunk_builder* out_ = nullptr;  // the thread's builder, taken as each event's walk starts
    std::string part_text_;
    std::optional<std::uint64_t> candidates_;
    std::optional<std::uint64_t> thoughts_;
    std::optional<std::uint64_t> prompt_;
    std::optional<std::uint64_t> tool_use_prompt_;
    chunk_sink* sink_ = nullptr;
    core::time_point at_{};
    std::size_t emitted_ = 0;
    root_kind root_ = root_kind::other;
    bool thought_ = false;
    bool known_ = false;
};

// Gemini's method suffix: "…/models/<model>:streamGenerateContent" (also under Vertex's
// projects/…/publishers/google/models/). Returns the model and whether it streams.
struct gemini_target {
    std::string_view model;
    bool stream = false;
};
std::optional<gemini_target> parse_gemini_path(std::string_view path) noexcept {
    constexpr std::string_view stream_method = ":streamGenerateContent";
    constexpr std::string_view method = ":generateContent";
    gemini_target out;
    std::string_view rest;
    if (path.ends_with(stream_method)) {
        out.stream = true;
        rest = path.substr(0, path.size() - stream_method.size());
    } else if (path.ends_with(method)) {
        rest = path.substr(0, path.size() - method.size());
    } else {
        return std::nullopt;
    }
    auto models = rest.rfind("/models/");
    if (models == std::string_view::npos) {
        return std::nullopt;
    }
    out.model = rest.substr(models + 8);
    if (out.model.empty() || out.model.find('/') != std::string_view::npos) {
        return std::nullopt;
    }
    return out;
}

bool matches_path(std::string_view path) noexcept {
    return parse_gemini_path(path).has_value();
}

// Gemini names the model and streaming in the path.
request_info read_request(std::string_view path, std::string_view body) {
    request_info info = parse_json_request(body, false);
    if (auto gemini = parse_gemini_path(path)) {
        info.stream = gemini->stream;
        if (info.model.empty()) {
            info.model = std::string(gemini->model);
        }
    }
    return info;
}

std::unique_ptr<adapter> make() {
    return std::make_unique<gemini_adapter>();
}

}  // namespace

extern constinit const dialect gemini_generate_dialect{
    api_kind::gemini_generate, "gemini_generate", matches_path, read_request, nullptr, make};

}  // namespace tokenmeter::protocol
