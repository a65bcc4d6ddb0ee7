#include "protocol/usage_filter.hpp"

namespace tokenmeter::protocol {
namespace {

constexpr bool is_space(char c) {
    return c == ' ' || c == '\t' || c == '\r' || c == '\n';
}

// Position just after `"key"` followed by optional space and ':' and optional space, searching
// from `from`; npos when absent. A key can only appear unescaped as a real member name: inside
// a JSON string every quote is escaped.
std::size_t after_key(std::string_view text, std::string_view quoted_key, std::size_t from = 0) {
    for (;;) {
        std::size_t at = text.find(quoted_key, from);
        if (at == std::string_view::npos) {
            return at;
        }
        std::size_t i = at + quoted_key.size();
        while (i < text.size() && is_space(text[i])) {
            ++i;
        }
        if (i < text.size() && text[i] == ':') {
            ++i;
            while (i < text.size() && is_space(text[i])) {
                ++i;
            }
            return i;
        }
        from = at + 1;
    }
}

}  // namespace

usage_filter::verdict usage_filter::judge(std::string_view event, bool complete) {
    std::size_t choices = after_key(event, "\"choices\"");
    if (choices == std::string_view::npos || choices >= event.size()) {
        return complete ? verdict::keep : verdict::undecided;
    }
    if (event[choices] != '[') {
        return verdict::keep;
    }
    std::size_t i = choices + 1;
    while (i < event.size() && is_space(event[i])) {
        ++i;
    }
    if (i >= event.size()) {
        return complete ? verdict::keep : verdict::undecided;
    }
    if (event[i] != ']') {
        return verdict::keep;  // a chunk with choices: text, never the usage-only chunk
    }
    std::size_t usage = after_key(event, "\"usage\"");
    if (usage != std::string_view::npos && usage < event.size() && event[usage] == '{') {
        return complete ? verdict::usage_only : verdict::undecided;
    }
    return complete ? verdict::keep : verdict::undecided;
}

void usage_filter::end_event() {
    dropped_last_ = false;
    if (!passing_) {
        if (!removed_ && judge(event_, true) == verdict::usage_only) {
            removed_ = true;
            dropped_last_ = true;
        } else {
            out_.append(event_);
        }
    }
    event_.clear();
    passing_ = false;
}

std::string_view usage_filter::feed(std::string_view bytes, bool last) {
    out_.clear();
    std::size_t run_start = 0;  // start of bytes in `bytes` not yet copied to out_ or event_
    auto flush_run = [&](std::size_t to) {
        std::string_view run = bytes.substr(run_start, to - run_start);
        (passing_ || removed_ ? out_ : event_).append(run);
        run_start = to;
    };
    for (std::size_t i = 0; i < bytes.size(); ++i) {
        char c = bytes[i];
        if (c == '\n' && after_cr_) {
            after_cr_ = false;  // the LF of a CR LF: same line end
            if (cr_ended_event_) {
                // The CR ended an event at the end of the previous read; its LF belongs to
                // that event, which is already out (or removed with it).
                cr_ended_event_ = false;
                flush_run(i);
                if (!dropped_last_) {
                    out_.push_back('\n');
                }
                run_start = i + 1;
            }
            continue;
        }
        cr_ended_event_ = false;
        after_cr_ = c == '\r';
        if (c == '\r' || c == '\n') {
            if (at_line_start_) {
                // A blank line ends the event (or is stray, between events).
                flush_run(i + 1);
                if (c == '\r' && i + 1 < bytes.size() && bytes[i + 1] == '\n') {
                    flush_run(i + 2);
                    after_cr_ = false;
                    ++i;
                }
                end_event();
                cr_ended_event_ = after_cr_;
                continue;
            }
            at_line_start_ = true;
            continue;
        }
        at_line_start_ = false;
    }
    flush_run(bytes.size());
    if (!passing_ && !event_.empty()) {
        // An event still open at the end of this read: let it go now unless it may still be
        // the usage chunk (and is small enough to hold).
        verdict v = removed_ ? verdict::keep : judge(event_, false);
        if (last || v == verdict::keep || event_.size() > max_held_bytes_) {
            out_.append(event_);
            event_.clear();
            passing_ = true;
        }
    }
    if (last) {
        passing_ = false;
    }
    return out_;
}

}  // namespace tokenmeter::protocol
