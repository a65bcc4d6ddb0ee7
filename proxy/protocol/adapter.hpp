// protocol/adapter: the one interface every dialect adapter implements, so the exchange can run
// any of them over the shared SSE/NDJSON parsers. Adapters do no I/O, never throw and never see
// the bytes the client gets: they only read and report.
#pragma once

#include <string_view>

#include "core/time.hpp"
#include "protocol/types.hpp"

namespace tokenmeter::protocol {

class adapter {
  public:
    adapter() = default;
    adapter(const adapter&) = delete;
    adapter& operator=(const adapter&) = delete;
    virtual ~adapter() = default;

    // One framed unit of a streamed body: an SSE event (type, data) or one NDJSON line (type
    // empty, data the line). The views are valid only during the call.
    virtual void on_event(std::string_view type, std::string_view data, core::time_point at,
                          chunk_sink& sink) = 0;
    // A whole non-streamed body.
    virtual void on_body(std::string_view body, core::time_point at, chunk_sink& sink) = 0;
};

// For dialects whose streamed events are plain SSE data events carrying the same kind of JSON
// document as the whole body: any named event type other than "error" is unknown.
class json_document_adapter : public adapter {
  public:
    void on_event(std::string_view type, std::string_view data, core::time_point at,
                  chunk_sink& sink) final {
        if (type != "message" && type != "error") {
            sink.on_parse_error(parse_error::unknown_event);
            return;
        }
        if (done_marker_ && data == "[DONE]") {
            sink.on_done_marker(at);
            return;
        }
        decode(data, true, at, sink);
    }
    void on_body(std::string_view body, core::time_point at, chunk_sink& sink) final {
        decode(body, false, at, sink);
    }

  protected:
    // done_marker: the stream ends with `data: [DONE]` (OpenAI), reported as a done marker
    // rather than decoded.
    explicit json_document_adapter(bool done_marker = false) noexcept : done_marker_(done_marker) {}

    // One JSON document: a streamed chunk (streamed = true) or a whole body.
    virtual void decode(std::string_view text, bool streamed, core::time_point at,
                        chunk_sink& sink) = 0;

  private:
    bool done_marker_;
};

}  // namespace tokenmeter::protocol
