// sse/parser: incremental text/event-stream parser (WHATWG HTML "event stream interpretation").
// Sans-I/O: feed() takes any byte span, split anywhere; events are handed to a callback whose
// string_views are valid only during the call. Memory is bounded by max_event_bytes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "sse/line_splitter.hpp"

namespace tokenmeter::sse {

struct event {
    std::string_view type;  // "message" when no event: field was given
    std::string_view data;  // data lines joined with '\n', trailing '\n' removed
    std::string_view id;    // last event id seen so far (WHATWG: persists across events)
};

struct parser_stats {
    std::uint64_t events = 0;
    std::uint64_t comments = 0;
    std::uint64_t oversized_events = 0;  // events dropped because they exceeded max_event_bytes
    std::uint64_t bytes = 0;             // every byte fed, BOM included
};

class parser {
  public:
    static constexpr std::size_t default_max_event_bytes = std::size_t{4} * 1024 * 1024;

    // An event's size is the bytes of its pending data and type plus the line being read.
    // Comment lines are never buffered and never count, so keep-alives cost nothing.
    explicit parser(std::size_t max_event_bytes = default_max_event_bytes);

    // Parses `bytes`; calls on_event(const event&) for each complete event. The views in the
    // event are valid only during the call. on_event must not call back into this parser.
    template <typename OnEvent>
    void feed(std::string_view bytes, OnEvent&& on_event) {
        begin_feed(bytes);
        while (next_event()) {
            on_event(static_cast<const event&>(ready_));
        }
    }

    // End of stream. Per the spec an unterminated event at EOF is discarded (not dispatched).
    // Returns true when the stream ended on an event boundary (no partial line or event).
    // Afterwards the parser is back at the start of a stream (a BOM is skipped again); the
    // last event id is kept, as an EventSource keeps it across reconnections.
    bool finish() noexcept;

    [[nodiscard]] const parser_stats& stats() const noexcept { return stats_; }
    // Bytes currently held for a partial line or event (bounded by max_event_bytes, plus at
    // most two bytes of a possible BOM). The persistent last event id is not included.
    [[nodiscard]] std::size_t buffered_bytes() const noexcept;

  private:
    // What to do with the rest of a line whose start came in an earlier feed().
    enum class partial_line : std::uint8_t {
        none,     // no partial line, or its bytes are in line_buf_
        comment,  // a comment: dropped unbuffered, counted when it ends
        discard,  // part of an oversized event: dropped unbuffered
    };

    void begin_feed(std::string_view bytes);
    // Consumes lines from the current span until an event is ready in ready_ (true) or the
    // span is used up (false); a trailing partial line is kept for the next feed.
    bool next_event();
    // The common event, "data:<value>\n\n" whole in the span at the start of an event with
    // nothing pending, read in one scan: true with it in ready_ (what the line-by-line path
    // gives for it), false with nothing done.
    bool whole_data_event();
    // Returns true when the line completes an event with data, left in ready_. `in_span`: the
    // line lies in the current feed's bytes (not in line_buf_), so a view of it stays valid
    // until the feed returns.
    bool handle_line(std::string_view line, bool in_span);
    void handle_field(std::string_view line, bool in_span);
    // Copies a data value held as a view into data_buf_ (before anything else is added to the
    // event, and before the feed's bytes go away).
    void keep_data_view();
    void stash_partial(const char* first, std::size_t size);
    [[nodiscard]] bool fits(std::size_t line_bytes) const noexcept;
    void drop_oversized_event() noexcept;
    void reset_event() noexcept;

    std::size_t max_event_bytes_;
    parser_stats stats_;

    std::string line_buf_;  // only a line that spans two feeds is copied here
    std::string data_buf_;  // each data value followed by '\n'
    // An event's first data value, while it is its only one and lies in the current feed's
    // bytes: held as a view, not copied (the common event is one data line and a blank line).
    std::string_view data_view_;
    bool data_in_view_ = false;
    std::string type_buf_;
    std::string id_buf_;  // persists across events and streams
    event ready_;         // views into the buffers above, valid until next_event()

    line_splitter lines_;  // the current feed's span, scanned in place

    std::uint8_t bom_matched_ = 0;  // BOM bytes seen so far at the start of the stream
    bool bom_done_ = false;
    bool skipping_ = false;  // inside an oversized event, until the next blank line
    bool event_has_fields_ = false;
    bool dispatched_ = false;  // ready_ was handed out; clear the event before going on
    partial_line partial_ = partial_line::none;
};

}  // namespace tokenmeter::sse
