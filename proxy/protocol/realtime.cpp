#include "protocol/realtime.hpp"

#include <array>

#include "core/text.hpp"
#include "protocol/dialect.hpp"
#include "protocol/json_walk.hpp"

namespace tokenmeter::protocol {
namespace {

constexpr std::size_t max_type_bytes = 96;

realtime_event_type server_type(std::string_view type) noexcept {
    using t = realtime_event_type;
    static constexpr std::array<std::string_view, 5> text_deltas{
        "response.text.delta", "response.output_text.delta", "response.audio_transcript.delta",
        "response.output_audio_transcript.delta", "response.refusal.delta"};
    for (std::string_view name : text_deltas) {
        if (type == name) {
            return t::text_delta;
        }
    }
    if (type == "response.function_call_arguments.delta") {
        return t::tool_delta;
    }
    if (type == "response.audio.delta" || type == "response.output_audio.delta") {
        return t::audio_delta;
    }
    if (type == "response.created") {
        return t::response_created;
    }
    if (type == "response.done") {
        return t::response_done;
    }
    if (type == "response.completed" || type == "response.failed" ||
        type == "response.incomplete") {
        return t::response_finished;
    }
    if (type == "session.created" || type == "session.updated" ||
        type == "transcription_session.created" || type == "transcription_session.updated") {
        return t::session_state;
    }
    if (type == "input_audio_buffer.committed") {
        return t::input_committed;
    }
    if (type == "error") {
        return t::error;
    }
    if (type == "conversation.item.input_audio_transcription.delta") {
        return t::transcription_delta;
    }
    if (type == "conversation.item.input_audio_transcription.completed") {
        return t::transcription_completed;
    }
    if (type == "conversation.item.input_audio_transcription.failed") {
        return t::transcription_failed;
    }
    return t::other;
}

realtime_event_type client_type(std::string_view type) noexcept {
    using t = realtime_event_type;
    if (type == "session.update" || type == "transcription_session.update") {
        return t::session_update;
    }
    if (type == "response.create") {
        return t::response_create;
    }
    if (type == "input_audio_buffer.commit") {
        return t::input_committed;
    }
    return t::other;
}

// Walks one event, noting the members the meter reads.
class event_visitor final : public json_visitor {
  public:
    event_visitor(realtime_event& out, bool from_client) : out_(out), from_client_(from_client) {}

    void on_open(const json_path& path, bool object) override {
        if (path.size() == 0) {
            root_object_ = object;
        }
    }

    void on_string(const json_path& path, std::string_view value) override {
        if (path.is({"type"})) {
            if (!typed_) {
                typed_ = true;
                type_.assign(value.substr(0, max_type_bytes));
                out_.type = from_client_ ? client_type(type_) : server_type(type_);
            }
        } else if (path.is({"delta"})) {
            // An audio delta's base64 is not kept: only a text's is (or every delta while the
            // type is not known yet, in an event that names it last).
            if (!typed_ || out_.type == realtime_event_type::text_delta ||
                out_.type == realtime_event_type::tool_delta ||
                out_.type == realtime_event_type::transcription_delta) {
                out_.delta.assign(value);
            }
        } else if (path.is({"response_id"}) || path.is({"response", "id"})) {
            out_.response_id.assign(value.substr(0, max_realtime_id_bytes));
        } else if (path.is({"item_id"})) {
            out_.item_id.assign(value.substr(0, max_realtime_id_bytes));
        } else if (path.is({"transcript"})) {
            out_.transcript.assign(value);
        } else if (path.is({"session", "model"})) {
            out_.model.assign(value.substr(0, max_realtime_id_bytes * 2));
        } else if (path.is({"session", "input_audio_transcription", "model"}) ||
                   path.is({"session", "audio", "input", "transcription", "model"})) {
            out_.transcription_model.assign(value.substr(0, max_realtime_id_bytes * 2));
        } else if (path.is({"response", "status"})) {
            out_.status.assign(value.substr(0, max_type_bytes));
        }
    }

