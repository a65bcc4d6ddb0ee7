// protocol/audio: OpenAI audio transcriptions and translations (also spoken by vLLM). The
// request is a multipart/form-data upload, forwarded untouched: only its small form fields are
// read (model, stream), the file is skipped over. The answer is one JSON body ({"text", "usage"})
// or, with stream=true, SSE events: OpenAI's transcript.text.delta / transcript.text.done, or
// vLLM's chat-completion-like chunks (choices[].delta.content, a final usage).
//
// Usage rule: usage.input_tokens / output_tokens (OpenAI's "type": "tokens"), else
// prompt_tokens / completion_tokens (vLLM); usage.input_token_details.audio_tokens is the audio
// part of the input. A usage of "type": "duration" carries no token count: its seconds of audio
// are kept (token_usage::audio_seconds). The audio is not text: without a report the input is
// unknown, never a count of 0.
#include <cmath>
#include <optional>
#include <string>

#include "protocol/chunk_builder.hpp"
#include "protocol/dialect.hpp"
#include "protocol/json_walk.hpp"

namespace tokenmeter::protocol {
namespace {

// The longest boundary RFC 2046 allows is 70 characters; a form field the reader keeps is cut
// at this many bytes (a model name longer than that is cut in the record anyway).
constexpr std::size_t max_boundary = 70;
constexpr std::size_t max_field_value = 1024;

bool equals_ignoring_case(std::string_view a, std::string_view b) noexcept {
    if (a.size() != b.size()) {
        return false;
    }
    for (std::size_t i = 0; i < a.size(); ++i) {
        const auto lower = [](char c) {
            return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c;
        };
        if (lower(a[i]) != lower(b[i])) {
            return false;
        }
    }
    return true;
}

// The name="..." of a part's Content-Disposition header, from the part's header block.
std::optional<std::string_view> form_field_name(std::string_view headers) {
    while (!headers.empty()) {
        const std::size_t end = headers.find("\r\n");
        const std::string_view line = headers.substr(0, end);
        headers = end == std::string_view::npos ? std::string_view{} : headers.substr(end + 2);
        const std::size_t colon = line.find(':');
        if (colon == std::string_view::npos ||
            !equals_ignoring_case(line.substr(0, colon), "content-disposition")) {
            continue;
        }
        const std::string_view value = line.substr(colon + 1);
        // ` name=` and not `filename=`: the parameter is preceded by ';' and optional spaces.
        for (std::size_t at = value.find("name=\""); at != std::string_view::npos;
             at = value.find("name=\"", at + 1)) {
            std::size_t before = at;
            while (before > 0 && value[before - 1] == ' ') {
                --before;
            }
            if (before > 0 && value[before - 1] != ';') {
                continue;
            }
            const std::size_t from = at + 6;
            const std::size_t quote = value.find('"', from);
            if (quote == std::string_view::npos) {
                return std::nullopt;
            }
            return value.substr(from, quote - from);
        }
        return std::nullopt;
    }
    return std::nullopt;
}

// The form fields of a multipart/form-data body. The boundary is the body's first line (the
// request's Content-Type names the same one; a body that does not open with it is not read).
// body_parsed: the parts run from the first boundary to the closing one.
request_info read_request(std::string_view /*path*/, std::string_view body) {
    request_info info;
    info.countable_input = false;
    if (!body.starts_with("--")) {
        return info;
    }
    const std::size_t line_end = body.find("\r\n");
    if (line_end == std::string_view::npos || line_end < 3 || line_end - 2 > max_boundary) {
        return info;
    }
    std::string delimiter = "\r\n";
    delimiter.append(body.substr(0, line_end));
    std::size_t at = line_end + 2;  // after the first boundary line
    while (true) {
        const std::size_t headers_end = body.find("\r\n\r\n", at);
        if (headers_end == std::string_view::npos) {
            return info;
        }
        const std::string_view headers = body.substr(at, headers_end - at);
        const std::size_t content_from = headers_end + 4;
        const std::size_t next = body.find(delimiter, content_from);
        if (next == std::string_view::npos) {
            return info;
        }
        const std::string_view content = body.substr(content_from, next - content_from);
        if (auto name = form_field_name(headers)) {
            const std::string_view value = content.substr(0, max_field_value);
            if (*name == "model") {
                info.model.assign(value);
            } else if (*name == "stream") {
                info.stream = value == "true";
            }
        }
        at = next + delimiter.size();
        if (body.substr(at).starts_with("--")) {
            info.body_parsed = true;
            return info;
        }
        if (!body.substr(at).starts_with("\r\n")) {
            return info;
        }
        at += 2;
    }
}

class audio_adapter final : public json_document_adapter, private json_visitor {
  public:
    audio_adapter() noexcept : json_document_adapter(true) {}

