// protocol/realtime: the events of an OpenAI Realtime session (a WebSocket on /v1/realtime), one
// JSON text message at a time, read for what the meter needs: the session's model, where each
// response begins, its text and audio deltas, and the usage its response.done reports. No I/O;
// a message that is not a JSON object, or not valid UTF-8, is a parse error and nothing else.
//
// Usage rule: response.done's response.usage gives final totals per response: input_tokens
// (cached ones included, also given as input_token_details.cached_tokens; audio ones given as
// input_token_details.audio_tokens) and output_tokens (audio ones given as
// output_token_details.audio_tokens). The "*.done" events that repeat a whole text are not
// counted again; audio deltas are no text (they time the first output, they count nothing).
// A transcription of the input (conversation.item.input_audio_transcription.completed) reports
// its own root "usage" of the same shape (or of "type": "duration", which counts no tokens).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "protocol/types.hpp"

namespace tokenmeter::protocol {

// The API a WebSocket upgrade to `target` (path and optional query) speaks by its well-known
// path: openai_realtime for /v1/realtime, openai_responses for /v1/responses (the Responses
// API's WebSocket mode), none for every other tunnel (passed through, never read).
[[nodiscard]] api_kind tunnel_api_for_path(std::string_view target) noexcept;
// Whether `api` is a tunnel's (openai_realtime, openai_realtime_transcription): no HTTP request
// speaks it.
[[nodiscard]] constexpr bool is_tunnel_api(api_kind api) noexcept {
    return api == api_kind::openai_realtime || api == api_kind::openai_realtime_transcription;
}
// The value of the `model` query parameter of `target`, percent-decoded; "" when absent.
[[nodiscard]] std::string model_from_query(std::string_view target);

enum class realtime_event_type : std::uint8_t {
    other,             // an event the meter does not need (forwarded all the same)
    session_update,    // client: session.update (may name the model)
    session_state,     // server: session.created / session.updated (names the model)
    response_create,   // client: response.create (a response is asked for: the TTFT clock)
    input_committed,   // client input_audio_buffer.commit, server input_audio_buffer.committed
    response_created,  // server: response.created
    text_delta,        // server: output text, an audio transcript, a refusal
    tool_delta,        // server: function call arguments
    audio_delta,       // server: audio output (timing only)
    response_done,     // server: response.done (its usage)
    error,             // server: an error event
    // server: conversation.item.input_audio_transcription.delta / .completed / .failed, the
    // transcription of a committed input (its own model, its own usage)
    transcription_delta,
    transcription_completed,
    transcription_failed,
    // server, the Responses API's WebSocket mode: response.completed / .failed / .incomplete
    response_finished,
};

struct realtime_event {
    realtime_event_type type = realtime_event_type::other;
    std::string response_id;  // the response a server event belongs to; "" when none
    std::string item_id;      // the conversation item a transcription event belongs to
    std::string model;        // session.model, when the event names one
    // The input transcription's model, when a session event names one
    // (session.input_audio_transcription.model, or session.audio.input.transcription.model).
    std::string transcription_model;
    std::string transcript;  // a completed transcription's whole text
    std::string delta;       // the text of a text or tool delta
    std::string status;      // response.done's response.status
    std::optional<token_usage> usage;
};

// Bounds on what an event's fields are copied to: a longer id or model is cut.
inline constexpr std::size_t max_realtime_id_bytes = 128;

// Reads events; reuses its buffers from event to event. Not thread-safe: one per session.
class realtime_reader {
  public:
    // `from_client`: the event came from the client (its types differ from the server's).
    // nullptr, and `error` set, when the message is no event the meter can read. The event is
    // valid until the next read.
    [[nodiscard]] const realtime_event* read(std::string_view text, bool from_client,
                                             parse_error& error);

  private:
    realtime_event event_;
};

}  // namespace tokenmeter::protocol
