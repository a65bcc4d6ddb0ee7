// protocol/openai: OpenAI Chat Completions and Completions: the response adapter (one
// json_walk pass per chunk, or the chunk reader for the common shape) and the two dialect table
// rows. The request reader is protocol/openai_request.cpp, usage injection
// protocol/openai_inject.cpp.
#include "protocol/openai.hpp"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <vector>

#include "protocol/chunk_builder.hpp"
#include "protocol/dialect.hpp"
#include "protocol/dialects.hpp"
#include "protocol/json_limits.hpp"
#include "protocol/json_walk.hpp"
#include "protocol/openai_chunk_reader.hpp"

namespace tokenmeter::protocol {
namespace {

using openai_detail::chat_chunk_reader;

// Off only in tests and benchmarks that compare the reader with the walk.
// NOLINTNEXTLINE(cppcoreguidelines-avoid-non-const-global-variables): a process-wide test switch
std::atomic<bool> chunk_reader_enabled{true};

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
            case frame::root:
                if (key == "model") {
                    out_->set_model(value);
                }
                break;
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

extern constinit const dialect openai_chat_dialect{api_kind::openai_chat_completions,
                                                   "openai_chat",
                                                   is_chat_path,
                                                   read_request,
                                                   may_inject_usage,
                                                   make_chat};
extern constinit const dialect openai_completions_dialect{api_kind::openai_completions,
                                                          "openai_completions",
                                                          is_completions_path,
                                                          read_request,
                                                          may_inject_usage,
                                                          make_completions};

}  // namespace tokenmeter::protocol