  private:
    void decode(std::string_view text, bool streamed, core::time_point at,
                chunk_sink& sink) override {
        out_ = &chunk_builder::for_thread();
        out_->reset();
        streamed_ = streamed;
        seen_ = {};
        delta_.clear();
        const walk_result walked = walk_json_scratch(text, *this);
        if (walked != walk_result::ok || !seen_.root_object || !seen_.known) {
            sink.on_parse_error(walked != walk_result::ok ? parse_error::invalid_json
                                                          : parse_error::unexpected_shape);
            return;
        }
        if (seen_.delta_event) {
            out_->content.append(delta_);
        }
        if (seen_.input) {
            out_->usage_ref().input_tokens = seen_.input;
        }
        if (seen_.output) {
            out_->usage_ref().output_tokens = seen_.output;
        }
        if (seen_.input_audio) {
            out_->usage_ref().input_audio_tokens = seen_.input_audio;
        }
        if (seen_.seconds && seen_.duration) {
            out_->usage_ref().audio_seconds = seen_.seconds;
        }
        sink.on_chunk(out_->chunk(), at);
    }

    void on_open(const json_path& path, bool object) override {
        if (path.size() == 0) {
            seen_.root_object = object;
        } else if (path.is({"error"})) {
            out_->error = true;
            seen_.known = true;
        } else if (path.is({"usage"}) || path.is({"choices"})) {
            seen_.known = true;
        }
    }

    void on_string(const json_path& path, std::string_view value) override {
        if (path.is({"usage", "type"})) {
            seen_.duration = value == "duration";
        } else if (path.is({"type"})) {
            seen_.known = seen_.known || value.starts_with("transcript.text.");
            seen_.delta_event = value == "transcript.text.delta";
            if (value == "error") {
                out_->error = true;
                seen_.known = true;
            }
        } else if (path.is({"delta"})) {
            // OpenAI's delta event: {"type": "transcript.text.delta", "delta": "..."}, in either
            // order (a done event's "text" repeats the whole transcript and is not new text).
            delta_.assign(value);
        } else if (path.is({"text"}) && !streamed_) {
            out_->content.append(value);
            seen_.known = true;
        } else if (path.is({"choices", json_path::element, "delta", "content"})) {
            out_->content.append(value);
        }
    }

    void on_count(const json_path& path, std::uint64_t value) override {
        if (path.is({"usage", "input_tokens"}) || path.is({"usage", "prompt_tokens"})) {
            seen_.input = value;
        } else if (path.is({"usage", "output_tokens"}) || path.is({"usage", "completion_tokens"})) {
            seen_.output = value;
        } else if (path.is({"usage", "input_token_details", "audio_tokens"})) {
            seen_.input_audio = value;
        } else if (path.is({"usage", "seconds"})) {
            seen_.seconds = static_cast<double>(value);
        }
    }

    void on_fraction(const json_path& path, double value) override {
        // Seconds of audio are the one fractional usage figure; a negative or non-finite one
        // (Python's json writes Infinity) is no figure at all.
        if (path.is({"usage", "seconds"}) && std::isfinite(value) && value >= 0.0) {
            seen_.seconds = value;
        }
    }

    struct findings {
        std::optional<std::uint64_t> input;
        std::optional<std::uint64_t> output;
        std::optional<std::uint64_t> input_audio;
        std::optional<double> seconds;
        bool duration = false;  // usage of "type": "duration"
        bool root_object = false;
        bool known = false;
        bool delta_event = false;
    };

    chunk_builder* out_ = nullptr;  // the thread's builder, taken as each event's walk starts
    findings seen_;
    bool streamed_ = false;
    std::string delta_;  // the event's "delta", text only when its type says so
};

std::unique_ptr<adapter> make() {
    return std::make_unique<audio_adapter>();
}

bool transcriptions_path(std::string_view path) noexcept {
    return path == "/v1/audio/transcriptions";
}
bool translations_path(std::string_view path) noexcept {
    return path == "/v1/audio/translations";
}

}  // namespace

extern constinit const dialect openai_transcriptions_dialect{api_kind::openai_transcriptions,
                                                             "openai_transcriptions",
                                                             transcriptions_path,
                                                             read_request,
                                                             nullptr,
                                                             make};
extern constinit const dialect openai_translations_dialect{api_kind::openai_translations,
                                                           "openai_translations",
                                                           translations_path,
                                                           read_request,
                                                           nullptr,
                                                           make};

}  // namespace tokenmeter::protocol
