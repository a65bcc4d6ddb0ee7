// protocol/usage_filter: undoes, in the response, what the proxy's usage injection changed in an
// OpenAI event stream, so the client gets exactly the stream it requested: the one usage-only
// chunk ("choices": [] with "usage") is removed, and so is the "usage":null member OpenAI adds to
// every other chunk once usage is requested. Sans-I/O; every other byte is passed on unchanged
// and in order. An event goes out in the read that completes it (its blank line): only the
// bytes of an event still incomplete at the end of a read are held, which the client could not
// have used before that blank line anyway. An event over max_held_bytes is passed through as it
// arrives.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "sse/line_splitter.hpp"

namespace tokenmeter::protocol {

class usage_filter {
  public:
    static constexpr std::size_t default_max_held_bytes = std::size_t{64} * 1024;

    // continuous_usage: the proxy also asked for usage in every chunk, so the "usage":{...}
    // member of every other chunk is removed too.
    explicit usage_filter(std::size_t max_held_bytes = default_max_held_bytes,
                          bool continuous_usage = false)
        : max_held_bytes_(max_held_bytes), continuous_usage_(continuous_usage) {}

    // Filters one read. The returned view (into this object) holds the bytes to forward now; it
    // stays valid until the next call. `last`: the body ends here, so nothing is held back.
    std::string_view feed(std::string_view bytes, bool last);

    [[nodiscard]] bool removed() const noexcept { return removed_; }
    [[nodiscard]] std::size_t held_bytes() const noexcept { return event_.size(); }

  private:
    // A complete event: is it the usage-only chunk?
    [[nodiscard]] static bool is_usage_only(std::string_view event);
    void append_without_null_usage(std::string_view event);
    void end_event();

    std::size_t max_held_bytes_;
    bool continuous_usage_;
    std::string out_;
    std::string event_;            // bytes of the current event, while it may be the usage chunk
    sse::line_splitter lines_;     // the same line ends as the SSE parser sees
    bool passing_ = false;         // the current event was judged "keep": its bytes go straight out
    bool at_line_start_ = true;    // the current line has no bytes yet: a line end here is blank
    bool cr_ended_event_ = false;  // a CR just ended an event; an LF may follow in the next read
    bool dropped_last_ = false;    // the event that just ended was the one removed
    bool removed_ = false;         // only one chunk is ever removed
};

}  // namespace tokenmeter::protocol
