// protocol/speech: OpenAI text to speech (POST /v1/audio/speech). The request is JSON: the text
// to speak ("input"), the voice's "instructions", the model, and "stream_format" ("audio", the
// default, or "sse"). The answer is the audio itself (audio/mpeg, audio/wav, ...), which the
// meter does not read, or with stream_format "sse" events: speech.audio.delta (base64 audio)
// and a final speech.audio.done carrying usage {input_tokens, output_tokens, total_tokens}.
//
// Usage rule: usage.input_tokens and output_tokens of speech.audio.done when the server reports
// them. Otherwise the input is the text to speak (input, then instructions, joined by a
// newline), counted by the model's or the reference tokenizer like any prompt; the output is
// audio, never text: without a report it is unknown (request_info::countable_output), never 0.
#include <optional>
#include <string>

#include "protocol/chunk_builder.hpp"
#include "protocol/dialect.hpp"
#include "protocol/json_walk.hpp"

namespace tokenmeter::protocol {
namespace {

// The request's root members, in one bounded json_walk pass. A member named twice counts as
// Python's json reads it: the last one.
class speech_request_walk final : public json_visitor {
  public:
    void on_open(const json_path& path, bool object) override {
        if (path.size() == 0) {
            root_object = object;
        } else {
            forget(path);
        }
    }
    void on_string(const json_path& path, std::string_view value) override {
        if (path.is({"model"})) {
            model.assign(value);
        } else if (path.is({"input"})) {
            input.assign(value);
        } else if (path.is({"instructions"})) {
            instructions.assign(value);
        } else if (path.is({"stream_format"})) {
            sse = value == "sse";
        }
    }
    void on_count(const json_path& path, std::uint64_t /*value*/) override { forget(path); }
    void on_bool(const json_path& path, bool /*value*/) override { forget(path); }
    void on_other(const json_path& path) override { forget(path); }

    bool root_object = false;
    bool sse = false;
    std::string model;
    std::string input;
    std::string instructions;

  private:
    // A root member of another type replaces a string read before under the same name.
    void forget(const json_path& path) {
        if (path.size() != 1) {
            return;
        }
        if (path.is({"model"})) {
            model.clear();
        } else if (path.is({"input"})) {
            input.clear();
        } else if (path.is({"instructions"})) {
            instructions.clear();
        } else if (path.is({"stream_format"})) {
            sse = false;
        }
    }
};

request_info read_request(std::string_view /*path*/, std::string_view body) {
    request_info info;
    // The output is audio: admission reserves the text to speak only, and an unreported output
    // count stays unknown.
    info.max_output_tokens = 0;
    info.countable_output = false;
    speech_request_walk walk;
    if (walk_json_scratch(body, walk) != walk_result::ok || !walk.root_object) {
        return info;  // forwarded as it is; the server decides
    }
    info.body_parsed = true;
    info.model = std::move(walk.model);
    info.stream = walk.sse;
    info.prompt_text = std::move(walk.input);
    if (!walk.instructions.empty()) {
        if (!info.prompt_text.empty()) {
            info.prompt_text += '\n';
        }
        info.prompt_text += walk.instructions;
    }
    info.prompt_chars = info.prompt_text.size();
    return info;
}

// The SSE events of stream_format "sse". A whole JSON body is an error answer.
class speech_adapter final : public json_document_adapter, private json_visitor {
  private:
    void decode(std::string_view text, bool streamed, core::time_point at,
                chunk_sink& sink) override {
        out_ = &chunk_builder::for_thread();
        out_->reset();
        seen_ = {};
        const walk_result walked = walk_json_scratch(text, *this);
        if (walked != walk_result::ok || !seen_.root_object) {
            sink.on_parse_error(walked != walk_result::ok ? parse_error::invalid_json
                                                          : parse_error::unexpected_shape);
            return;
        }
        if (!seen_.known) {
            sink.on_parse_error(streamed ? parse_error::unknown_event
                                         : parse_error::unexpected_shape);
            return;
        }
        if (seen_.input || seen_.output) {
            out_->usage_ref().input_tokens = seen_.input;
            out_->usage_ref().output_tokens = seen_.output;
            // Everything spoken is audio: the output is all audio tokens.
            out_->usage_ref().output_audio_tokens = seen_.output;
        }
        // Audio is not text: the chunk carries none (role_only), so no token is counted from it.
        sink.on_chunk(out_->chunk(), at);
    }

    void on_open(const json_path& path, bool object) override {
        if (path.size() == 0) {
            seen_.root_object = object;
        } else if (path.is({"error"})) {
            out_->error = true;
            seen_.known = true;
        }
    }

    void on_string(const json_path& path, std::string_view value) override {
        if (path.is({"type"})) {
            seen_.known = seen_.known || value == "speech.audio.delta" ||
                          value == "speech.audio.done" || value == "error";
            if (value == "error") {
                out_->error = true;
            }
        }
    }

    void on_count(const json_path& path, std::uint64_t value) override {
        if (path.is({"usage", "input_tokens"})) {
            seen_.input = value;
        } else if (path.is({"usage", "output_tokens"})) {
            seen_.output = value;
        }
    }

    struct findings {
        std::optional<std::uint64_t> input;
        std::optional<std::uint64_t> output;
        bool root_object = false;
        bool known = false;
    };

    chunk_builder* out_ = nullptr;  // the thread's builder, taken as each event's walk starts
    findings seen_;
};

std::unique_ptr<adapter> make() {
    return std::make_unique<speech_adapter>();
}

bool speech_path(std::string_view path) noexcept {
    return path == "/v1/audio/speech";
}

}  // namespace

extern constinit const dialect openai_speech_dialect{
    api_kind::openai_speech, "openai_speech", speech_path, read_request, nullptr, make};

}  // namespace tokenmeter::protocol
