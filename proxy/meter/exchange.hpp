// meter/exchange: everything the proxy observes about one metered request, fed from the relay.
// Chooses SSE, NDJSON or whole-body decoding from the response head, runs the dialect adapter, and
// drives the stream_meter. Never touches the bytes it is shown; a failure only counts.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <variant>

#include "core/time.hpp"
#include "meter/stream_meter.hpp"
#include "ndjson/parser.hpp"
#include "protocol/adapter.hpp"
#include "protocol/types.hpp"
#include "sse/parser.hpp"

namespace tokenmeter::meter {

// The tail of a JSON body too large to read whole that is kept for its usage report.
inline constexpr std::size_t response_tail_bytes = std::size_t{64} * 1024;

struct exchange_limits {
    std::size_t max_sse_event_bytes = std::size_t{4} * 1024 * 1024;
    std::size_t max_buffered_response_bytes = std::size_t{16} * 1024 * 1024;
    // Prompt bytes tokenized exactly; the rest of a longer prompt is estimated
    // (tokenizer::encoder::count_bounded).
    std::size_t max_prompt_count_bytes = std::size_t{1} * 1024 * 1024;
};

// The content type a response whose events come as whole messages (a WebSocket tunnel's,
// observe/realtime_session) gives its head: no body follows to frame, each event is shown on
// its own (on_message, on_event). Never on the wire.
inline constexpr std::string_view message_framing = "tokenmeter/websocket-messages";

// When the prompt is tokenized (config count_input_tokens).
enum class input_counting : std::uint8_t { when_unreported, always, never };

class exchange {
  public:
    exchange(protocol::api_kind api, const protocol::request_info& request,
             core::time_point request_received, const std::vector<double>* itl_bounds,
             exchange_limits limits);

    void on_request_sent() noexcept { meter_.on_request_sent(); }
    void on_local_answer(std::string_view code) { meter_.on_local_answer(code); }
    void on_response_head(int status, std::string_view content_type, core::time_point at);
    // The body that follows is in a form no adapter reads (a content coding): it is not parsed,
    // and counted as a parse error, so the response does not pass for an empty one.
    void on_unreadable_body();
    // A span of response body bytes exactly as forwarded to the client, stamped with its read.
    void on_body(std::string_view bytes, core::time_point at);
    // A piece of a response its caller decoded itself (a tunnel's message: observe/
    // realtime_session), instead of body bytes.
    void on_event(const protocol::response_chunk& chunk, core::time_point at) {
        last_read_ = at;
        meter_.on_chunk(chunk, at);
    }
    // One whole event of a response that comes as messages, read by the dialect's adapter as
    // the data of one SSE event (the Responses API's WebSocket mode sends the events its SSE
    // form does).
    void on_message(std::string_view text, core::time_point at) {
        last_read_ = at;
        if (adapter_) {
            adapter_->on_event({}, text, at, meter_);
        }
    }
    request_summary finish(end_reason reason, core::time_point at);

    // Re-tokenizes output (and, per policy, the prompt) with these tokenizers. Call before the
    // response head. The prompt text is kept until finish, when it is counted if needed.
    void use_encoders(encoders which, input_counting policy, std::string prompt_text);

    [[nodiscard]] std::size_t buffered_bytes() const noexcept;
    // The bytes finish() would read as it stands: the JSON body it parses and the prompt bytes
    // it may count, per tokenizer, within max_prompt_count_bytes (a count the usage report may
    // yet make unneeded is included). What the caller weighs to finish off its I/O thread.
    [[nodiscard]] std::size_t finish_cost_bytes() const noexcept;
    // The bytes of the prompt and the response body this exchange holds for finish().
    [[nodiscard]] std::size_t retained_bytes() const noexcept {
        return prompt_text_.capacity() + buffered_bytes();
    }
    [[nodiscard]] const request_summary& current() const noexcept { return meter_.current(); }

  private:
    // The usage report at the end of a JSON body larger than max_buffered_response_bytes, from
    // the tail kept of it.
    void read_usage_in_tail(std::string_view tail);

    std::unique_ptr<protocol::adapter> adapter_;  // null for api_kind::none: nothing decoded
    stream_meter meter_;
    // The body's reader, made when the response head says which: an SSE or NDJSON parser, or
    // the whole JSON body so far, or its last response_tail_bytes once it is too large
    // (monostate: the body is not decoded). One of them, not all three in every open request.
    std::variant<std::monostate, sse::parser, ndjson::parser, std::string> body_;
    exchange_limits limits_;
    bool expect_stream_ = false;
    bool json_overflow_ = false;
    bool body_unread_ = false;  // a content coding the meter does not decode: not read at all
    core::time_point last_read_{};
    encoders encoders_{};
    input_counting input_policy_ = input_counting::never;
    bool prompt_parsed_ = false;
    std::uint64_t prompt_token_ids_ = 0;  // request_info::prompt_token_ids
    std::string prompt_text_;
};

}  // namespace tokenmeter::meter
