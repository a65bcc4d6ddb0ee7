// protocol/pooling: the APIs that bill only their input: embeddings, rerank, score, classify,
// pooling (vLLM's pooling-model endpoints) and moderations. None generates text, none streams:
// the request is read for its model and input, the whole JSON answer for its usage report.
//
// Usage rule: usage.prompt_tokens is the input; without it usage.total_tokens (vLLM's rerank
// reports only that, and a pooling model has no output), else Cohere's meta.billed_units
// .input_tokens, else meta.tokens.input_tokens. usage.completion_tokens, when given, is the
// output. A moderation answer reports nothing: its input is counted from the request.
#include <array>
#include <optional>
#include <string>

#include "protocol/chunk_builder.hpp"
#include "protocol/dialect.hpp"
#include "protocol/json_walk.hpp"

namespace tokenmeter::protocol {
namespace {

// The root members that carry input, in the order their texts are joined: embeddings',
// classify's, pooling's and moderations' "input" (or vLLM's chat-form "messages"), rerank's
// query and documents, score's text_1 and text_2 (and the queries/documents names).
constexpr std::array<std::string_view, 7> input_keys{"input",     "messages", "query", "queries",
                                                     "documents", "text_1",   "text_2"};

// The request in one json_walk pass (bounded by max_json_depth; nothing is built but the joined
// texts). Within an input member, a string is input text where it is the member itself, an
// element of an array, or the "text" or "content" of an object: a part's "type" or an image's
// "url" is not. Integers in "input" (a token id array, or an array of them) count as tokens.
// A root member named twice counts as Python's json reads it: the last one.
class pooling_request_walk final : public json_visitor {
  public:
    explicit pooling_request_walk(request_info& info) : info_(info) {}

    void join() {
        for (const input_member& member : members_) {
            if (!member.text.empty()) {
                if (!info_.prompt_text.empty()) {
                    info_.prompt_text += '\n';
                }
                info_.prompt_text += member.text;
            }
            info_.prompt_chars += member.chars;
            info_.prompt_token_ids += member.token_ids;
        }
    }

    bool root_object = false;

  private:
    struct input_member {
        std::string text;
        std::uint64_t chars = 0;
        std::uint64_t token_ids = 0;
    };

    // The input member `path` is in; nullptr when it is in none.
    input_member* member_of(const json_path& path) {
        if (path.size() == 0) {
            return nullptr;
        }
        for (std::size_t i = 0; i < input_keys.size(); ++i) {
            if (path[0] == input_keys[i]) {
                return &members_[i];
            }
        }
        return nullptr;
    }

    // A root member starts again: the last of two equal keys is the one read.
    void restart(const json_path& path) {
        if (path.size() == 1) {
            if (input_member* member = member_of(path)) {
                *member = {};
            }
        }
    }

    void on_open(const json_path& path, bool object) override {
        if (path.size() == 0) {
            root_object = object;
        }
        restart(path);
    }

    void on_string(const json_path& path, std::string_view value) override {
        if (path.is({"model"})) {
            info_.model.assign(value);
            return;
        }
        restart(path);
        input_member* member = member_of(path);
        if (member == nullptr) {
            return;
        }
        const std::string_view last = path.back();
        if (path.size() > 1 && last != json_path::element && last != "text" && last != "content") {
            return;
        }
        if (!member->text.empty()) {
            member->text += '\n';
        }
        member->text += value;
        member->chars += value.size();
    }

    void on_count(const json_path& path, std::uint64_t /*value*/) override {
        restart(path);
        // input: [ids] or [[ids], ...]
        if (path.is({"input", json_path::element}) ||
            path.is({"input", json_path::element, json_path::element})) {
            members_[0].token_ids += 1;
        }
    }

    void on_other(const json_path& path) override { restart(path); }
    void on_bool(const json_path& path, bool /*value*/) override { restart(path); }