    void on_count(const json_path& path, std::uint64_t value) override {
        // response.done's response.usage, or a transcription's root usage.
        std::size_t skip = 0;
        if (path.size() >= 3 && path[0] == "response" && path[1] == "usage") {
            skip = 2;
        } else if (path.size() >= 2 && path[0] == "usage") {
            skip = 1;
        } else {
            return;
        }
        std::optional<std::uint64_t> token_usage::*field = nullptr;
        if (path.is_from(skip, {"input_tokens"})) {
            field = &token_usage::input_tokens;
        } else if (path.is_from(skip, {"output_tokens"})) {
            field = &token_usage::output_tokens;
        } else if (path.is_from(skip, {"input_token_details", "cached_tokens"})) {
            field = &token_usage::cached_input_tokens;
        } else if (path.is_from(skip, {"input_token_details", "audio_tokens"})) {
            field = &token_usage::input_audio_tokens;
        } else if (path.is_from(skip, {"output_token_details", "audio_tokens"})) {
            field = &token_usage::output_audio_tokens;
        }
        if (field != nullptr) {
            auto& usage = out_.usage ? *out_.usage : out_.usage.emplace();
            usage.*field = value;
        }
    }

    [[nodiscard]] bool root_object() const noexcept { return root_object_; }
    [[nodiscard]] bool typed() const noexcept { return typed_; }

  private:
    realtime_event& out_;
    bool from_client_;
    bool root_object_ = false;
    bool typed_ = false;
    std::string type_;
};

request_info no_request(std::string_view /*path*/, std::string_view /*body*/) {
    return request_info{};
}
bool never_by_path(std::string_view /*path*/) noexcept {
    return false;  // a POST never speaks it: only a tunnel does (tunnel_api_for_path)
}
std::unique_ptr<adapter> no_adapter() {
    return nullptr;  // events are read by the session (realtime_reader), whole messages at a time
}

}  // namespace

api_kind tunnel_api_for_path(std::string_view target) noexcept {
    const std::string_view path = target.substr(0, target.find('?'));
    if (path == "/v1/realtime") {
        return api_kind::openai_realtime;
    }
    return path == "/v1/responses" ? api_kind::openai_responses : api_kind::none;
}

std::string model_from_query(std::string_view target) {
    const std::size_t query_at = target.find('?');
    if (query_at == std::string_view::npos) {
        return {};
    }
    std::string_view query = target.substr(query_at + 1);
    while (!query.empty()) {
        const std::size_t amp = query.find('&');
        const std::string_view pair = query.substr(0, amp);
        query = amp == std::string_view::npos ? std::string_view{} : query.substr(amp + 1);
        if (!pair.starts_with("model=")) {
            continue;
        }
        const std::string_view raw = pair.substr(6);
        std::string model;
        for (std::size_t i = 0; i < raw.size() && model.size() < max_realtime_id_bytes * 2; ++i) {
            if (raw[i] == '%' && i + 2 < raw.size() && core::hex_digit_value(raw[i + 1]) >= 0 &&
                core::hex_digit_value(raw[i + 2]) >= 0) {
                model.push_back(static_cast<char>(core::hex_digit_value(raw[i + 1]) * 16 +
                                                  core::hex_digit_value(raw[i + 2])));
                i += 2;
            } else {
                model.push_back(raw[i] == '+' ? ' ' : raw[i]);
            }
        }
        return model;
    }
    return {};
}

const realtime_event* realtime_reader::read(std::string_view text, bool from_client,
                                            parse_error& error) {
    event_.type = realtime_event_type::other;
    event_.response_id.clear();
    event_.item_id.clear();
    event_.model.clear();
    event_.transcription_model.clear();
    event_.transcript.clear();
    event_.delta.clear();
    event_.status.clear();
    event_.usage.reset();
    event_visitor visitor(event_, from_client);
    if (walk_json_scratch(text, visitor) != walk_result::ok) {
        error = parse_error::invalid_json;
        return nullptr;
    }
    if (!visitor.root_object() || !visitor.typed()) {
        error = parse_error::unexpected_shape;
        return nullptr;
    }
    return &event_;
}

extern constinit const dialect openai_realtime_dialect{
    api_kind::openai_realtime, "openai_realtime", never_by_path, no_request, nullptr, no_adapter};
extern constinit const dialect openai_realtime_transcription_dialect{
    api_kind::openai_realtime_transcription,
    "openai_realtime_transcription",
    never_by_path,
    no_request,
    nullptr,
    no_adapter};

}  // namespace tokenmeter::protocol
