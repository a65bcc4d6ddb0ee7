// observe/realtime_session: the metering of an OpenAI Realtime session (a WebSocket tunnel on
// /v1/realtime). Each response in the session is metered as one request of its own, through the
// same observer (and so the same meter, billing rule, usage record and metrics) an HTTP request
// goes through: it begins at response.created (or the first event naming it), its clock starts
// at the client's response.create or committed input before it, its deltas are its stream, and
// response.done's usage ends it. A response still open when the tunnel closes ends as a cut
// stream does (what it streamed, counted). The transcriptions of the session's input are metered
// likewise, one per committed item (openai_realtime_transcription). The Responses API's
// WebSocket mode (/v1/responses) is metered here too: each response.create is one request, its
// events read as their SSE form is (protocol/openai_responses). Asio-free, unit-tested without
// sockets.
//
// Each response's usage record carries the upgrade's X-Request-Id with ":<n>" appended, n the
// request's number in the session from 1 ("abc:1", "abc:2"); none when the upgrade had none.
#pragma once

#include <cstddef>
#include <memory>

#include "observe/observer.hpp"

namespace tokenmeter::observe {

// Responses a session meters at once; an event opening one more is a parse error
// (unexpected_shape) and that response goes unmetered.
inline constexpr std::size_t max_open_realtime_responses = 16;

// `responses`: the observer each response begins in (the guarded one in the proxy); it outlives
// the session.
[[nodiscard]] std::unique_ptr<tunnel_observer> make_realtime_session(observer& responses,
                                                                     const tunnel_facts& facts);

}  // namespace tokenmeter::observe
