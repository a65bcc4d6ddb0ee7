// Fuzz target for the Realtime event reader (protocol/realtime): arbitrary bytes as one WebSocket
// text message, read as a client's event and as a server's. A message is either an event or a
// parse error, never both; what an event keeps is bounded (ids and models cut, no text longer
// than the message); reading the same bytes twice gives the same event (the reader's reused buffers
// carry nothing over); and the model query reader stays within its bound.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <optional>
#include <string>
#include <string_view>

#include "protocol/realtime.hpp"

namespace {

using namespace tokenmeter::protocol;

struct snapshot {
    bool read = false;
    parse_error error = parse_error::invalid_json;
    realtime_event_type type = realtime_event_type::other;
    std::string response_id, item_id, model, transcription_model, delta, transcript, status;
    std::optional<token_usage> usage;

    bool operator==(const snapshot& o) const {
        const auto same_usage = [](const std::optional<token_usage>& a,
                                   const std::optional<token_usage>& b) {
            if (a.has_value() != b.has_value()) {
                return false;
            }
            return !a ||
                   (a->input_tokens == b->input_tokens && a->output_tokens == b->output_tokens &&
                    a->cached_input_tokens == b->cached_input_tokens &&
                    a->input_audio_tokens == b->input_audio_tokens &&
                    a->output_audio_tokens == b->output_audio_tokens);
        };
        return read == o.read && (read ? type == o.type : error == o.error) &&
               response_id == o.response_id && item_id == o.item_id && model == o.model &&
               transcription_model == o.transcription_model && delta == o.delta &&
               transcript == o.transcript && status == o.status && same_usage(usage, o.usage);
    }
};

snapshot take(realtime_reader& reader, std::string_view text, bool from_client) {
    snapshot s;
    parse_error error = parse_error::unexpected_shape;
    const realtime_event* e = reader.read(text, from_client, error);
    if (e == nullptr) {
        s.error = error;
        return s;
    }
    s.read = true;
    s.type = e->type;
    s.response_id = e->response_id;
    s.item_id = e->item_id;
    s.model = e->model;
    s.transcription_model = e->transcription_model;
    s.delta = e->delta;
    s.transcript = e->transcript;
    s.status = e->status;
    s.usage = e->usage;
    if (s.response_id.size() > max_realtime_id_bytes || s.item_id.size() > max_realtime_id_bytes ||
        s.model.size() > 2 * max_realtime_id_bytes ||
        s.transcription_model.size() > 2 * max_realtime_id_bytes || s.delta.size() > text.size() ||
        s.transcript.size() > text.size()) {
        std::abort();
    }
    return s;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    const std::string_view text(reinterpret_cast<const char*>(data), size);
    realtime_reader reader;
    for (bool from_client : {false, true}) {
        const snapshot first = take(reader, text, from_client);
        (void)take(reader,
                   R"({"type":"response.done","response":{"id":"r","usage":{"input_tokens":1}}})",
                   false);
        const snapshot again = take(reader, text, from_client);
        if (!(first == again)) {
            std::abort();
        }
    }
    if (model_from_query(text).size() > 2 * max_realtime_id_bytes) {
        std::abort();
    }
    (void)tunnel_api_for_path(text);
    return 0;
}
