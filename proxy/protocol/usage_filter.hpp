// protocol/usage_filter: removes the one usage-only chunk ("choices": [] with "usage") from an
// OpenAI event stream whose usage the proxy asked for on the client's behalf, so the client gets
// exactly the stream it requested. Sans-I/O and byte-exact: every other byte is passed on
// unchanged, in order, in the same feed it arrived in, except the bytes of a still incomplete
// event that may yet turn out to be the usage chunk (held until its blank line, at most
// max_held_bytes).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace tokenmeter::protocol {

class usage_filter {
  public:
    static constexpr std::size_t default_max_held_bytes = 64 * 1024;

    explicit usage_filter(std::size_t max_held_bytes = default_max_held_bytes)
        : max_held_bytes_(max_held_bytes) {}

    // Filters one read. The returned view (into this object) holds the bytes to forward now; it
    // stays valid until the next call. `last`: the body ends here, so nothing is held back.
    std::string_view feed(std::string_view bytes, bool last);

    [[nodiscard]] bool removed() const noexcept { return removed_; }
    [[nodiscard]] std::size_t held_bytes() const noexcept { return event_.size(); }

  private:
    enum class verdict : std::uint8_t { undecided, keep, usage_only };

    // What the bytes of the current event say so far; `complete` when its blank line was seen.
    [[nodiscard]] static verdict judge(std::string_view event, bool complete);
    void end_event();

    std::size_t max_held_bytes_;
    std::string out_;
    std::string event_;     // bytes of the current event, while it may be the usage chunk
    bool passing_ = false;  // the current event was judged "keep": its bytes go straight out
    bool at_line_start_ = true;
    bool after_cr_ = false;
    bool cr_ended_event_ = false;  // a CR just ended an event; an LF may follow in the next read
    bool dropped_last_ = false;    // the event that just ended was the one removed
    bool removed_ = false;         // only one chunk is ever removed
};

}  // namespace tokenmeter::protocol