    request_info& info_;
    std::array<input_member, input_keys.size()> members_{};
};

request_info read_request(std::string_view /*path*/, std::string_view body) {
    request_info info;
    // Nothing is generated: admission reserves the prompt only.
    info.max_output_tokens = 0;
    pooling_request_walk walk(info);
    if (walk_json_scratch(body, walk) != walk_result::ok || !walk.root_object) {
        info.model.clear();
        return info;  // forwarded as it is; the server decides
    }
    info.body_parsed = true;
    walk.join();
    return info;
}

// The whole answer (or, for a body too large to read, the usage report at its end).
class pooling_adapter final : public json_document_adapter, private json_visitor {
  private:
    void decode(std::string_view text, bool /*streamed*/, core::time_point at,
                chunk_sink& sink) override {
        out_ = &chunk_builder::for_thread();
        out_->reset();
        seen_ = {};
        const walk_result walked = walk_json_scratch(text, *this);
        if (walked != walk_result::ok || !seen_.root_object || !seen_.known) {
            sink.on_parse_error(walked != walk_result::ok ? parse_error::invalid_json
                                                          : parse_error::unexpected_shape);
            return;
        }
        if (auto input = seen_.input()) {
            out_->usage_ref().input_tokens = input;
        }
        sink.on_chunk(out_->chunk(), at);
    }

    void on_open(const json_path& path, bool object) override {
        if (path.size() == 0) {
            seen_.root_object = object;
        } else if (path.size() == 1) {
            const std::string_view key = path.back();
            if (key == "error") {
                out_->error = true;
            }
            seen_.known = seen_.known || key == "data" || key == "results" || key == "usage" ||
                          key == "meta" || key == "error";
        }
    }

    void on_string(const json_path& path, std::string_view value) override {
        // vLLM's error body: {"object": "error", "message": ..., "code": ...}
        if (path.is({"object"}) && value == "error") {
            out_->error = true;
            seen_.known = true;
        } else if (path.is({"model"})) {
            out_->set_model(value);
        }
    }

    void on_count(const json_path& path, std::uint64_t value) override {
        if (path.is({"usage", "prompt_tokens"})) {
            seen_.prompt = value;
        } else if (path.is({"usage", "total_tokens"})) {
            seen_.total = value;
        } else if (path.is({"usage", "completion_tokens"})) {
            out_->usage_ref().output_tokens = value;
        } else if (path.is({"meta", "billed_units", "input_tokens"})) {
            seen_.billed = value;
        } else if (path.is({"meta", "tokens", "input_tokens"})) {
            seen_.meta_tokens = value;
        }
    }

    // What one body's walk found besides text: the input counts in the order the usage rule
    // takes them, and whether the body is an answer of these APIs at all.
    struct findings {
        std::optional<std::uint64_t> prompt;
        std::optional<std::uint64_t> total;
        std::optional<std::uint64_t> billed;
        std::optional<std::uint64_t> meta_tokens;
        bool root_object = false;
        bool known = false;

        [[nodiscard]] std::optional<std::uint64_t> input() const {
            for (const auto* count : {&prompt, &total, &billed, &meta_tokens}) {
                if (*count) {
                    return *count;
                }
            }
            return std::nullopt;
        }
    };

    chunk_builder* out_ = nullptr;  // the thread's builder, taken as each body's walk starts
    findings seen_;
};

std::unique_ptr<adapter> make() {
    return std::make_unique<pooling_adapter>();
}

bool embeddings_path(std::string_view path) noexcept {
    return path == "/v1/embeddings" || path == "/embeddings";
}
bool rerank_path(std::string_view path) noexcept {
    return path == "/rerank" || path == "/v1/rerank" || path == "/v2/rerank";
}
bool score_path(std::string_view path) noexcept {
    return path == "/score" || path == "/v1/score";
}
bool classify_path(std::string_view path) noexcept {
    return path == "/classify";
}
bool pooling_path(std::string_view path) noexcept {
    return path == "/pooling";
}
bool moderations_path(std::string_view path) noexcept {
    return path == "/v1/moderations";
}

}  // namespace

extern constinit const dialect openai_embeddings_dialect{
    api_kind::openai_embeddings, "openai_embeddings", embeddings_path, read_request, nullptr, make};
extern constinit const dialect rerank_dialect{api_kind::rerank, "rerank", rerank_path,
                                              read_request,     nullptr,  make};
extern constinit const dialect score_dialect{api_kind::score, "score", score_path,
                                             read_request,    nullptr, make};
extern constinit const dialect classify_dialect{api_kind::classify, "classify", classify_path,
                                                read_request,       nullptr,    make};
extern constinit const dialect pooling_dialect{api_kind::pooling, "pooling", pooling_path,
                                               read_request,      nullptr,   make};
extern constinit const dialect openai_moderations_dialect{api_kind::openai_moderations,
                                                          "openai_moderations",
                                                          moderations_path,
                                                          read_request,
                                                          nullptr,
                                                          make};

}  // namespace tokenmeter::protocol
